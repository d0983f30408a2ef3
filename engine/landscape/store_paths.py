"""Where a store lives and what is there (engine/landscape/store.py opens it): the default
path, a snapshot file's identity, and whether a file there is a DuckDB database at all.
Files only: no DuckDB here."""

from __future__ import annotations

import os
from pathlib import Path

from engine.landscape.schema import StoreError

DB_ENV = "DTR_LANDSCAPE_DB"
DEFAULT_DB = Path("data") / "landscape.duckdb"
DUCKDB_MAGIC = b"DUCK"  # bytes 8-11 of every DuckDB database file (after its checksum)


def default_path(explicit: str | os.PathLike[str] | None = None) -> Path:
    if explicit:
        return Path(explicit)
    return Path(os.environ.get(DB_ENV) or DEFAULT_DB)


def file_identity(path: Path) -> tuple[int, int, int, int] | None:
    """What changes when a file is replaced or rewritten, or None when there is none."""
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


def check_snapshot(path: Path) -> None:
    """A snapshot that is there is a DuckDB database file (its header names DuckDB), else
    StoreError: a wrong --db is said as such once, not retried as a store being compacted."""
    if not path.exists():
        return
    if not path.is_file():
        raise StoreError(f"store {path}: not a file (a store is a DuckDB file)")
    try:
        with open(path, "rb") as f:
            header = f.read(12)
    except OSError as exc:
        raise StoreError(f"store {path}: cannot be read ({exc.strerror})") from exc
    if header[8:12] != DUCKDB_MAGIC:
        raise StoreError(f"store {path}: not a DuckDB database file")
