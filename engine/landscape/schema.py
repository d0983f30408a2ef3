"""The store's tables: their columns and types, the schema version, and the conversion
between run records (engine/sim/record.py) and `runs` rows.

No DuckDB here: engine/landscape/store.py, the only module that opens a connection, builds
its views, snapshots and Parquet parts from these declarations.
"""

from __future__ import annotations

import socket
import sys
import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import pyarrow as pa

from engine.landscape.columns import ARROW_TYPES, ColumnError, column
from engine.landscape.ids import RunIdError, check_run_id
from engine.sim.record import FIELD_NAMES

SCHEMA_VERSION = 1

# Column declarations: (name, DuckDB type). The run record's fields are flattened
# (failure.* and same_execution.* become columns) and joined by the store's own fields.
RUN_COLUMNS: tuple[tuple[str, str], ...] = (
    ("run_id", "VARCHAR"),
    ("trace", "VARCHAR"),
    ("trace_sha256", "VARCHAR"),
    ("policy", "VARCHAR"),
    ("policy_name", "VARCHAR"),
    ("policy_params", "VARCHAR"),
    ("budget", "BIGINT"),
    ("ratio", "DOUBLE"),
    ("peak", "BIGINT"),
    ("model_compute", "BIGINT"),
    ("status", "VARCHAR"),
    ("overhead", "DOUBLE"),
    ("clock", "BIGINT"),
    ("remat_compute", "BIGINT"),
    ("evictions", "BIGINT"),
    ("policy_evictions", "BIGINT"),
    ("rematerializations", "BIGINT"),
    ("operators", "BIGINT"),
    ("max_memory", "BIGINT"),
    ("peak_pinned", "BIGINT"),
    ("depth_at_peak_pinned", "BIGINT"),
    ("max_nesting_depth", "BIGINT"),
    ("failure_operator", "BIGINT"),
    ("failure_request", "BIGINT"),
    ("failure_pinned", "BIGINT"),
    ("failure_depth", "BIGINT"),
    ("failure_over_by", "BIGINT"),
    ("same_lo", "BIGINT"),
    ("same_hi", "BIGINT"),
    ("retained", "VARCHAR"),
    ("cap", "DOUBLE"),
    ("engine_version", "VARCHAR"),
    ("wall_s", "DOUBLE"),
    ("source", "VARCHAR"),
    ("sweep_id", "VARCHAR"),
    ("walk_id", "VARCHAR"),
    ("repeat", "BIGINT"),
    ("stage", "VARCHAR"),
    ("host", "VARCHAR"),
    ("started_at", "TIMESTAMP"),
    ("ended_at", "TIMESTAMP"),
    ("events_path", "VARCHAR"),
)
TRACE_COLUMNS: tuple[tuple[str, str], ...] = (
    ("sha256", "VARCHAR"),
    ("name", "VARCHAR"),
    ("peak", "BIGINT"),
    ("model_compute", "BIGINT"),
    ("operators", "BIGINT"),
    ("source", "VARCHAR"),
    ("path", "VARCHAR"),
    ("registered_at", "TIMESTAMP"),
)
WALK_COLUMNS: tuple[tuple[str, str], ...] = (
    ("walk_id", "VARCHAR"),
    ("kind", "VARCHAR"),  # landscape | edges
    ("trace", "VARCHAR"),
    ("trace_sha256", "VARCHAR"),
    ("policy", "VARCHAR"),
    ("cap", "DOUBLE"),
    ("from_budget", "BIGINT"),
    ("to_budget", "BIGINT"),
    ("reached", "BIGINT"),  # every budget in [from_budget, reached] is certified
    ("complete", "BOOLEAN"),
    ("runs", "BIGINT"),
    ("started_at", "TIMESTAMP"),
    ("ended_at", "TIMESTAMP"),
)
SWEEP_COLUMNS: tuple[tuple[str, str], ...] = (
    ("sweep_id", "VARCHAR"),
    ("trace", "VARCHAR"),
    ("args", "VARCHAR"),
    ("total", "BIGINT"),
    ("host", "VARCHAR"),
    ("created_at", "TIMESTAMP"),
)
TABLES: dict[str, tuple[tuple[str, str], ...]] = {
    "runs": RUN_COLUMNS,
    "traces": TRACE_COLUMNS,
    "walks": WALK_COLUMNS,
    "sweeps": SWEEP_COLUMNS,
}
# Each table's identity column: readers keep one row per key (the newest part wins).
KEYS = {"runs": "run_id", "traces": "sha256", "walks": "walk_id", "sweeps": "sweep_id"}

# Migrations from version v to v + 1, as SQL run on the new snapshot after copying tables.
MIGRATIONS: dict[int, Sequence[str]] = {}


