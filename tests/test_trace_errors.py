"""Malformed traces fail with one line naming file, line and problem: never a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.sim.trace import TraceError, parse_file
from tests.helpers import cli

START = '{"ANNOTATION":"START","INSTRUCTION":"ANNOTATE"}'
CONST = '{"INSTRUCTION":"CONSTANT","NAME":"w"}\n{"INSTRUCTION":"MEMORY","MEMORY":"64","NAME":"w"}'
CALL = (
    '{"ARGS":["w"],"INSTRUCTION":"CALL","NAME":"relu","RESULT":["y"],"TIME":"5"}\n'
    '{"INSTRUCTION":"MEMORY","MEMORY":"64","NAME":"y"}\n'
    '{"ALIAS":"-1","INSTRUCTION":"ALIAS","NAME":"y"}'
)

# (case, file text, line the message names, words the message must contain)
CASES = [
    ("invalid JSON", f'{START}\n{CONST}\n{{"INSTRUCTION": "CALL",\n', 4, "invalid JSON"),
    (
        "unknown instruction",
        f'{START}\n{CONST}\n{{"INSTRUCTION":"LAUNCH"}}\n',
        4,
        "unknown instruction 'LAUNCH'",
    ),
    (
        "CALL without MEMORY/ALIAS",
        f'{START}\n{CONST}\n{{"ARGS":["w"],"INSTRUCTION":"CALL","NAME":"f","RESULT":["y"],"TIME":"5"}}\n'
        '{"INSTRUCTION":"RELEASE","NAME":"w"}\n',
        5,
        "expected the MEMORY line of CALL result 'y'",
    ),
    (
        "CALL without ALIAS",
        f'{START}\n{CONST}\n{{"ARGS":["w"],"INSTRUCTION":"CALL","NAME":"f","RESULT":["y"],"TIME":"5"}}\n'
        '{"INSTRUCTION":"MEMORY","MEMORY":"64","NAME":"y"}\n{"INSTRUCTION":"RELEASE","NAME":"w"}\n',
        6,
        "expected the ALIAS line of CALL result 'y'",
    ),
    (
        "unknown tensor name",
        f'{START}\n{CONST}\n{{"INSTRUCTION":"RELEASE","NAME":"ghost"}}\n',
        4,
        "unknown tensor name 'ghost'",
    ),
    (
        "unknown argument",
        f"{START}\n{CONST}\n" + CALL.replace('["w"]', '["nope"]') + "\n",
        4,
        "unknown tensor name 'nope'",
    ),
    ("empty file", "", 1, "empty trace file"),
    ("truncated file", f"{START}\n{CONST}\n{CALL}"[:-12], 6, "truncated last line"),
    (
        "truncated after CALL",
        f'{START}\n{CONST}\n{{"ARGS":["w"],"INSTRUCTION":"CALL","NAME":"f","RESULT":["y"],"TIME":"5"}}\n',
        4,
        "without its MEMORY line (truncated file?)",
    ),
    ("no START", f"{CONST}\n{CALL}\n", 5, "no ANNOTATE START line"),
    ("missing field", f'{START}\n{{"INSTRUCTION":"COPY","DST":"a"}}\n', 2, "missing field SRC"),
    # Found by fuzzing (tests/test_trace_fuzz.py): each of these used to raise another
    # exception (a traceback from the CLI) or to parse into a program no runtime can replay.
    *(
        (f"MEMORY {shown}", START + "\n" + CONST.replace('"64"', value) + "\n", 3, words)
        for shown, value, words in [
            ("Infinity", "Infinity", "field MEMORY must be an integer in 0..9007199254740992"),
            ("negative", '"-64"', "field MEMORY must be an integer in 0..9007199254740992"),
            ("2**70", str(2**70), "field MEMORY must be an integer in 0..9007199254740992"),
            ("true", "true", "field MEMORY must be an integer"),
            ("1.9", "1.9", "field MEMORY must be an integer"),
            ("5,000 digits", "9" * 5000, "invalid JSON (a number with too many digits)"),
        ]
    ),
    ("nested too deeply", f"{START}\n{'[' * 100_000}\n", 2, "invalid JSON (nested too deeply)"),
    (
        "released twice",
        f'{START}\n{CONST}\n{{"INSTRUCTION":"RELEASE","NAME":"w"}}\n'
        '{"INSTRUCTION":"RELEASE","NAME":"w"}\n',
        5,
        "RELEASE of 'w', which holds no reference any more",
    ),
    (
        "U+2028 does not end a line",
        f'{START}\n{{"INSTRUCTION":"CONSTANT","NAME":"a\u2028b"}}\n'
        '{"INSTRUCTION":"MEMORY","MEMORY":"x","NAME":"a\u2028b"}\n',
        3,
        "field MEMORY must be an integer",
    ),
    (
        "bad number",
        f'{START}\n{{"INSTRUCTION":"CONSTANT","NAME":"w"}}\n{{"INSTRUCTION":"MEMORY","MEMORY":"lots","NAME":"w"}}\n',
        3,
        "field MEMORY must be an integer",
    ),
]


@pytest.mark.parametrize(("case", "text", "line", "words"), CASES, ids=[c[0] for c in CASES])
def test_parse_error_names_file_line_and_problem(
    tmp_path: Path, case: str, text: str, line: int | None, words: str
) -> None:
    path = tmp_path / "bad.log"
    path.write_text(text)
    with pytest.raises(TraceError) as caught:
        parse_file(path)
    message = str(caught.value)
    assert "\n" not in message
    where = f"{path}:{line}: " if line is not None else f"{path}: "
    assert message.startswith(where), message
    assert words in message


@pytest.mark.parametrize(
    ("case", "text", "line", "words"), CASES[:8], ids=[c[0] for c in CASES[:8]]
)
def test_cli_reports_one_line_and_exits_nonzero(
    tmp_path: Path, case: str, text: str, line: int | None, words: str
) -> None:
    path = tmp_path / "bad.log"
    path.write_text(text)
    done = cli(
        "run", str(path), "--budget", "1000", env={"DTR_LANDSCAPE_CACHE": str(tmp_path / "cache")}
    )
    assert done.returncode == 2
    assert done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "Traceback" not in done.stderr
    assert lines[0].startswith(f"dtr-landscape: error: {path}")
    assert words in lines[0]


def test_a_valid_minimal_trace_parses(tmp_path: Path) -> None:
    path = tmp_path / "ok.log"
    path.write_text(f"{START}\n{CONST}\n{CALL}\n")
    program = parse_file(path)
    assert program.n_ops == 2  # the constant and the call, numbered 1 and 2
    assert program.n_tensors == 2
