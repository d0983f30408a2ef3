"""Run records kept in other tools' files, read into `runs` rows (the columns of
engine/landscape/schema.py): the paper's evidence table (CSV) here, simrd's pareto output
(JSON) in engine/landscape/simrd_pareto.py, and what both share: trace names, outcome words,
one-line problem reports.

Both readers are pure: bytes in, rows out, or `RecordFileError` whose one-line message names
the file, the rows at fault and what was expected. Every row is checked before any is returned,
so the importer can publish all of them as one store part or none at all.

Row numbers are the file's line numbers (the header is line 1), as a spreadsheet shows them.

Statuses: ours are ok | oom | thrashed | timeout. The evidence table also holds simrd's
`recursion` (Python's stack ran out). It is neither a success nor a memory failure, and
folding it into another outcome would lose it (outcomes are never merged), so imported rows
keep status "recursion": read it like timeout, as unresolved. Our engine never produces it.

Excluded rows (runs the paper keeps with their exclusion reason: host sleep, a killed process)
are imported with stage "excluded:<stage>", so every execution of the table is in the store
and a query drops them with `stage NOT LIKE 'excluded:%'`.
"""

from __future__ import annotations

import csv
import hashlib
import io
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

from engine.landscape.ids import EXPECTED_RUN_ID, MAX_RUN_ID, is_run_id

IMPORTED_STATUSES = ("ok", "oom", "thrashed", "timeout", "recursion")
EXCLUDED_PREFIX = "excluded:"
EVIDENCE_CAP = 60.0  # the paper's protocol: thrashed above 60x model compute
MAX_PROBLEMS = 10  # problems listed in one error line
MAX_PLACES = 10  # rows listed per problem

# The evidence table's required columns (others are ignored).
EVIDENCE_COLUMNS = (
    "run_id",
    "stage",
    "trace",
    "policy",
    "budget_ratio",
    "budget_bytes",
    "repeat",
    "status",
    "termination",
    "overhead",
    "peak_pinned_all",
    "depth_at_peak_pinned",
    "max_nesting_depth",
    "wall_s",
    "excluded",
)

# Trace names as other tools spell them, reduced to lowercase letters and digits (simrd's
# manifest adds the batch size in brackets, "ResNet-32 (56)", which is dropped first).
_TRACE_ALIASES = {
    alias: name
    for name, aliases in (
        ("inceptionv4", "inception inceptionv4"),
        ("resnet32", "resnet resnet32"),
        ("unet", "unet"),
        ("densenet121", "densenet densenet121 tvdensenet121"),
        ("transformer", "transformer"),
        ("treelstm", "treelstm"),
        ("lstm", "lstm"),
        ("unrolled_gan", "unrollgan unrolledgan"),
    )
    for alias in aliases.split()
}
KNOWN_TRACES = tuple(sorted(set(_TRACE_ALIASES.values())))

# Outcome words, lowercase letters only; "pass" and "fail (OOM)" are simrd's pareto script's.
_STATUS_WORDS = {
    word: status
    for status, words in (
        ("ok", "ok pass passed success completed"),
        ("oom", "oom outofmemory memoryerror"),
        ("thrashed", "thrashed thrash rematexceeded"),
        ("timeout", "timeout timedout"),
        ("recursion", "recursion recursionerror"),
    )
    for word in words.split()
}
_GENERIC_FAILURE = {"fail", "failed", "failure", "error"}  # the termination column says which
_MISSING = {"", "na", "n/a", "nan", "null", "none"}
_FALSE = {"false", "0", "no", "n", "f"} | _MISSING


class RecordFileError(ValueError):
    """A record file that cannot be imported; the message is one line."""


@dataclass(frozen=True)
class TraceInfo:
    """What we know of a trace by name: from the store's traces table or a traces manifest."""

    name: str
    sha256: str | None
    peak: int | None = None
    model_compute: int | None = None


def canonical_trace_name(raw: str) -> str | None:
    """Our short name for a trace as the paper or simrd spells it, or None if unknown."""
    key = re.sub(r"\(.*?\)", "", raw.lower())
    return _TRACE_ALIASES.get(re.sub(r"[^a-z0-9]", "", key))


