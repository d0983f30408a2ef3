"""The store: every DuckDB access of the project goes through this module.

Layout (for a store at `data/landscape.duckdb`):
- `data/landscape.duckdb` is an immutable snapshot: tables `meta` (schema version), `traces`,
  `runs`, `walks`, `sweeps`. Nobody ever writes to the live file.
- `data/landscape.duckdb.parts/` holds parts: small Parquet files, one per batch of new runs
  (or traces, walks, sweeps), each written to a temporary name and renamed into place
  (engine/landscape/store_parts.py).
- `data/landscape.duckdb.walking/`: running walks' claims (engine/landscape/walk_claims.py).

Concurrency (DuckDB opens a database file for one read-write process or for many read-only
ones, never both):
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
upgrades it on the next compaction (`SCHEMA_VERSION`, `MIGRATIONS`).

The tables' columns and the record <-> row conversion are in engine/landscape/schema.py.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import socket
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import duckdb

from engine.landscape import store_parts
from engine.landscape.schema import (
    KEYS,
    MIGRATIONS,
    RUN_COLUMNS,
    SCHEMA_VERSION,
    TABLES,
    StoreError,
    checked_run_id,
    flatten,
    unflatten,
)
from engine.landscape.store_frames import frame_from_arrow
from engine.landscape.store_paths import check_snapshot, default_path, file_identity
from engine.landscape.store_views import (
    live_rows,
    quoted,
    runs_query,
    snapshot_insert,
    sql_path,
)

if TYPE_CHECKING:
    # Only `query` returns DataFrames (DuckDB imports pandas for it): writers and walks that
    # read with `rows` never load pandas, a second of every `landscape` command's start.
    import pandas as pd

# Callers import the schema's names from here too: the store is the landscape layer's one
# door to stored runs (engine/landscape/schema.py only declares them).
__all__ = [
    "RUN_COLUMNS",
    "SCHEMA_VERSION",
    "TABLES",
    "Store",
    "StoreError",
    "default_path",
    "flatten",
    "unflatten",
]

_SNAPSHOT_TABLES = "SELECT table_name FROM information_schema.tables WHERE table_catalog = 'snap'"


@dataclass
class _Reader:
    """A reading connection kept for its store while neither the snapshot nor the listed
    parts change (Store.connect): opening one, attaching the snapshot and creating the views
    took 50-70 ms of CPU per query over the walks' store, and a dashboard page makes a dozen
    queries, its every refresh two."""

    con: duckdb.DuckDBPyConnection
    pid: int  # a connection inherited through fork is never used (nor closed) by the child
    identity: tuple[Any, ...]  # the snapshot file's identity and the parts it was built on
    busy: bool = False


class _Readers(threading.local):
    """Each thread's readers, by store path: a DuckDB connection is not shared by threads."""

    LIMIT = 4  # stores a thread keeps a reader for (tests open hundreds of stores)

    def __init__(self) -> None:
        self.by_path: OrderedDict[str, _Reader] = OrderedDict()


_READERS = _Readers()
_INHERITED: list[_Reader] = []  # a parent process's readers: kept, never touched


