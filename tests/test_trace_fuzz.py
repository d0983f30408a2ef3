"""Fuzzing the trace parser with mutated real traces: every input either parses, or fails
with the parser's one error type (`TraceError`) whose message is one line,
`FILE:LINE: problem`, naming a line of the file. Never another exception; never a traceback
from the command line.

Inputs start as real trace text, the shipped traces/synthetic-mlp.log and small random
traces from traces/random_traces.py, and take one to four mutations: lines deleted,
duplicated, swapped, moved or replaced; JSON fields corrupted, removed or renamed; numbers,
types, tensor names and instructions changed; stray bytes inserted; the file truncated.

The examples are derandomized (the same ones every run, so CI is reproducible).
DTR_LANDSCAPE_FUZZ_EXAMPLES sets how many the parser sees (default 400); a long run:

    DTR_LANDSCAPE_FUZZ_EXAMPLES=20000 .venv/bin/python -m pytest tests/test_trace_fuzz.py
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st

from engine.sim import native
from engine.sim.policies import make_policy
from engine.sim.runtime import Simulation
from engine.sim.trace import KNOWN_INSTRUCTIONS, TraceError, parse_file
from tests.helpers import REPO, cli
from traces.random_traces import generate

EXAMPLES = int(os.environ.get("DTR_LANDSCAPE_FUZZ_EXAMPLES") or 400)
# No deadline: a slow example is not a failure here (and the machine is shared).
FUZZ = settings(
    max_examples=EXAMPLES,
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

BASES: tuple[str, ...] = (
    (REPO / "traces" / "synthetic-mlp.log").read_text(),
    *(generate(seed, n_ops=12 + 3 * seed) for seed in range(8)),
)
FIELDS = ("INSTRUCTION", "NAME", "ARGS", "RESULT", "MEMORY", "ALIAS", "TIME", "SRC", "DST")
FIELDS += ("MUTATE", "ANNOTATION")
NAMES = sorted({m for text in BASES for m in re.findall(r'"(x\d+)"', text)})[:40]

# Values a corrupted field may take: each JSON type, numbers in and out of range (as the
# logs' strings too), numbers Python's int() would take but a log never holds, and names.
JSON_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(min_value=-(2**66), max_value=2**66).map(str),
    st.sampled_from(["", "-1", "0", "1e3", " 7 ", "0x10", "1_000", "\uff11\uff12", "5.0", "-0"]),
    st.sampled_from(NAMES),
    st.text(max_size=6),
    st.lists(
        st.one_of(st.sampled_from(NAMES), st.integers(-3, 5), st.text(max_size=3)), max_size=4
    ),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
    st.sampled_from([*KNOWN_INSTRUCTIONS, "START", "BACKWARD", "LAUNCH"]),
)

Lines = list[str]
Draw = Callable[..., object]


def _index(draw: Draw, lines: Lines) -> int:
    return int(draw(st.integers(0, max(0, len(lines) - 1))))  # type: ignore[call-overload]


def _delete(draw: Draw, lines: Lines) -> Lines:
    i = _index(draw, lines)
    return lines[:i] + lines[i + 1 :]


def _duplicate(draw: Draw, lines: Lines) -> Lines:
    i = _index(draw, lines)
    return lines[: i + 1] + lines[i:]


def _swap(draw: Draw, lines: Lines) -> Lines:
    i, j = _index(draw, lines), _index(draw, lines)
    out = list(lines)
    if out:
        out[i], out[j] = out[j], out[i]
    return out


def _move(draw: Draw, lines: Lines) -> Lines:
    i = _index(draw, lines)
    out = lines[:i] + lines[i + 1 :]
    j = _index(draw, out)
    return out[:j] + lines[i : i + 1] + out[j:]


def _replace_line(draw: Draw, lines: Lines) -> Lines:
    i = _index(draw, lines)
    junk = draw(st.one_of(st.text(max_size=30), JSON_VALUES.map(json.dumps)))
    return lines[:i] + [str(junk)] + lines[i + 1 :]


def _corrupt_field(draw: Draw, lines: Lines) -> Lines:
    """Parse one line, then set, delete or rename one of its fields, and write it back."""
    i = _index(draw, lines)
    try:
        obj = json.loads(lines[i]) if lines else None
    except ValueError:
        obj = None
    if not isinstance(obj, dict):
        return _replace_line(draw, lines)
    key = str(draw(st.sampled_from(sorted(obj) + list(FIELDS))))
    action = draw(st.sampled_from(["set", "set", "set", "delete", "rename"]))
    if action == "set":
        obj[key] = draw(JSON_VALUES)
    elif action == "delete":
        obj.pop(key, None)
    elif key in obj:
        obj[str(draw(st.sampled_from([*FIELDS, key.lower(), key + " "])))] = obj.pop(key)
    text = json.dumps(obj, separators=(",", ":"), ensure_ascii=bool(draw(st.booleans())))
    return lines[:i] + [text] + lines[i + 1 :]


def _rename_tensor(draw: Draw, lines: Lines) -> Lines:
    """One occurrence of a tensor name becomes another (existing or new) name."""
    i = _index(draw, lines)
    if not lines:
        return lines
    found = list(re.finditer(r'"x\d+"', lines[i]))
    if not found:
        return _corrupt_field(draw, lines)
    m = found[int(draw(st.integers(0, len(found) - 1)))]  # type: ignore[call-overload]
    other = json.dumps(draw(st.one_of(st.sampled_from(NAMES), st.text(max_size=4))))
    return lines[:i] + [lines[i][: m.start()] + other + lines[i][m.end() :]] + lines[i + 1 :]


def _change_number(draw: Draw, lines: Lines) -> Lines:
    """One of the logs' quoted numbers ("MEMORY":"1728") becomes another number or text."""
    i = _index(draw, lines)
    if not lines:
        return lines
    found = list(re.finditer(r'"(-?\d+)"', lines[i]))
    if not found:
        return _corrupt_field(draw, lines)
    m = found[int(draw(st.integers(0, len(found) - 1)))]  # type: ignore[call-overload]
    value = draw(
        st.one_of(
            st.integers(-(2**70), 2**70).map(str),
            st.sampled_from(["-1", "0", "9" * 30, "1.5", "nan", "", "-"]),
        )
    )
    return lines[:i] + [lines[i][: m.start(1)] + str(value) + lines[i][m.end(1) :]] + lines[i + 1 :]


