"""A store's parts (engine/landscape/store.py): Parquet files beside the snapshot, each one
batch of new rows of one table. A part is written under a temporary name and renamed into
place, so a reader lists only whole parts; a writer killed mid-write leaves its temporary,
which compaction removes once no live writer can own it. Files only: no DuckDB here."""

from __future__ import annotations

import contextlib
import os
import time
import uuid
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from engine.landscape.schema import TABLES, arrow_table

# untouched this long, a temporary belongs to no live writer (a write takes milliseconds)
ABANDONED_AFTER_S = 600


def publish(parts_dir: Path, table: str, rows: list[dict[str, Any]]) -> Path | None:
    """Write rows of `table` as one part, atomically; None when there are none."""
    if not rows:
        return None
    name = f"{table}-{time.time_ns():020d}-{uuid.uuid4().hex[:8]}.parquet"
    target = parts_dir / name
    tmp = parts_dir / f".{name}.tmp"
    parts_dir.mkdir(parents=True, exist_ok=True)
    pq.write_table(arrow_table(table, rows), tmp)
    os.replace(tmp, target)
    return target


def listed(parts_dir: Path) -> dict[str, list[Path]]:
    """Every table's parts, oldest first (names start with the time they were written)."""
    exists = parts_dir.exists()
    return {t: sorted(parts_dir.glob(f"{t}-*.parquet")) if exists else [] for t in TABLES}


def every_part(parts_dir: Path) -> list[Path]:
    """The parts of all tables: what a compaction absorbs."""
    return sorted(parts_dir.glob("*.parquet")) if parts_dir.exists() else []


def remove_abandoned(parts_dir: Path, older_than_s: float = ABANDONED_AFTER_S) -> None:
    """Remove the temporaries (`.NAME.parquet.tmp`) of writers killed mid-write; readers never
    look at them."""
    if not parts_dir.exists():
        return
    cutoff = time.time() - older_than_s
    for tmp in parts_dir.glob(".*.tmp"):
        with contextlib.suppress(OSError):
            if tmp.stat().st_mtime < cutoff:
                tmp.unlink()
