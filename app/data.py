"""Request-time reads for the pages: the store, the jobs table, the trace catalog.

Everything is looked up when a page or callback asks: DTR_LANDSCAPE_DB and
DTR_LANDSCAPE_TRACES are read per call, the store is read through engine/landscape/store.py
(short-lived read-only DuckDB connections, never opened at import time or before gunicorn
forks), and the jobs table through app/jobs.py. Nothing here simulates.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from app.jobs import JobStore
from app.landscape import with_x
from app.plans import compare_file
from engine.landscape.diverge import ANALYSIS_FORMAT
from engine.landscape.holes import SAME_SETTINGS
from engine.landscape.ids import check_run_id, inside
from engine.landscape.intervals import missing
from engine.landscape.store import Store, StoreError, default_path
from engine.landscape.walk_claims import progress_of, running_walks
from engine.sim.simulate import DEFAULT_CAP

EVENTS_DIR = "events"


def store_path() -> Path:
    return default_path().resolve()


def store() -> Store:
    return Store.open(store_path())


def walks_running(trace: str | None = None) -> dict[str, Any]:
    """The walks running on the store now (of `trace`, or of every trace), wherever they were
    started, with what the pages show of them: `claims` (None when they cannot be read now:
    a walk holds the claims' lock), each one's last progress note by walk id, the traces'
    peaks, and the dashboard's running jobs by process id."""
    claims = running_walks(store_path())
    if claims is not None and trace is not None:
        claims = [claim for claim in claims if claim.trace == trace]
    return {
        "claims": claims,
        "progress": {c.walk_id: progress_of(store_path(), c.walk_id) for c in claims or []},
        "peaks": {name: peak(name) for name in {c.trace for c in claims or []}},
        "job_by_pid": {j.pid: j.id for j in jobs().running() if j.pid} if claims else {},
    }


def jobs() -> JobStore:
    return JobStore.beside(store_path())


def events_dir() -> Path:
    return store_path().parent / EVENTS_DIR


def events_path_for(run_id: str) -> Path:
    """Where an event log recorded from the dashboard goes: events/<run_id>.parquet, for a
    valid run id only (engine/landscape/ids.py), and never outside events/ (RunIdError or
    PathEscapeError, both ValueError)."""
    return inside(events_dir(), f"{check_run_id(run_id)}.parquet")


def catalog() -> dict[str, str]:
    """Trace name -> source ("dtr", "shipped") of every trace the engine can run."""
    from engine.sim.catalog import TraceNotFound, available

    try:
        refs = available()
    except TraceNotFound:  # DTR_LANDSCAPE_TRACES names a missing folder
        refs = [ref for ref in available("") if ref.source == "shipped"]
    return {ref.name: ref.source for ref in refs}


def known_traces() -> dict[str, str]:
    """The catalog's traces, then traces only the store knows (e.g. imported records)."""
    traces = catalog()
    for name in stored_traces():
        traces.setdefault(name, "store")
    return traces


def stored_traces() -> list[str]:
    frame = _query("SELECT DISTINCT trace FROM runs WHERE trace IS NOT NULL ORDER BY trace")
    return [str(t) for t in frame["trace"]] if not frame.empty else []


def policies() -> list[str]:
    """Every policy the engine knows, then policy specs the store holds (with parameters)."""
    from engine.sim.policies import POLICIES

    names = list(POLICIES)
    frame = _query("SELECT DISTINCT policy FROM runs WHERE policy IS NOT NULL ORDER BY policy")
    extra = [] if frame.empty else [str(p) for p in frame["policy"] if p not in names]
    return names + extra


def runs(
    trace: str | None = None, policy: str | None = None, columns: Sequence[str] | None = None
) -> pd.DataFrame:
    """Runs with `x` = budget / peak (`columns`: only those, and peak); an empty frame when
    the store cannot be read."""
    if columns is not None and "peak" not in columns:
        columns = [*columns, "peak"]
    try:
        return with_x(store().runs(trace, policy, columns))
    except StoreError:
        return with_x(pd.DataFrame(columns=["run_id", "budget", "peak", "status"]))


def runs_beside(record: dict[str, Any]) -> pd.DataFrame:
    """The runs `neighbours` (app/landscape.py) looks at for a run, read without the rest of a
    walked landscape: those of its trace (version), policy and budget-comparable settings at
    the nearest stored budgets below and above its own."""
    cap = DEFAULT_CAP if missing(record.get("cap")) else float(record["cap"])
    version = record.get("trace_sha256")
    which = (
        ("trace_sha256 = ?", version) if not missing(version) else ("trace = ?", record["trace"])
    )
    mine = f"{which[0]} AND {SAME_SETTINGS}"
    params = [which[1], record["policy"], cap]
    budget = int(record["budget"])
    frame = _query(
        f"SELECT * FROM runs WHERE {mine} AND budget IN ("
        f"(SELECT max(budget) FROM runs WHERE {mine} AND budget < ?), "
        f"(SELECT min(budget) FROM runs WHERE {mine} AND budget > ?))",
        [*params, *params, budget, *params, budget],
    )
    return with_x(frame)


def run(run_id: str) -> dict[str, Any] | None:
    try:
        return store().run(run_id)
    except StoreError:
        return None


def walks(trace: str, policy: str) -> pd.DataFrame:
    return _query("SELECT * FROM walks WHERE trace = ? AND policy = ?", [trace, policy])


def fingerprint(trace: str | None, policy: str) -> str:
    """Changes when runs of (trace, policy) are added: runs are only ever added."""
    if trace is None:
        frame = _query("SELECT count(*) AS n FROM runs WHERE policy = ?", [policy])
    else:
        frame = _query(
            "SELECT count(*) AS n FROM runs WHERE trace = ? AND policy = ?", [trace, policy]
        )
    n = int(frame["n"].iloc[0]) if not frame.empty else 0
    return trace_fingerprint(trace, policy, n, walk_count())


def trace_fingerprint(trace: str | None, policy: str, runs: int, walks: int) -> str:
    """`fingerprint` from counts already read."""
    return f"{trace}|{policy}|{runs}|{walks}"


def walk_count() -> int:
    frame = _query("SELECT count(*) AS n FROM walks")
    return int(frame["n"].iloc[0]) if not frame.empty else 0


def run_counts(policy: str) -> dict[str, int]:
    """Stored runs per trace under `policy`, in one query."""
    frame = _query(
        "SELECT trace, count(*) AS n FROM runs WHERE policy = ? GROUP BY trace", [policy]
    )
    return {str(t): int(n) for t, n in zip(frame.get("trace", []), frame.get("n", []), strict=True)}


def peak(trace: str, frame: pd.DataFrame | None = None) -> int | None:
    """The trace's unconstrained peak: from its runs, else from the engine's baseline cache."""
    if frame is not None and not frame.empty and frame["peak"].notna().any():
        return int(frame["peak"].dropna().iloc[0])
    stored = _query("SELECT max(peak) AS peak FROM runs WHERE trace = ?", [trace])
    if not stored.empty and pd.notna(stored["peak"].iloc[0]):
        return int(stored["peak"].iloc[0])
    return None


def read_events(path: str | os.PathLike[str]) -> pd.DataFrame | None:
    """A run's event log (Parquet, read with pyarrow), or None when it is not there yet."""
    target = Path(path)
    if not target.is_file():
        return None
    return pd.read_parquet(target)


def has_event_log(record: dict[str, Any]) -> bool:
    """The run's own events_path, or events/<run_id>.parquet beside the store, is there."""
    from engine.landscape.event_logs import event_log_path  # (it imports the simulator)

    return event_log_path(record, store_path().parent / EVENTS_DIR) is not None


def compare_path(run_a: str, run_b: str) -> Path:
    """Where the diverge analysis of runs a and b is cached (written by the engine job)."""
    return compare_file(store_path(), run_a, run_b)


def read_compare(run_a: str, run_b: str) -> dict[str, Any] | None:
    """The cached analysis of (a, b), or None when there is none of the current format."""
    path = compare_path(run_a, run_b)
    try:
        analysis = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    runs = analysis.get("runs") or {}
    ids = [(runs.get(side) or {}).get("run_id") for side in ("a", "b")]
    if analysis.get("format") != ANALYSIS_FORMAT or ids != [run_a, run_b]:
        return None
    return dict(analysis)


def what_if_run(record: dict[str, Any], retained: list[int]) -> dict[str, Any] | None:
    """The newest stored run of `record`'s trace, policy and budget that retained exactly
    `retained` (the compare page's what-if), or None."""
    sha = record.get("trace_sha256")
    frame = _query(
        f"SELECT run_id FROM runs WHERE {'trace_sha256' if sha else 'trace'} = ? AND policy = ? "
        "AND budget = ? AND retained = ? ORDER BY started_at DESC NULLS LAST, run_id DESC LIMIT 1",
        [
            sha or record["trace"],
            record["policy"],
            int(record["budget"]),
            ",".join(str(s) for s in sorted(retained)),
        ],
    )
    return run(str(frame["run_id"].iloc[0])) if not frame.empty else None


def _query(sql: str, params: list[Any] | None = None) -> pd.DataFrame:
    try:
        return store().query(sql, params)
    except StoreError:
        return pd.DataFrame()
