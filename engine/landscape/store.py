"""The store: every DuckDB access of the project goes through this module.

Layout (for a store at `data/landscape.duckdb`):
- `data/landscape.duckdb` is an immutable snapshot: tables `meta` (schema version), `traces`,
  `runs`, `walks`, `sweeps`. Nobody ever writes to the live file.
- `data/landscape.duckdb.parts/` holds parts: small Parquet files, one per batch of new runs
  (or traces, walks, sweeps), each written to a temporary name and renamed into place.

Concurrency (ECOSYSTEM.md: a DuckDB file is open by one writer or many readers, never both):
- writers (sweeps, walks, imports, any number of processes) only ever add parts, so they
  never hold a lock on the snapshot and a reader never sees a half-written run: a part is
  either absent or complete;
- readers (dashboard workers, `runs`, `holes`) open short-lived read-only connections to the
  snapshot and union it with the parts, so they never wait for a writer;
- compaction (`compact()`, under an exclusive file lock) builds a new snapshot from the old
  one plus the parts at a temporary path, closes it, renames it over the live file (atomic),
  then deletes the parts it absorbed. Between the rename and the deletion a run can be in
  both; readers deduplicate on `run_id`, so it is counted once.
A killed writer loses only the runs it had not yet published. Opening an older snapshot
upgrades it on the next compaction (`SCHEMA_VERSION`, `_MIGRATIONS`).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
import time
import uuid
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from engine.landscape.ids import RunIdError, check_run_id
from engine.sim.record import FIELD_NAMES

DB_ENV = "DTR_LANDSCAPE_DB"
DEFAULT_DB = Path("data") / "landscape.duckdb"
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
_MIGRATIONS: dict[int, Sequence[str]] = {}


_SNAPSHOT_TABLES = "SELECT table_name FROM information_schema.tables WHERE table_catalog = 'snap'"


class StoreError(RuntimeError):
    pass


def default_path(explicit: str | os.PathLike[str] | None = None) -> Path:
    if explicit:
        return Path(explicit)
    return Path(os.environ.get(DB_ENV) or DEFAULT_DB)


def flatten(record: dict[str, Any], **extra: Any) -> dict[str, Any]:
    """A run record (engine/record.py) as one `runs` row."""
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
    row["run_id"] = _run_id(record.get("run_id") or uuid.uuid4().hex)
    row["host"] = socket.gethostname()
    row.update(extra)
    unknown = set(extra) - set(row)
    if unknown:
        raise StoreError(f"unknown run columns: {', '.join(sorted(unknown))}")
    return row


def _run_id(value: Any) -> str:
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
    retained = row.get("retained") or ""
    out["retained"] = [int(x) for x in retained.split(",") if x]
    for key in list(out):
        if key.startswith("failure_") or key in ("same_lo", "same_hi"):
            del out[key]
        elif out[key] is pd.NaT or (isinstance(out[key], float) and out[key] != out[key]):
            out[key] = None  # NaN / NaT from pandas mean null
        elif isinstance(out[key], pd.Timestamp):
            out[key] = out[key].isoformat()
        elif hasattr(out[key], "item"):
            out[key] = out[key].item()  # numpy scalar -> Python
    return out


_ARROW = {
    "VARCHAR": pa.string(),
    "BIGINT": pa.int64(),
    "DOUBLE": pa.float64(),
    "TIMESTAMP": pa.timestamp("us"),
    "BOOLEAN": pa.bool_(),
}


def _plain(value: Any) -> Any:
    """pandas/numpy scalars and missing values as plain Python for pyarrow."""
    if value is None or value is pd.NaT:
        return None
    if isinstance(value, float) and value != value:
        return None
    if isinstance(value, pd.Timestamp):
        return value.to_pydatetime()
    if hasattr(value, "item") and not isinstance(value, str | bytes):
        return value.item()
    return value


@dataclass
class Store:
    path: Path

    @classmethod
    def open(cls, path: str | os.PathLike[str] | None = None) -> Store:
        store = cls(default_path(path))
        store.path.parent.mkdir(parents=True, exist_ok=True)
        store.parts_dir.mkdir(parents=True, exist_ok=True)
        return store

    @property
    def parts_dir(self) -> Path:
        return self.path.with_name(self.path.name + ".parts")

    @property
    def lock_path(self) -> Path:
        return self.path.with_name(self.path.name + ".lock")

    # -- writing ---------------------------------------------------------------------------
    def _publish(self, table: str, rows: list[dict[str, Any]]) -> Path | None:
        """Write rows as one Parquet part, atomically (temporary name, then rename)."""
        if not rows:
            return None
        name = f"{table}-{time.time_ns():020d}-{uuid.uuid4().hex[:8]}.parquet"
        target = self.parts_dir / name
        tmp = self.parts_dir / f".{name}.tmp"
        self.parts_dir.mkdir(parents=True, exist_ok=True)
        columns = TABLES[table]
        arrays = []
        for column, kind in columns:
            values = [_plain(row.get(column)) for row in rows]
            try:
                arrays.append(pa.array(values, type=_ARROW[kind]))
            except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError) as exc:
                raise StoreError(f"{table}.{column}: expected {kind}: {exc}") from None
        schema = pa.schema([(column, _ARROW[kind]) for column, kind in columns])
        pq.write_table(pa.Table.from_arrays(arrays, schema=schema), tmp)
        os.replace(tmp, target)
        return target

    def add_runs(self, records: Iterable[dict[str, Any]], **extra: Any) -> list[str]:
        """Publish run records (engine/record.py shape); returns their run ids."""
        rows = [flatten(r, **extra) for r in records]
        self._publish("runs", rows)
        return [row["run_id"] for row in rows]

    def add_rows(self, table: str, rows: list[dict[str, Any]]) -> None:
        """Publish already-flattened rows of `table` (imports build these)."""
        columns = {name for name, _ in TABLES[table]}
        for row in rows:
            unknown = set(row) - columns
            if unknown:
                raise StoreError(f"unknown {table} columns: {', '.join(sorted(unknown))}")
            if table == "runs":
                _run_id(row.get("run_id"))
        self._publish(table, rows)

    def add_trace(self, **row: Any) -> None:
        row.setdefault("registered_at", pd.Timestamp.now())
        self.add_rows("traces", [row])

    def add_walk(self, **row: Any) -> None:
        self.add_rows("walks", [row])

    def add_sweep(self, **row: Any) -> None:
        row.setdefault("created_at", pd.Timestamp.now())
        row.setdefault("host", socket.gethostname())
        self.add_rows("sweeps", [row])

    # -- reading ---------------------------------------------------------------------------
    @contextlib.contextmanager
    def connect(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """A short-lived in-memory connection where `runs`, `traces`, `walks` and `sweeps`
        are views over the snapshot (read-only) and the published parts."""
        con = duckdb.connect()
        try:
            snapshot_tables: set[str] = set()
            if self.path.exists():
                con.execute(f"ATTACH '{_sql_path(self.path)}' AS snap (READ_ONLY)")
                snapshot_tables = {r[0] for r in con.execute(_SNAPSHOT_TABLES).fetchall()}
            for table, columns in TABLES.items():
                cols = ", ".join(_q(n) for n, _ in columns)
                sources = []
                if table in snapshot_tables:
                    sources.append(f"SELECT {cols}, '' AS _part FROM snap.{table}")
                parts = (
                    sorted(self.parts_dir.glob(f"{table}-*.parquet"))
                    if self.parts_dir.exists()
                    else []
                )
                if parts:
                    files = ", ".join(f"'{_sql_path(p)}'" for p in parts)
                    sources.append(
                        f"SELECT {cols}, filename AS _part "
                        f"FROM read_parquet([{files}], filename = true)"
                    )
                if not sources:
                    typed = ", ".join(f"CAST(NULL AS {t}) AS {_q(n)}" for n, t in columns)
                    con.execute(f"CREATE TEMP VIEW {table} AS SELECT {typed} WHERE false")
                    continue
                con.execute(
                    f"CREATE TEMP VIEW {table} AS SELECT {cols} "
                    f"FROM ({' UNION ALL '.join(sources)}) "
                    f"{_newest_per_key(table)}"
                )
            yield con
        except (duckdb.IOException, FileNotFoundError) as exc:
            # a part deleted by a concurrent compaction between listing and reading: retry once
            raise StoreError(f"store {self.path} changed while reading: {exc}") from exc
        finally:
            con.close()

    def query(self, sql: str, params: Sequence[Any] | None = None) -> pd.DataFrame:
        for attempt in range(5):
            try:
                with self.connect() as con:
                    return con.execute(sql, params or []).df()
            except StoreError:
                if attempt == 4:
                    raise
                time.sleep(0.05 * (attempt + 1))
        raise AssertionError("unreachable")

    def runs(self, trace: str | None = None, policy: str | None = None) -> pd.DataFrame:
        where, params = [], []
        if trace is not None:
            where.append("(trace = ? OR trace_sha256 = ?)")
            params += [trace, trace]
        if policy is not None:
            where.append("policy = ?")
            params.append(policy)
        clause = f"WHERE {' AND '.join(where)}" if where else ""
        return self.query(f"SELECT * FROM runs {clause} ORDER BY budget, started_at", params)

    def run(self, run_id: str) -> dict[str, Any] | None:
        frame = self.query("SELECT * FROM runs WHERE run_id = ?", [run_id])
        if frame.empty:
            return None
        return unflatten(frame.iloc[0].to_dict())

    # -- compaction ------------------------------------------------------------------------
    def compact(self) -> int:
        """Fold the parts into a new snapshot; returns how many parts were absorbed."""
        self.lock_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.lock_path, "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            parts = sorted(self.parts_dir.glob("*.parquet")) if self.parts_dir.exists() else []
            version = self.schema_version()
            if not parts and self.path.exists() and version == SCHEMA_VERSION:
                return 0
            tmp = self.path.with_name(f".{self.path.name}.{uuid.uuid4().hex[:8]}.tmp")
            try:
                self._build_snapshot(tmp, parts, version)
                os.replace(tmp, self.path)
            finally:
                if tmp.exists():
                    tmp.unlink()
            for part in parts:
                part.unlink(missing_ok=True)
            self._remove_abandoned_temporaries()
            return len(parts)

    def _remove_abandoned_temporaries(self, older_than_s: float = 600) -> None:
        """A writer killed mid-publish leaves `.NAME.parquet.tmp`; readers never look at it.
        One untouched for ten minutes belongs to no live writer (a write takes milliseconds)."""
        if not self.parts_dir.exists():
            return
        cutoff = time.time() - older_than_s
        for tmp in self.parts_dir.glob(".*.tmp"):
            with contextlib.suppress(OSError):
                if tmp.stat().st_mtime < cutoff:
                    tmp.unlink()

    def _build_snapshot(self, tmp: Path, parts: list[Path], old_version: int | None) -> None:
        con = duckdb.connect(str(tmp))
        try:
            if self.path.exists():
                con.execute(f"ATTACH '{_sql_path(self.path)}' AS snap (READ_ONLY)")
            for table, columns in TABLES.items():
                decl = ", ".join(f"{_q(n)} {t}" for n, t in columns)
                con.execute(f"CREATE TABLE {table} ({decl}, PRIMARY KEY ({_q(KEYS[table])}))")
            con.execute("CREATE TABLE meta (key VARCHAR PRIMARY KEY, value VARCHAR)")
            con.execute("INSERT INTO meta VALUES ('schema_version', ?)", [str(SCHEMA_VERSION)])
            con.execute(
                "INSERT INTO meta VALUES ('compacted_at', ?)", [time.strftime("%Y-%m-%dT%H:%M:%S")]
            )
            existing: set[str] = set()
            if self.path.exists():
                existing = {r[0] for r in con.execute(_SNAPSHOT_TABLES).fetchall()}
            for table, columns in TABLES.items():
                names = [n for n, _ in columns]
                sources = []
                if table in existing:
                    have = {
                        r[0]
                        for r in con.execute(
                            "SELECT column_name FROM information_schema.columns "
                            "WHERE table_catalog = 'snap' AND table_name = ?",
                            [table],
                        ).fetchall()
                    }
                    cols = ", ".join(_q(n) if n in have else f"NULL AS {_q(n)}" for n in names)
                    sources.append(f"SELECT {cols}, '' AS _part FROM snap.{table}")
                mine = [p for p in parts if p.name.startswith(f"{table}-")]
                if mine:
                    files = ", ".join(f"'{_sql_path(p)}'" for p in mine)
                    cols = ", ".join(_q(n) for n in names)
                    sources.append(
                        f"SELECT {cols}, filename AS _part "
                        f"FROM read_parquet([{files}], filename = true)"
                    )
                if sources:
                    cols = ", ".join(_q(n) for n in names)
                    con.execute(
                        f"INSERT INTO {table} SELECT {cols} FROM ({' UNION ALL '.join(sources)}) "
                        f"{_newest_per_key(table)}"
                    )
            for version in range((old_version or SCHEMA_VERSION), SCHEMA_VERSION):
                for statement in _MIGRATIONS.get(version, ()):
                    con.execute(statement)
            if self.path.exists():
                con.execute("DETACH snap")
            con.execute("CHECKPOINT")
        finally:
            con.close()

    def schema_version(self) -> int | None:
        if not self.path.exists():
            return None
        con = duckdb.connect(str(self.path), read_only=True)
        try:
            row = con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        except duckdb.CatalogException:
            return 0
        finally:
            con.close()
        return int(row[0]) if row else 0

    def stats(self) -> dict[str, int]:
        with self.connect() as con:
            out = {}
            for table in TABLES:
                row = con.execute(f"SELECT count(*) FROM {table}").fetchone()
                out[table] = int(row[0]) if row else 0
        out["parts"] = len(list(self.parts_dir.glob("*.parquet"))) if self.parts_dir.exists() else 0
        return out

    def export(self, target: str | os.PathLike[str], table: str = "runs") -> int:
        """Write a table to CSV or Parquet (by the target's suffix); returns the row count."""
        if table not in TABLES:
            raise StoreError(f"unknown table {table!r} (tables: {', '.join(TABLES)})")
        return self.export_query(target, f"SELECT * FROM {table}")

    def export_query(
        self, target: str | os.PathLike[str], sql: str, params: Sequence[Any] | None = None
    ) -> int:
        """Write a query's result (over the views of `connect`) to CSV or Parquet, by the
        target's suffix, atomically (temporary name, then rename); returns the row count."""
        path = Path(target)
        fmt = {".csv": "csv", ".parquet": "parquet"}.get(path.suffix.lower())
        if fmt is None:
            raise StoreError(f"export target {path} must end in .csv or .parquet")
        tmp = path.with_name(f".{path.name}.tmp")
        try:
            with self.connect() as con:
                row = con.execute(
                    f"COPY ({sql}) TO '{_sql_path(tmp)}' (FORMAT {fmt})", params or []
                ).fetchone()
            os.replace(tmp, path)
        finally:
            tmp.unlink(missing_ok=True)
        return int(row[0]) if row else 0


def _newest_per_key(table: str) -> str:
    """Keep one row per identity: parts win over the snapshot, and among parts the newest
    (part file names start with the table and a nanosecond timestamp)."""
    return f"QUALIFY row_number() OVER (PARTITION BY {_q(KEYS[table])} ORDER BY _part DESC) = 1"


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _sql_path(path: Path) -> str:
    return str(path).replace("'", "''")


def json_args(args: dict[str, Any]) -> str:
    return json.dumps(args, sort_keys=True, default=str)