def _resize(draw: Draw, lines: Lines) -> Lines:
    """One quoted number becomes another plausible one: the trace still parses, differently."""
    i = _index(draw, lines)
    found = list(re.finditer(r'"(\d+)"', lines[i])) if lines else []
    if not found:
        return lines
    m = found[int(draw(st.integers(0, len(found) - 1)))]  # type: ignore[call-overload]
    value = str(draw(st.integers(0, 10**6)))
    return lines[:i] + [lines[i][: m.start(1)] + value + lines[i][m.end(1) :]] + lines[i + 1 :]


def _drop_a_release(draw: Draw, lines: Lines) -> Lines:
    """A RELEASE line deleted: that tensor stays referenced (and is pinned at the end)."""
    releases = [i for i, line in enumerate(lines) if '"RELEASE"' in line]
    if not releases:
        return lines
    i = releases[int(draw(st.integers(0, len(releases) - 1)))]  # type: ignore[call-overload]
    return lines[:i] + lines[i + 1 :]


def _blank_line(draw: Draw, lines: Lines) -> Lines:
    i = _index(draw, lines)
    return lines[:i] + [str(draw(st.sampled_from(["", " ", "\t", "\r"])))] + lines[i:]


# Mutations that keep each line well-formed JSON, so that more of their results parse and
# reach the runtimes.
SEMANTIC_MUTATIONS = (
    _delete,
    _duplicate,
    _swap,
    _move,
    _rename_tensor,
    _resize,
    _resize,
    _drop_a_release,
    _drop_a_release,
)
LINE_MUTATIONS = (
    _delete,
    _duplicate,
    _swap,
    _move,
    _replace_line,
    _corrupt_field,
    _corrupt_field,
    _rename_tensor,
    _change_number,
    _resize,
    _drop_a_release,
    _blank_line,
)


@st.composite
def mutated_traces(
    draw: Draw, mutations: tuple[Callable[[Draw, Lines], Lines], ...] = LINE_MUTATIONS
) -> bytes:
    lines = str(draw(st.sampled_from(BASES))).split("\n")
    for _ in range(int(draw(st.integers(1, 4)))):  # type: ignore[call-overload]
        mutation = draw(st.sampled_from(mutations))
        lines = mutation(draw, lines)  # type: ignore[operator]
    data = "\n".join(lines).encode()
    if mutations is SEMANTIC_MUTATIONS:
        return data
    byte_edit = draw(st.sampled_from(["none", "none", "truncate", "insert"]))
    at = int(draw(st.integers(0, len(data))))  # type: ignore[call-overload]
    if byte_edit == "truncate":
        data = data[:at]
    elif byte_edit == "insert":
        stray = draw(
            st.one_of(
                st.binary(min_size=1, max_size=4),
                st.sampled_from([b"\x00", b"\r", b"\xe2\x80\xa8", b"\xc2\x85", b"\xff", b"\n\n"]),
            )
        )
        data = data[:at] + bytes(stray) + data[at:]  # type: ignore[arg-type]
    return data


