"""This tool's own runs, as `dtr-landscape export --parquet` writes them, read back into `runs`
rows: runs walked or swept with another store (another machine, a colleague's) join this one,
so that a range walked in pieces on machines that share no Dask scheduler, or someone else's
landscape, is analysed in one place (`holes`, `holes --all`, the dashboard), and a walk goes on
from what they certified.

Parquet only: its columns are typed and keep a null apart from empty text, which the CSV
export does not (a run's `retained` is '' where a null `same_hi` means "no upper end"). Like the
other readers (engine/landscape/record_files.py): bytes in, rows out, every row checked before
any is returned, problems reported in one line naming the file, the rows and the columns.
"""

from __future__ import annotations

import math
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from engine.landscape.ids import RunIdError, check_run_id
from engine.landscape.record_files import IMPORTED_STATUSES, Problems, RecordFileError
from engine.landscape.schema import RUN_COLUMNS

PARQUET_MAGIC = b"PAR1"
RUN_NAMES = tuple(name for name, _ in RUN_COLUMNS)

# the Arrow types each declared column may arrive as (a column of nulls only has type null)
_ACCEPTS = {
    "VARCHAR": (pa.types.is_string, pa.types.is_large_string),
    "BIGINT": (pa.types.is_integer,),
    "DOUBLE": (pa.types.is_floating, pa.types.is_integer),
    "TIMESTAMP": (pa.types.is_timestamp,),
}
_WORDS = {"VARCHAR": "text", "BIGINT": "whole numbers", "DOUBLE": "numbers"}


def is_parquet(data: bytes) -> bool:
    return data[:4] == PARQUET_MAGIC


def is_runs_csv(data: bytes) -> bool:
    """Whether `data` starts with the header of a runs export in CSV."""
    first = data.split(b"\n", 1)[0].strip().decode("utf-8", "replace")
    return tuple(part.strip('"') for part in first.split(",")) == RUN_NAMES


def read_runs(file: str, data: bytes, source: str | None = None) -> list[dict[str, Any]]:
    """The runs of a runs export. Their event logs stay where they were written, so
    `events_path` is cleared; `source`, if given, replaces theirs; every other column is kept
    as exported."""
    try:
        # Read from bytes Arrow owns: a Parquet read leaves callbacks on Arrow's IO threads
        # that hold the file's reader, and a reader over Python's bytes takes the GIL as it
        # goes, which at interpreter exit aborted the process ("terminate called without an
        # active exception", exit code 134, in 2 of 150 imports of a bad file after the error
        # was printed; gdb: ~PyBuffer on an Arrow thread). One thread, as before.
        owned = pa.BufferOutputStream()
        owned.write(data)
        table = pq.read_table(pa.BufferReader(owned.getvalue()), use_threads=False)
    except (pa.ArrowException, OSError) as exc:
        raise RecordFileError(f"{file}: not a Parquet file that can be read ({exc})") from None
    missing = [name for name in RUN_NAMES if name not in table.column_names]
    unknown = [name for name in table.column_names if name not in RUN_NAMES]
    if missing or unknown:
        wrong = [f"columns missing: {', '.join(missing)}"] if missing else []
        wrong += [f"columns unknown: {', '.join(unknown)}"] if unknown else []
        raise RecordFileError(
            f"{file}: not a runs export of this tool (`dtr-landscape export --parquet FILE`): "
            + "; ".join(wrong)
        )
    problems = Problems(file)
    for name, kind in RUN_COLUMNS:
        found = table.schema.field(name).type
        if not (pa.types.is_null(found) or any(accepts(found) for accepts in _ACCEPTS[kind])):
            problems.add(
                f"column {name}", f"must hold {_WORDS.get(kind, kind)} ({kind}), not {found}"
            )
    problems.check()
    rows = table.select(list(RUN_NAMES)).to_pylist()
    seen: set[str] = set()
    for number, row in enumerate(rows, start=1):
        _check_row(row, f"row {number}", seen, problems)
    problems.check()
    for row in rows:
        row["events_path"] = None
        if source is not None:
            row["source"] = source
    return rows


def _check_row(row: dict[str, Any], place: str, seen: set[str], problems: Problems) -> None:
    """What the store's readers rely on: an id, the trace's hash, the settings a landscape is
    drawn under, an outcome, and an interval that goes upward."""
    try:
        run_id = check_run_id(row["run_id"])
    except RunIdError as exc:
        problems.add(place, f"run_id: {exc}")
    else:
        if run_id in seen:
            problems.add(place, "run_id: the same id on an earlier row")
        seen.add(run_id)
    sha = row["trace_sha256"]
    if not (isinstance(sha, str) and len(sha) == 64 and all(c in "0123456789abcdef" for c in sha)):
        problems.add(place, "trace_sha256: expected the trace's SHA-256, 64 lowercase hex digits")
    if not row["policy"]:
        problems.add(place, "policy: expected a policy, e.g. DTR")
    if row["status"] not in IMPORTED_STATUSES:
        problems.add(place, f"status: expected one of {', '.join(IMPORTED_STATUSES)}")
    cap = row["cap"]
    if cap is None or not math.isfinite(cap) or cap <= 0:
        problems.add(place, "cap: expected a positive number (the overhead limit)")
    for name in ("budget", "same_lo"):
        if row[name] is not None and row[name] < 0:
            problems.add(place, f"{name}: expected a number of bytes, at least 0")
    lo, hi = row["same_lo"], row["same_hi"]
    if lo is not None and hi is not None and hi < lo:
        problems.add(place, "same_hi: expected at least same_lo (the interval goes upward)")