class StoreError(RuntimeError):
    """A store that cannot be read or written as asked; the message is one line."""


def flatten(record: dict[str, Any], **extra: Any) -> dict[str, Any]:
    """A run record (engine/sim/record.py) as one `runs` row."""
    row: dict[str, Any] = {name: None for name, _ in RUN_COLUMNS}
    for name in FIELD_NAMES:
        if name in row:
            row[name] = record.get(name)
    failure = record.get("failure") or {}
    for key in ("operator", "request", "pinned", "depth", "over_by"):
        row[f"failure_{key}"] = failure.get(key)
    same = record.get("same_execution") or {}
    row["same_lo"] = same.get("lo")
    row["same_hi"] = same.get("hi")
    retained = record.get("retained") or []
    row["retained"] = ",".join(str(s) for s in sorted(retained))
    policy = str(record.get("policy") or "")
    name, _, params = policy.partition("@")
    row["policy_name"] = name
    row["policy_params"] = params
    row["run_id"] = checked_run_id(record.get("run_id") or uuid.uuid4().hex)
    row["host"] = socket.gethostname()
    row.update(extra)
    unknown = set(extra) - set(row)
    if unknown:
        raise StoreError(f"unknown run columns: {', '.join(sorted(unknown))}")
    return row


def checked_run_id(value: Any) -> str:
    """Run ids name files (event logs): only ids of engine/landscape/ids.py are stored."""
    try:
        return check_run_id(value)
    except RunIdError as exc:
        raise StoreError(f"runs.run_id: {exc}") from None


def unflatten(row: dict[str, Any]) -> dict[str, Any]:
    """A `runs` row back into the run record's shape (plus the store's columns)."""
    out = dict(row)
    if row.get("failure_operator") is not None:
        out["failure"] = {
            key: row.get(f"failure_{key}")
            for key in ("operator", "request", "pinned", "depth", "over_by")
        }
    else:
        out["failure"] = None
    out["same_execution"] = {"lo": row.get("same_lo"), "hi": row.get("same_hi")}
    retained = row.get("retained")  # NULL beside text in a DataFrame is NaN
    text = "" if is_missing(retained) else str(retained)
    out["retained"] = [int(x) for x in text.split(",") if x]
    for key in _FLATTENED:
        out.pop(key, None)
    for key, value in out.items():
        if type(value) in _AS_THEY_ARE:  # most values (a DuckDB row's but NaN and timestamps)
            continue
        if is_missing(value):
            out[key] = None  # NaN / NaT from pandas mean null
        elif isinstance(value, datetime):  # pandas' Timestamp is one too
            out[key] = value.isoformat()
        elif hasattr(value, "item"):
            out[key] = value.item()  # numpy scalar -> Python
    return out


# the columns `flatten` makes of the record's failure and same_execution
_FLATTENED = tuple(
    name for name, _ in RUN_COLUMNS if name.startswith("failure_") or name.startswith("same_")
)
# values unflatten leaves as they are (bool is an int; a float may be NaN, a datetime is
# written as text)
_AS_THEY_ARE = frozenset({str, int, bool, type(None), list, dict})


def is_missing(value: Any) -> bool:
    """None, NaN, or pandas' NaT or NA. A value can only be those once pandas is loaded, and
    this module does not load it: walks and sweeps write rows without pandas."""
    if value is None or (isinstance(value, float) and value != value):
        return True
    pandas = sys.modules.get("pandas")
    return pandas is not None and (value is pandas.NaT or value is pandas.NA)


_PLAIN_TYPES = (str, int, bool, datetime, type(None))  # as they are (float: NaN is missing)


def plain_value(value: Any) -> Any:
    """pandas/numpy scalars and missing values as plain Python (for pyarrow, and JSON)."""
    kind = type(value)
    if kind in _PLAIN_TYPES:  # nearly every value a walk writes: the checks below cost 0.1 s
        return value
    if kind is float:
        return None if value != value else value
    if is_missing(value):
        return None
    if isinstance(value, datetime) and hasattr(value, "to_pydatetime"):
        return value.to_pydatetime()  # pandas' Timestamp
    if hasattr(value, "item") and not isinstance(value, str | bytes):
        return value.item()
    return value


def arrow_table(table: str, rows: list[dict[str, Any]]) -> pa.Table:
    """Rows of `table` as an Arrow table of its declared column types (a Parquet part)."""
    columns = TABLES[table]
    arrays = []
    for name, kind in columns:
        try:
            arrays.append(column(kind, [plain_value(row.get(name)) for row in rows]))
        except ColumnError as exc:
            raise StoreError(f"{table}.{name}: {exc}") from None
    schema = pa.schema([(name, ARROW_TYPES[kind]) for name, kind in columns])
    return pa.Table.from_arrays(arrays, schema=schema)