@pytest.fixture(scope="module")
def fuzz_dir() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="trace-fuzz-") as folder:
        yield Path(folder)


ONE_LINE = r"(?P<line>\d+): (?P<problem>\S.*)"


def _parse_or_one_line_error(path: Path, data: bytes) -> object | None:
    """The parsed program, or None after checking the error's message."""
    path.write_bytes(data)
    try:
        program = parse_file(path)
    except TraceError as exc:
        message = str(exc)
        # --hypothesis-show-statistics tallies the kinds of problem found
        event(re.sub(r"'[^']*'|\d+|got .*|\(.*", "_", exc.problem)[:50])
        assert len(message.splitlines()) == 1, repr(message)
        where = re.fullmatch(re.escape(str(path)) + ":" + ONE_LINE, message)
        assert where is not None, repr(message)
        assert 1 <= int(where["line"]) <= data.count(b"\n") + 1, message
        return None
    event("parses")
    return program


@FUZZ
@given(data=mutated_traces())
def test_every_mutated_trace_parses_or_names_file_line_and_problem(
    fuzz_dir: Path, data: bytes
) -> None:
    _parse_or_one_line_error(fuzz_dir / "mutated.log", data)


@settings(FUZZ, max_examples=max(1, EXAMPLES // 2))
@given(data=mutated_traces(SEMANTIC_MUTATIONS))
def test_every_mutated_trace_that_parses_replays(fuzz_dir: Path, data: bytes) -> None:
    """What parses is a program both runtimes can replay to an outcome, never a crash."""
    program = _parse_or_one_line_error(fuzz_dir / "replayed.log", data)
    if program is None:
        return
    unconstrained = Simulation(program, None, make_policy("DTR")).run()  # type: ignore[arg-type]
    assert unconstrained.status == "ok"
    budget = unconstrained.max_memory // 2
    python = Simulation(program, budget, make_policy("DTR")).run()  # type: ignore[arg-type]
    assert python.status in {"ok", "oom", "thrashed"}
    if native.available():
        c = native.NativeSimulation(program, budget, make_policy("DTR")).run()  # type: ignore[arg-type]
        assert (c.status, c.clock, c.evictions) == (python.status, python.clock, python.evictions)


SYNTHETIC_LINES = BASES[0].split("\n")
FIRST_CALL = next(i for i, line in enumerate(SYNTHETIC_LINES) if '"CALL"' in line)


@settings(FUZZ, max_examples=6)
@given(data=mutated_traces())
# Always among the cases: a CALL's MEMORY line deleted, bytes that are not UTF-8, a tensor
# name mistyped in an ARGS list, and a random trace with its third line copied before START
# (where lines are read but not replayed: it parses).
@example(
    data="\n".join(SYNTHETIC_LINES[: FIRST_CALL + 1] + SYNTHETIC_LINES[FIRST_CALL + 2 :]).encode()
)
@example(data=BASES[0].encode()[:5000] + b"\xff\xfe" + BASES[0].encode()[5000:])
@example(data=BASES[1].replace('"ARGS":["x', '"ARGS":["typo', 1).encode())
@example(data=(BASES[2].split("\n", 3)[2] + "\n" + BASES[2]).encode())
def test_the_cli_answers_a_mutated_trace_with_a_record_or_one_line(
    fuzz_dir: Path, data: bytes
) -> None:
    path = fuzz_dir / "cli.log"
    path.write_bytes(data)
    done = cli("run", str(path), "--ratio", "0.5", env={"DTR_LANDSCAPE_CACHE": str(fuzz_dir)})
    assert "Traceback" not in done.stderr
    if done.returncode == 0:
        assert json.loads(done.stdout)["status"] in {"ok", "oom", "thrashed"}
        return
    assert done.returncode == 2 and done.stdout == ""
    assert len(done.stderr.splitlines()) == 1, done.stderr
    assert re.fullmatch(
        "dtr-landscape: error: " + re.escape(str(path)) + ":" + ONE_LINE, done.stderr.strip()
    ), done.stderr
