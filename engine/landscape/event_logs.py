"""Event logs for stored runs: found beside the store, or recorded by replaying the run.

A stored run's event log lives at `events/<run_id>.parquet` beside the store (where the
dashboard's run page looks too), or at the run's own `events_path`. Recording one replays the
run exactly (same trace, budget, policy, cap and retained storages; the simulator is
deterministic) and checks that the replay is the stored run before the log is kept: a trace
file changed since, or a record imported from elsewhere, must not lend its run another
run's log.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from engine.landscape.diverge import check_comparable, diverge
from engine.sim.catalog import TraceNotFound
from engine.sim.simulate import DEFAULT_CAP, run_point

if TYPE_CHECKING:
    from engine.landscape.store import Store

# progress(done, total, what): one step of a comparison
Progress = Callable[[int, int, str], None]

EVENTS_DIR = "events"
# Fields a replay must reproduce for its log to be the stored run's.
REPLAY_FIELDS = ("status", "budget", "clock", "evictions", "rematerializations", "operators")


class EventLogError(ValueError):
    """No event log can be had for a run (its trace is missing, the replay differs)."""


def events_dir_beside(db: str | os.PathLike[str]) -> Path:
    return Path(db).resolve().parent / EVENTS_DIR


def event_log_path(record: dict[str, Any], events_dir: Path) -> Path | None:
    """The run's existing event log, or None."""
    own = record.get("events_path")
    for path in ([Path(own)] if own else []) + [events_dir / f"{record['run_id']}.parquet"]:
        if path.is_file():
            return path
    return None


def record_event_log(
    record: dict[str, Any], events_dir: Path, traces: str | os.PathLike[str] | None = None
) -> Path:
    """Replay a stored run with --events into events_dir/<run_id>.parquet; returns the path."""
    run_id = str(record["run_id"])
    events_dir.mkdir(parents=True, exist_ok=True)
    target = events_dir / f"{run_id}.parquet"
    replay_path = events_dir / f"{run_id}.replay.parquet"
    try:
        replay = run_point(
            str(record["trace"]),
            budget=int(record["budget"]),
            policy=str(record["policy"]),
            cap=float(record.get("cap") or DEFAULT_CAP),
            retain=frozenset(int(s) for s in record.get("retained") or []),
            events=replay_path,
            traces=traces,
        )
    except TraceNotFound as exc:
        raise EventLogError(
            f"run {run_id} has no event log, and its trace {record['trace']!r} is not available "
            f"here to record one ({exc})"
        ) from None
    stored_sha = record.get("trace_sha256")
    problem = None
    if stored_sha and replay["trace_sha256"] != stored_sha:
        problem = (
            f"the trace file {record['trace']!r} found here (SHA-256 "
            f"{replay['trace_sha256'][:12]}) is not the one run {run_id} ran on "
            f"({str(stored_sha)[:12]})"
        )
    else:
        differs = [
            f"{name} {record.get(name)} vs {replay[name]}"
            for name in REPLAY_FIELDS
            if record.get(name) is not None and record.get(name) != replay[name]
        ]
        if differs:
            problem = f"replaying run {run_id} gives another run ({'; '.join(differs)})"
    if problem:
        replay_path.unlink(missing_ok=True)
        raise EventLogError(f"{problem}: no event log recorded")
    os.replace(replay_path, target)
    return target


def write_analysis(target: Path, analysis: dict[str, Any]) -> None:
    """Write a comparison as JSON, atomically: a reader (the compare page) polling for the
    file never sees half of one."""
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(target.name + ".tmp")
    tmp.write_text(json.dumps(analysis), encoding="utf-8")
    os.replace(tmp, target)


def read_event_log(path: Path) -> pd.DataFrame:
    return pd.read_parquet(path)


def check_distinct(run_a: str, run_b: str) -> None:
    """Two run ids to compare, not one twice (said before any store is opened)."""
    if run_a == run_b:
        raise ValueError(f"run a and run b are the same run ({run_a}): nothing to compare")


def compare_stored(
    store: Store,
    run_a: str,
    run_b: str,
    *,
    events_dir: Path | None = None,
    traces: str | os.PathLike[str] | None = None,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """The diverge analysis of two stored runs, recording the event log of each side that
    has none yet (events_dir: default events/ beside the store)."""
    check_distinct(run_a, run_b)
    records = []
    for side, run_id in zip("ab", (run_a, run_b), strict=True):
        record = store.run(run_id)
        if record is None:
            raise ValueError(f"no run {run_id!r} (run {side}) in the store {store.path}")
        records.append(record)
    check_comparable(records[0], records[1])
    folder = events_dir if events_dir is not None else events_dir_beside(store.path)
    found = [event_log_path(r, folder) for r in records]
    total = sum(1 for p in found if p is None) + 1
    done = 0
    paths = []
    for side, record, path in zip("ab", records, found, strict=True):
        if path is None:
            if progress:
                budget = int(record["budget"])
                progress(done, total, f"recording the event log of run {side} at budget {budget:,}")
            path = record_event_log(record, folder, traces)
            done += 1
        paths.append(path)
    if progress:
        progress(done, total, "analysing the two event logs")
    analysis = diverge(read_event_log(paths[0]), read_event_log(paths[1]), *records)
    if progress:
        progress(total, total, "done")
    return analysis
