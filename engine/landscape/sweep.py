"""`dtr-landscape sweep`: sampled landscapes, stored run by run.

    dtr-landscape sweep TRACE [--policy P ...] (--grid FROM:TO:STEP | --ratios a,b,c)
        [--interior N --seed S] [--refine STEP] [--repeats K] [--cap 60] [--time-limit S]
        [--workers N | --scheduler tcp://HOST:PORT] [--db PATH] [--traces DIR]

A sweep plans its runs (`plan_sweep`, engine/landscape/sampling.py), leaves out the points the store
already holds, runs the rest (engine/landscape/distributed.py) and publishes finished runs as they
arrive, so a killed sweep loses only the runs in flight and the same command resumes it.
A point is identified by (trace SHA-256, policy spec, budget, cap, retained storages,
repeat); the sweep's id is a hash of what it samples, so a rerun carries the same id.
"""

from __future__ import annotations

import io
import json
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine.landscape.distributed import Executor, Finished, RunTask, open_executor
from engine.landscape.progress import Progress
from engine.landscape.sampling import Sample, SweepSpec, plan_sweep, refine
from engine.landscape.signals import interrupts_held
from engine.sim.catalog import TraceNotFound, resolve

if TYPE_CHECKING:  # the store (and DuckDB) is imported only when a sweep runs
    from engine.landscape.store import Store

COMPACT_EVERY = 200  # runs between compactions, so a long sweep keeps the parts few
SOURCE = "engine"


# The runs that count as this sweep's points: the engine's, same trace, cap, nothing retained.
_POINTS = (
    "FROM runs WHERE trace_sha256 = ? AND cap = ? AND coalesce(retained, '') = '' "
    f"AND source = '{SOURCE}'"
)


def stored_points(store: Store, spec: SweepSpec) -> set[tuple[str, int, int]]:
    """(policy, budget, repeat) of every stored point of this trace and cap."""
    sql = f"SELECT policy, budget, coalesce(repeat, 0) AS repeat, status {_POINTS}"
    frame = store.query(sql, [spec.sha256, spec.cap])
    return {
        (str(row.policy), int(row.budget), int(row.repeat))
        for row in frame.itertuples()
        if not (spec.retry_timeouts and row.status == "timeout")
    }


def stored_samples(store: Store, spec: SweepSpec, policy: str) -> list[Sample]:
    """The stored outcomes within the sweep's range that refinement looks between.

    This sweep's own refinement runs are left out, so a resumed sweep plans the same
    refinement as the interrupted one (and finds those runs stored) instead of refining
    between them again.
    """
    lo, hi = spec.ratios[0], spec.ratios[-1]
    sql = (
        f"SELECT ratio, status, overhead {_POINTS} AND policy = ? AND ratio BETWEEN ? AND ? "
        "AND NOT (coalesce(stage, '') = 'refine' AND coalesce(sweep_id, '') = ?) ORDER BY ratio"
    )
    frame = store.query(sql, [spec.sha256, spec.cap, policy, lo, hi, spec.sweep_id])
    return [
        Sample(float(r.ratio), str(r.status), None if r.overhead != r.overhead else r.overhead)
        for r in frame.itertuples()
    ]


@dataclass
class Tally:
    total: int = 0
    done: int = 0
    skipped_existing: int = 0
    by_status: Counter[str] = field(default_factory=Counter)
    errors: list[str] = field(default_factory=list)
    since_compact: int = 0


def _new_tasks(store: Store, spec: SweepSpec, tasks: list[RunTask], tally: Tally) -> list[RunTask]:
    """Drop planned runs that the store already holds (or this sweep planned twice)."""
    have = stored_points(store, spec)
    todo, seen = [], set()
    for task in tasks:
        key = (task.policy, task.budget, task.repeat)
        if key in seen:
            continue  # two ratios with one budget (a very fine grid): one point
        seen.add(key)
        tally.total += 1
        if key in have:
            tally.skipped_existing += 1
        else:
            todo.append(task)
    return todo