def name_from_file(file_name: str) -> str:
    """A log's name from its file name: the stem up to the first '-', in our spelling when
    it is a DTR trace (tv_densenet121-84-....log -> densenet121)."""
    stem = file_name.rsplit("/", 1)[-1]
    stem = stem[: -len(".log")] if stem.endswith(".log") else stem
    head = stem.split("-", 1)[0] or stem
    return canonical_trace_name(head) or head


def status_of(text: str, termination: str = "") -> str | None:
    """Our status for an outcome word: ok, OOM, "fail (OOM)", pass, recursion..."""
    key = text.strip().lower()
    bracketed = re.fullmatch(r"fail(?:ed|ure)?\s*\((.*)\)", key)
    if bracketed:
        key = bracketed.group(1)
    key = re.sub(r"[^a-z]", "", key)
    if key in _GENERIC_FAILURE and termination.strip():
        return status_of(termination)
    return _STATUS_WORDS.get(key)


def file_tag(data: bytes) -> str:
    """The first 8 hex digits of the file's SHA-256: run ids stay unique across files and
    the same file imported again yields the same ids."""
    return hashlib.sha256(data).hexdigest()[:8]


class Problems:
    """Problems found in one file, grouped by what is wrong, reported as one line."""

    def __init__(self, file: str) -> None:
        self.file = file
        self.places: dict[str, list[str]] = {}

    def add(self, place: str, problem: str) -> None:
        self.places.setdefault(problem, []).append(place)

    def check(self) -> None:
        if not self.places:
            return
        parts = [f"{_places(p)}: {problem}" for problem, p in self.places.items()]
        more = len(parts) - MAX_PROBLEMS
        text = "; ".join(parts[:MAX_PROBLEMS])
        if more > 0:
            text += f"; and {more} more problem{'s' if more > 1 else ''}"
        raise RecordFileError(f"{self.file}: {text}")


def _places(places: list[str]) -> str:
    rows = [p.removeprefix("row ") for p in places if p.startswith("row ")]
    if len(rows) == len(places) and len(rows) > 1:
        places = rows
        places[0] = f"rows {places[0]}"
    more = len(places) - MAX_PLACES
    return ", ".join(places[:MAX_PLACES]) + (f" (+{more} more)" if more > 0 else "")


def _number(text: str) -> float | None:
    """A finite number, None when blank; raises ValueError otherwise."""
    if text.strip().lower() in _MISSING:
        return None
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(text)
    return value


def _whole(text: str) -> int | None:
    """A non-negative whole number (exact, even above 2**53), None when blank."""
    if text.strip().lower() in _MISSING:
        return None
    try:
        value = Decimal(text.strip())
    except InvalidOperation:
        raise ValueError(text) from None
    if not value.is_finite() or value != value.to_integral_value() or value < 0:
        raise ValueError(text)
    return int(value)


def policy_columns(policy: str) -> dict[str, str]:
    name, _, params = policy.partition("@")
    return {"policy": policy, "policy_name": name, "policy_params": params}


def trace_columns(name: str, traces: Mapping[str, TraceInfo]) -> dict[str, Any]:
    info = traces.get(name) or TraceInfo(name, None)
    return {
        "trace": name,
        "trace_sha256": info.sha256,
        "peak": info.peak,
        "model_compute": info.model_compute,
    }