@dataclass
class Store:
    path: Path

    @classmethod
    def open(cls, path: str | os.PathLike[str] | None = None) -> Store:
        """The store at `path`, made there if there is none (writers: sweeps, walks, imports)."""
        store = cls(default_path(path))
        check_snapshot(store.path)  # before anything is made beside a file that is not a store
        store.path.parent.mkdir(parents=True, exist_ok=True)
        store.parts_dir.mkdir(parents=True, exist_ok=True)
        return store

    @classmethod
    def existing(cls, path: str | os.PathLike[str] | None = None) -> Store:
        """The store at `path` for reading: a path where there is none is a mistake (a typo
        would otherwise make an empty store and answer "no stored runs"), and nothing is made."""
        store = cls(default_path(path))
        check_snapshot(store.path)
        if not store.path.exists() and not store.parts_dir.is_dir():
            raise StoreError(
                f"no store at {store.path}: neither the file nor {store.parts_dir.name}/ "
                "beside it exists (sweep, landscape and import-records make one)"
            )
        return store

    @property
    def parts_dir(self) -> Path:
        return self.path.with_name(self.path.name + ".parts")

    @property
    def lock_path(self) -> Path:
        return self.path.with_name(self.path.name + ".lock")

    # -- writing ---------------------------------------------------------------------------
    def add_runs(self, records: Iterable[dict[str, Any]], **extra: Any) -> list[str]:
        """Publish run records (engine/sim/record.py shape); returns their run ids."""
        rows = [flatten(r, **extra) for r in records]
        store_parts.publish(self.parts_dir, "runs", rows)
        return [row["run_id"] for row in rows]

    def add_rows(self, table: str, rows: list[dict[str, Any]]) -> None:
        """Publish already-flattened rows of `table` (imports build these)."""
        columns = {name for name, _ in TABLES[table]}
        for row in rows:
            unknown = set(row) - columns
            if unknown:
                raise StoreError(f"unknown {table} columns: {', '.join(sorted(unknown))}")
            if table == "runs":
                checked_run_id(row.get("run_id"))
        store_parts.publish(self.parts_dir, table, rows)

    def add_trace(self, **row: Any) -> None:
        row.setdefault("registered_at", datetime.now())
        self.add_rows("traces", [row])

    def add_walk(self, **row: Any) -> None:
        self.add_rows("walks", [row])

    def add_sweep(self, **row: Any) -> None:
        row.setdefault("created_at", datetime.now())
        row.setdefault("host", socket.gethostname())
        self.add_rows("sweeps", [row])

    # -- reading ---------------------------------------------------------------------------
    @contextlib.contextmanager
    def connect(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """An in-memory connection where `runs`, `traces`, `walks` and `sweeps` are views over
        the snapshot (read-only) and the published parts. The thread's connection for this
        store is reused while the snapshot file and the parts listed are the ones its views
        were made of; any change (a part published, a compaction) makes a new one."""
        # The parts are listed BEFORE the snapshot is opened. A compaction renames its new
        # snapshot into place before it deletes the parts it absorbed, so every run published
        # before the listing is in a listed part or in whichever snapshot is opened next. The
        # other order could open the old snapshot, then list after the deletion, and see
        # runs vanish (tests/test_store.py saw 219 runs, then 200). A kept connection is
        # reused only if the snapshot's file is still the one stat'ed before it attached it
        # (so it attached that file and no newer one exists) and the listing is the same.
        listed = store_parts.listed(self.parts_dir)
        identity = (
            file_identity(self.path),
            tuple(tuple(p.name for p in listed[t]) for t in TABLES),
        )
        readers, key = _READERS.by_path, str(self.path.absolute())
        reader = readers.get(key)
        if reader is not None and reader.pid != os.getpid():
            _INHERITED.append(readers.pop(key))
            reader = None
        if reader is not None and reader.busy:  # a read inside a read: a connection of its own
            con = self._open(listed)
            try:
                yield con
            except (duckdb.IOException, FileNotFoundError) as exc:
                raise StoreError(f"store {self.path} changed while reading: {exc}") from exc
            finally:
                con.close()
            return
        if reader is None or reader.identity != identity:
            if reader is not None:
                readers.pop(key)
                reader.con.close()
            reader = _Reader(self._open(listed), os.getpid(), identity)
            readers[key] = reader
            while len(readers) > _Readers.LIMIT:
                readers.popitem(last=False)[1].con.close()
        readers.move_to_end(key)
        reader.busy = True
        try:
            yield reader.con
        except BaseException as exc:
            # whatever failed, the next read starts from a fresh connection
            if readers.get(key) is reader:
                readers.pop(key)
            reader.con.close()
            if isinstance(exc, (duckdb.IOException, FileNotFoundError)):
                # a listed part deleted by a concurrent compaction before it was read: the
                # caller (query) retries with a fresh listing
                raise StoreError(f"store {self.path} changed while reading: {exc}") from exc
            raise
        finally:
            reader.busy = False

    def _open(self, listed: dict[str, list[Path]]) -> duckdb.DuckDBPyConnection:
        """A new connection with the views over the snapshot and the listed parts."""
        con = duckdb.connect()
        try:
            snapshot_tables: set[str] = set()
            if self.path.exists():
                con.execute(f"ATTACH '{sql_path(self.path)}' AS snap (READ_ONLY)")
                snapshot_tables = {r[0] for r in con.execute(_SNAPSHOT_TABLES).fetchall()}
            for table, columns in TABLES.items():
                live = live_rows(table, columns, listed[table], table in snapshot_tables)
                con.execute(f"CREATE TEMP VIEW {table} AS {live}")
        except (duckdb.IOException, FileNotFoundError) as exc:
            con.close()
            raise StoreError(f"store {self.path} changed while reading: {exc}") from exc
        except BaseException:
            con.close()
            raise
        return con

    def query(self, sql: str, params: Sequence[Any] | None = None) -> pd.DataFrame:
        """A query's rows as DuckDB's DataFrame (`.df()`), built from its Arrow result where
        every column is of a type the store's tables use (`frame_from_arrow`)."""

        def as_frame(con: duckdb.DuckDBPyConnection) -> pd.DataFrame:
            frame = frame_from_arrow(con.to_arrow_table())
            # another type: the query again (the same connection, the same rows), as .df()
            return frame if frame is not None else con.execute(sql, params or []).df()

        return self._read(as_frame, sql, params)

    def rows(self, sql: str, params: Sequence[Any] | None = None) -> list[dict[str, Any]]:
        """A query's rows as dicts of plain Python values (NULL is None), without pandas."""

        def as_dicts(result: duckdb.DuckDBPyConnection) -> list[dict[str, Any]]:
            names = [column[0] for column in result.description or ()]
            return [dict(zip(names, row, strict=True)) for row in result.fetchall()]

        return self._read(as_dicts, sql, params)

    def row_batches(
        self, sql: str, params: Sequence[Any] | None = None, size: int = 4096
    ) -> Iterator[list[dict[str, Any]]]:
        """`rows` of the types the store's tables use, `size` at a time: the result is read
        whole as Arrow columns (retried as every read is), and only a batch at a time is
        Python objects (InceptionV4's 483,255 walked runs held as dicts took 1.5 GB)."""
        table = self._read(lambda result: result.to_arrow_table(), sql, params)
        for batch in table.to_batches(max_chunksize=size):
            yield batch.to_pylist()

    def _read(self, fetch: Any, sql: str, params: Sequence[Any] | None) -> Any:
        for attempt in range(5):
            try:
                with self.connect() as con:
                    return fetch(con.execute(sql, params or []))
            except StoreError:
                if attempt == 4:
                    raise
                time.sleep(0.05 * (attempt + 1))
        raise AssertionError("unreachable")

    def runs(
        self,
        trace: str | None = None,
        policy: str | None = None,
        columns: Sequence[str] | None = None,
    ) -> pd.DataFrame:
        """Runs of a trace (name or SHA-256) and policy, by budget; `columns`: only those
        (a walked landscape's runs are read several times faster without the rest)."""
        return self.query(*runs_query(trace, policy, columns))

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
            parts = store_parts.every_part(self.parts_dir)
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
            store_parts.remove_abandoned(self.parts_dir)
            return len(parts)

    def _build_snapshot(self, tmp: Path, parts: list[Path], old_version: int | None) -> None:
        con = duckdb.connect(str(tmp))
        try:
            if self.path.exists():
                con.execute(f"ATTACH '{sql_path(self.path)}' AS snap (READ_ONLY)")
            for table, columns in TABLES.items():
                decl = ", ".join(f"{quoted(n)} {t}" for n, t in columns)
                con.execute(f"CREATE TABLE {table} ({decl}, PRIMARY KEY ({quoted(KEYS[table])}))")
            con.execute("CREATE TABLE meta (key VARCHAR PRIMARY KEY, value VARCHAR)")
            con.execute("INSERT INTO meta VALUES ('schema_version', ?)", [str(SCHEMA_VERSION)])
            con.execute(
                "INSERT INTO meta VALUES ('compacted_at', ?)", [time.strftime("%Y-%m-%dT%H:%M:%S")]
            )
            existing: set[str] = set()
            if self.path.exists():
                existing = {r[0] for r in con.execute(_SNAPSHOT_TABLES).fetchall()}
            for table, columns in TABLES.items():
                have = None
                if table in existing:
                    have = {
                        r[0]
                        for r in con.execute(
                            "SELECT column_name FROM information_schema.columns "
                            "WHERE table_catalog = 'snap' AND table_name = ?",
                            [table],
                        ).fetchall()
                    }
                insert = snapshot_insert(table, [n for n, _ in columns], have, parts)
                if insert is not None:
                    con.execute(insert)
            for version in range((old_version or SCHEMA_VERSION), SCHEMA_VERSION):
                for statement in MIGRATIONS.get(version, ()):
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
                # zstd: a walk's export takes half the bytes of the default (snappy; InceptionV4,
                # 29,400 runs: 1.07 MB against 2.08 MB); random run ids are most of what is left
                options = "FORMAT parquet, COMPRESSION zstd" if fmt == "parquet" else "FORMAT csv"
                row = con.execute(
                    f"COPY ({sql}) TO '{sql_path(tmp)}' ({options})", params or []
                ).fetchone()
            os.replace(tmp, path)
        finally:
            tmp.unlink(missing_ok=True)
        return int(row[0]) if row else 0