def _publish(store: Store, spec: SweepSpec, batch: list[Finished], tally: Tally) -> list[str]:
    """Store a batch of finished runs as one part; returns their statuses ("error" for a run
    that raised or disagrees with the plan)."""
    from engine.landscape.store import flatten

    rows, statuses = [], []
    for finished in batch:
        task, record, error = finished.task, finished.record, finished.error
        if record is not None and (record["budget"], record["trace_sha256"]) != (
            task.budget,
            spec.sha256,
        ):
            # a worker saw another trace or peak (an edited file, another engine version)
            error = (
                f"worker ran budget {record['budget']} of {record['trace_sha256'][:12]}, "
                f"expected {task.budget} of {spec.sha256[:12]}"
            )
            record = None
        if record is None:
            tally.errors.append(f"{task.policy} ratio {task.ratio} repeat {task.repeat}: {error}")
            print(f"dtr-landscape: run failed: {tally.errors[-1]}", file=sys.stderr)
            statuses.append("error")
            continue
        extra: dict[str, Any] = {"host": finished.host} if finished.host else {}
        rows.append(
            flatten(
                record,
                source=SOURCE,
                sweep_id=spec.sweep_id,
                stage=task.stage,
                repeat=task.repeat,
                cap=spec.cap,
                started_at=finished.started_at,
                ended_at=finished.ended_at,
                **extra,
            )
        )
        statuses.append(str(record["status"]))
        tally.by_status[record["status"]] += 1
    with interrupts_held():  # stored and counted, or neither
        store.add_rows("runs", rows)
        tally.done += len(rows)
    tally.since_compact += len(rows)
    if tally.since_compact >= COMPACT_EVERY:
        store.compact()
        tally.since_compact = 0
    return statuses


def _run(
    store: Store,
    spec: SweepSpec,
    executor: Executor,
    todo: list[RunTask],
    progress: Progress,
    tally: Tally,
) -> None:
    for batch in executor.run(todo):
        for status in _publish(store, spec, batch, tally):
            progress.update(status)


def _register(store: Store, spec: SweepSpec, total: int) -> None:
    """The `sweeps` row; a resumed sweep keeps its first creation time."""
    old = store.query("SELECT created_at FROM sweeps WHERE sweep_id = ?", [spec.sweep_id])
    extra = {"created_at": old.iloc[0]["created_at"]} if not old.empty else {}
    args = json.dumps(spec.args, sort_keys=True)
    store.add_sweep(sweep_id=spec.sweep_id, trace=spec.trace.name, args=args, total=total, **extra)


def run_sweep(
    spec: SweepSpec, store: Store, executor: Executor, progress: Progress, tally: Tally
) -> None:
    """Plan, skip what is stored, run the rest; then refine between disagreeing samples.
    `tally` counts as it goes, so an interrupted sweep still reports what it did."""
    try:
        planned = []
        for policy in spec.policies:
            planned += spec.tasks(spec.ratios, "grid", policy)
            planned += spec.tasks(spec.interior, "interior", policy)
        todo = _new_tasks(store, spec, planned, tally)
        _register(store, spec, tally.total)
        progress.add_total(len(todo))
        _run(store, spec, executor, todo, progress, tally)
        if spec.refine_step is not None:
            refined = []
            for policy in spec.policies:
                ratios = refine(stored_samples(store, spec, policy), spec.refine_step)
                refined += spec.tasks(ratios, "refine", policy)
            todo = _new_tasks(store, spec, refined, tally)
            _register(store, spec, tally.total)
            progress.add_total(len(todo))
            _run(store, spec, executor, todo, progress, tally)
    finally:
        progress.close()
        store.compact()


# -- command line --------------------------------------------------------------------------


# -- benchmark -----------------------------------------------------------------------------


def bench_sweep_throughput(traces_dir: str | Path | None) -> list[str]:
    """The same sweep with 1 and then 2 local workers into throwaway stores: runs/minute."""
    from engine.landscape.store import Store

    try:
        resolve("resnet32", str(traces_dir) if traces_dir else None)
        trace, grid, repeats = "resnet32", "0.095:0.110:0.001", 4
    except TraceNotFound:
        trace, grid, repeats = "synthetic-mlp", "0.3:0.6:0.005", 2
    traces = str(traces_dir) if traces_dir else None
    lines, results = [], []
    for workers in (1, 2):
        spec = plan_sweep(trace, traces=traces, grid=grid, repeats=repeats)  # warms the cache
        with tempfile.TemporaryDirectory() as tmp:
            store = Store.open(Path(tmp) / "bench.duckdb")
            executor = open_executor(spec.trace, spec.sha256, workers=workers)
            started = time.perf_counter()
            tally = Tally()
            try:
                run_sweep(spec, store, executor, Progress(0, stream=io.StringIO()), tally)
            finally:
                executor.close()
            seconds = time.perf_counter() - started
            frame = store.query("SELECT budget, repeat, status, clock, evictions FROM runs")
            results.append(sorted(map(tuple, frame.itertuples(index=False))))
        lines.append(
            f"sweep {trace} {grid} x{repeats} ({tally.done} runs), {workers} worker"
            f"{'s' if workers > 1 else ''}: {tally.done / seconds * 60:,.0f} runs/min "
            f"({seconds:.1f} s, store writes included)"
        )
    lines.append(f"sweep records equal across worker counts: {results[0] == results[1]}")
    return lines