# -- the paper's evidence table -----------------------------------------------------------------
def read_evidence(
    file: str, data: bytes, traces: Mapping[str, TraceInfo], source: str
) -> list[dict[str, Any]]:
    """The evidence table's rows as `runs` rows; extra columns are ignored."""
    try:
        text = data.decode("utf-8-sig")  # a spreadsheet may add a byte-order mark
    except UnicodeDecodeError as exc:
        raise RecordFileError(f"{file}: not UTF-8 text (byte {exc.start})") from None
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        header = [name.strip().lower() for name in next(reader)]
    except StopIteration:
        raise RecordFileError(f"{file}: empty file (expected a CSV header)") from None
    missing = [c for c in EVIDENCE_COLUMNS if c not in header]
    if missing:
        raise RecordFileError(
            f"{file}: line 1: missing column{'s' if len(missing) > 1 else ''} "
            f"{', '.join(missing)} (the evidence table needs {', '.join(EVIDENCE_COLUMNS)})"
        )
    tag = file_tag(data)
    problems = Problems(file)
    rows: list[dict[str, Any]] = []
    first_seen: dict[str, int] = {}
    line = reader.line_num
    for cells in reader:
        number, line = line + 1, reader.line_num
        if not any(cell.strip() for cell in cells):
            continue  # blank line
        place = f"row {number}"
        if len(cells) != len(header):
            problems.add(place, f"has {len(cells)} fields, the header has {len(header)}")
            continue
        row = _evidence_row(dict(zip(header, cells, strict=True)), place, problems, traces)
        if row is None:
            continue
        run_id = row["run_id"]
        if run_id in first_seen:
            problems.add(place, f"run_id {run_id!r} repeats row {first_seen[run_id]}")
            continue
        first_seen[run_id] = number
        stored_id = f"evidence:{tag}:{run_id}"
        if not is_run_id(stored_id):
            room = MAX_RUN_ID - len(stored_id) + len(run_id)
            problems.add(place, f"run_id must be at most {room} characters")
            continue
        rows.append({**row, "run_id": stored_id, "source": source})
    problems.check()
    if not rows:
        raise RecordFileError(f"{file}: no rows after the header")
    return rows


def _evidence_row(
    cells: dict[str, str], place: str, problems: Problems, traces: Mapping[str, TraceInfo]
) -> dict[str, Any] | None:
    found: list[str] = []

    def field(name: str, parse: Any, expected: str, ok: Any = lambda v: True) -> Any:
        try:
            value = parse(cells[name])
        except ValueError:
            value = None
            found.append(f"{name} must be {expected}")
        else:
            if value is not None and not ok(value):
                found.append(f"{name} must be {expected}")
        return value

    run_id = cells["run_id"].strip()
    if not is_run_id(run_id):  # it becomes part of the stored id, and of file names
        found.append(f"run_id must be {EXPECTED_RUN_ID}, got {run_id[:80]!r}")
    raw_trace = cells["trace"].strip()
    trace = canonical_trace_name(raw_trace) or (raw_trace if raw_trace in traces else None)
    if trace is None:
        found.append(f"unknown trace {raw_trace!r} (expected one of {', '.join(KNOWN_TRACES)})")
    policy = cells["policy"].strip()
    if not policy:
        found.append("policy must not be empty")
    ratio = field("budget_ratio", _number, "a number in (0, 2]", lambda v: 0 < v <= 2)
    budget = field("budget_bytes", _whole, "a whole number of bytes")
    if budget is None and cells["budget_bytes"].strip().lower() in _MISSING:
        found.append("budget_bytes must be a whole number of bytes")
    status = status_of(cells["status"], cells["termination"])
    if status is None:
        found.append(
            f"unknown status {cells['status'].strip()!r} "
            f"(expected one of {', '.join(IMPORTED_STATUSES)})"
        )
    # Overhead is defined for completed runs only; a failed run's partial value is dropped.
    overhead = field("overhead", _number, "a number >= 1 for ok runs")
    if status == "ok" and overhead is not None and overhead < 1:
        found.append("overhead must be a number >= 1 for ok runs")
    counts = {
        column: field(name, _whole, "a whole number")
        for column, name in (
            ("peak_pinned", "peak_pinned_all"),
            ("depth_at_peak_pinned", "depth_at_peak_pinned"),
            ("max_nesting_depth", "max_nesting_depth"),
            ("repeat", "repeat"),
        )
    }
    wall_s = field("wall_s", _number, "a number of seconds", lambda v: v >= 0)
    for problem in found:
        problems.add(place, problem)
    if found:
        return None
    # The paper keeps interrupted runs "with their exclusion reason": any text but a false
    # value (blank, false, 0, no) excludes the row.
    excluded = cells["excluded"].strip().lower() not in _FALSE
    stage = cells["stage"].strip()
    return {
        "run_id": run_id,
        **trace_columns(trace or raw_trace, traces),
        **policy_columns(policy),
        "budget": budget,
        "ratio": ratio,
        "status": status,
        "overhead": overhead if status == "ok" else None,
        **counts,
        "wall_s": wall_s,
        "stage": f"{EXCLUDED_PREFIX}{stage}" if excluded else (stage or None),
        "cap": EVIDENCE_CAP,
    }
