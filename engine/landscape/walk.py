"""Exact landscapes: `dtr-landscape landscape`, the walk.

Every run reports its same-execution interval [lo, hi]: every budget in it gives the
identical execution (docs/DOMAIN.md, "Beyond sampling"). So `landscape` walks a budget range
from the bottom up, one run per distinct execution (next budget = hi + 1), and classifies
every byte of it. The runs share their work (engine/sim/native.py's Walk: each resumes where
it first differs from the previous one and takes the previous one's rest over where their
states meet again); chunks of the range run in a process pool or on Dask
(engine/landscape/chunks.py). Runs made here are stored (source "engine", stage "walk") and
stored runs whose interval covers a budget are reused instead of re-run, so a killed walk
goes on from the store. Edges are engine/landscape/edges.py, holes engine/landscape/holes.py
and engine/landscape/report.py; the interval arithmetic is engine/landscape/intervals.py.
"""

from __future__ import annotations

import os
import time
import uuid
from datetime import datetime
from functools import partial
from typing import TYPE_CHECKING, Any, TextIO

from engine.landscape.chunks import (
    CHUNK_RUNS,
    ChunkDone,
    ChunkRunner,
    ChunkTask,
    rest_halves,
    split,
)
from engine.landscape.holes import SAME_SETTINGS
from engine.landscape.intervals import (
    Interval,
    certified_bytes,
    covering,
    distinct_intervals,
    interval_from_row,
)
from engine.landscape.progress import WalkProgress
from engine.landscape.walk_claims import claimed, new_claim, note_progress
from engine.sim.policies import Policy, make_policy
from engine.sim.simulate import DEFAULT_CAP, load, run_point

if TYPE_CHECKING:
    from engine.landscape.store import Store
    from engine.sim.catalog import TraceRef
    from engine.sim.trace import Program

FLUSH_RUNS, FLUSH_SECONDS = 50, 2.0  # a walk publishes its runs in batches of at most these
# A long walk publishes thousands of parts; readers open every part on each query, so the walk
# folds them into the snapshot every this many parts (and when it ends).
COMPACT_EVERY_PARTS = 200
# A chunk reports as often as the walk publishes a batch. Continuing costs nothing: the rest
# goes to the process where the chunk's walk is live (chunks.py `_live`), and an idle worker
# asks a busy chunk at once (ChunkRunner), so the cadence only bounds what a killed walk loses
# and how stale a reader's view of the store is. (Until idle workers asked, a parallel slice
# lasted 10 fresh runs' time, up to 20 s, and a worker waited for it.)
SLICE_S = FLUSH_SECONDS


def policy_certified(policy: type[Policy] | Policy) -> bool:
    """Intervals are certified unless the policy reads the budget without recording those
    comparisons (then a budget inside [lo, hi] could decide differently)."""
    return not policy.reads_budget or policy.records_budget_reads


# -- store I/O -----------------------------------------------------------------------------
def stored_intervals(store: Store, trace_sha256: str, policy: str, cap: float) -> list[Interval]:
    """Intervals of the stored runs of one trace, policy and cap, without what-if runs and
    timeouts (a timed-out run stopped early: its interval says nothing about the rest)."""
    rows = store.rows(
        "SELECT run_id, status, overhead, same_lo, same_hi FROM runs WHERE trace_sha256 = ? "
        f"AND {SAME_SETTINGS} AND status IN ('ok', 'oom', 'thrashed') "
        "AND same_lo IS NOT NULL ORDER BY started_at NULLS FIRST, run_id",
        [trace_sha256, policy, float(cap)],
    )
    return [interval_from_row(row) for row in rows]


class RunWriter:
    """Runs point by point into the store, published in small batches: a killed walk loses
    at most one batch, and a walk of hundreds of runs does not leave hundreds of parts."""

    def __init__(self, store: Store, walk_id: str, stage: str, cap: float) -> None:
        self.store, self.walk_id, self.stage, self.cap = store, walk_id, stage, cap
        self.pending: list[tuple[dict[str, Any], datetime, datetime]] = []
        self.flushed_at = time.monotonic()
        self.executed = 0
        self.parts = 0

    def run(self, ref: TraceRef, budget: int, policy: str) -> Interval:
        started = datetime.now()
        record = run_point(ref, budget=budget, policy=policy, cap=self.cap)
        record["run_id"] = uuid.uuid4().hex
        self.add(record, started, datetime.now())
        same = record["same_execution"]
        interval = Interval(
            same["lo"], same["hi"], record["status"], record["overhead"], record["run_id"]
        )
        if not interval.contains(budget):  # the walk's progress rests on this
            raise RuntimeError(f"run at {budget} reported an interval [{same['lo']}, {same['hi']}]")
        return interval

    def add(self, record: dict[str, Any], started: datetime, ended: datetime) -> None:
        self.pending.append((record, started, ended))
        self.executed += 1
        if len(self.pending) >= FLUSH_RUNS or time.monotonic() - self.flushed_at > FLUSH_SECONDS:
            self.flush()

    def flush(self) -> None:
        from engine.landscape.store import flatten

        if not self.pending:
            return

        rows = [
            flatten(
                record,
                source="engine",
                walk_id=self.walk_id,
                stage=self.stage,
                cap=self.cap,
                started_at=started,
                ended_at=ended,
            )
            for record, started, ended in self.pending
        ]
        self.store.add_rows("runs", rows)
        self.pending = []
        self.flushed_at = time.monotonic()
        self.parts += 1
        if self.parts % COMPACT_EVERY_PARTS == 0:
            self.store.compact()


def _walk_row(
    kind: str,
    ref: TraceRef,
    program: Program,
    policy: str,
    cap: float,
    *,
    from_budget: int,
    to_budget: int,
) -> dict[str, Any]:
    """A new walk's row of the store's `walks` table (an edge search is a walk too): a fresh
    walk id, started now; how it ended is added when it stops."""
    return {
        "started_at": datetime.now(),
        "walk_id": uuid.uuid4().hex,
        "kind": kind,
        "trace": ref.name,
        "trace_sha256": program.sha256,
        "policy": policy,
        "cap": float(cap),
        "from_budget": from_budget,
        "to_budget": to_budget,
    }


def _result_head(row: dict[str, Any], cap: float) -> dict[str, Any]:
    """What a walk's (or edge search's) result says first: which walk, of what, how."""
    head = {key: row[key] for key in ("trace", "trace_sha256", "policy")}
    return {**head, "cap": cap, "walk_id": row["walk_id"]}


# -- landscape -----------------------------------------------------------------------------
def _stored(
    store: Store,
    trace: str | TraceRef,
    policy: str,
    cap: float,
    traces: str | os.PathLike[str] | None,
) -> tuple[Policy, TraceRef, Program, list[Interval], int]:
    """The policy, the trace, and its stored distinct intervals under that policy and cap
    (with how many overlapping ones were dropped): where walks and edge searches start."""
    the_policy = make_policy(policy)
    ref, program = load(trace, traces)
    assert program.sha256
    known, conflicts = distinct_intervals(
        stored_intervals(store, program.sha256, the_policy.spec, cap)
    )
    return the_policy, ref, program, known, conflicts


def walk_landscape(
    store: Store,
    trace: str | TraceRef,
    *,
    start: int,
    end: int,
    policy: str = "DTR",
    cap: float = DEFAULT_CAP,
    max_runs: int | None = None,
    traces: str | os.PathLike[str] | None = None,
    workers: int = 1,
    scheduler: str | None = None,
    progress: TextIO | None = None,
) -> dict[str, Any]:
    """Classify every budget in [start, end]: one run per distinct execution, from start
    upward (next budget = hi + 1), each resumed where it first differs from the previous one
    (engine/landscape/chunks.py). Stored runs whose interval covers a budget are reused, so
    only the uncovered gaps are walked; with several workers (or a Dask scheduler) the gaps
    are cut into chunks walked side by side, and a chunk's last interval reaching into the
    next chunk is the same execution as that chunk's first (stored once). `max_runs` bounds
    the new runs (the walk then goes in order, in this process or one worker)."""
    if not 0 <= start < end:
        raise ValueError(f"the range must go upward: from {start} to {end}")
    the_policy, ref, program, known, _ = _stored(store, trace, policy, cap, traces)
    spec = the_policy.spec
    row = _walk_row("landscape", ref, program, spec, cap, from_budget=start, to_budget=end)
    walk_id = row["walk_id"]
    certified = policy_certified(the_policy)
    found: dict[tuple[int, int | None], Interval] = {(i.lo, i.hi): i for i in known}
    new_ids: set[str] = set()
    gaps = uncovered(known, start, end)
    assert program.sha256
    claim = new_claim(walk_id, ref.name, program.sha256, spec, cap, gaps)
    with claimed(store.path, claim):  # refused if a running walk is on these budgets
        parallel = max_runs is None and (scheduler is not None or workers > 1)
        runner = ChunkRunner(
            ref,
            program.sha256,
            workers=workers if parallel else 1,
            scheduler=(scheduler if parallel else None),
        )
        pieces = 4 * runner.workers if parallel else 1
        limit = CHUNK_RUNS if max_runs is None else min(max_runs, CHUNK_RUNS)
        restart_s = 0.0  # the longest first run of a chunk so far: what a new piece costs
        runner.submit(
            [
                ChunkTask(spec, float(cap), a, b, max_runs=limit, max_seconds=SLICE_S)
                for ga, gb in gaps
                for a, b in split(ga, gb, pieces)
            ]
        )
        writer = RunWriter(store, walk_id, "walk", cap)
        meter = WalkProgress(ref.name, start, end, known, progress)
        meter.report = partial(note_progress, store.path, walk_id)
        try:
            for done in runner.results():
                if done.error is not None:
                    raise RuntimeError(
                        f"walk chunk {done.task.start:,}..{done.task.end:,} failed on "
                        f"{done.host or 'a worker'}: {done.error}"
                    )
                meter.from_scratch += done.fresh_runs
                stop = _keep_new_runs(done, found, new_ids, writer, meter, max_runs)
                meter.note()  # after the chunk's runs: the note counts all of them
                if stop:
                    runner.queue.clear()
                    break
                if done.fresh_runs and done.runs:
                    restart_s = max(restart_s, float(done.runs[0].record["wall_s"] or 0.0))
                if done.next_budget is not None:
                    left = (
                        CHUNK_RUNS
                        if max_runs is None
                        else min(CHUNK_RUNS, max_runs - writer.executed)
                    )
                    # The rest of the chunk, cut in two when a worker would otherwise sit idle
                    rest = [(done.next_budget, done.task.end)]
                    if parallel and runner.wants_split():
                        rest = rest_halves(done, restart_s)
                    runner.submit(
                        [
                            ChunkTask(spec, float(cap), a, b, max_runs=left, max_seconds=SLICE_S)
                            for a, b in rest
                        ],
                        after=done,  # first, where its walk is live (ChunkRunner)
                    )
        except BaseException:
            # interrupted: what was run is kept, and the walk says how far it certainly got
            writer.flush()
            steps, stopped_at = _chain(found, new_ids, start, end)
            reached = None if not (certified and steps) else min(end, (stopped_at or end + 1) - 1)
            store.add_walk(
                **row,
                ended_at=datetime.now(),
                reached=reached,
                complete=False,
                runs=writer.executed,
            )
            raise
        finally:
            runner.close()
            meter.close()
        writer.flush()
        if writer.parts:
            store.compact()
        steps, stopped_at = _chain(found, new_ids, start, end)
        if not certified:  # a budget between two runs' budgets may have decided differently
            stopped_at = start
        intervals = [Interval(s["lo"], s["hi"], s["status"]) for s in steps]
        done_bytes = certified_bytes(intervals, start, end) if certified else 0
        reached = None
        if certified and steps:
            reached = end if stopped_at is None else stopped_at - 1
        complete = certified and stopped_at is None
        store.add_walk(
            **{**row, "ended_at": datetime.now()},
            reached=reached,
            complete=complete,
            runs=writer.executed,
        )
        return {
            **_result_head(row, cap),
            "certified": certified,
            "from_budget": start,
            "to_budget": end,
            "intervals": steps,
            "runs_executed": writer.executed,
            # runs begun from operator 1 (each chunk's first), the others resumed from the run
            # before: what the walk could not share (a parallel walk's seams may count twice)
            "runs_from_scratch": meter.from_scratch,
            "runs_reused": sum(1 for s in steps if s["reused"]),
            "bytes_certified": done_bytes,
            "bytes_asked": end - start + 1,
            "coverage": done_bytes / (end - start + 1),
            "complete": complete,
            "stopped_at": stopped_at,
        }


def _keep_new_runs(
    done: ChunkDone,
    found: dict[tuple[int, int | None], Interval],
    new_ids: set[str],
    writer: RunWriter,
    meter: WalkProgress,
    max_runs: int | None,
) -> bool:
    """Store the chunk's runs of executions not found yet (at a seam the neighbouring chunk
    may have run one already); True once the walk has made `max_runs` new runs."""
    for timed in done.runs:
        if max_runs is not None and writer.executed >= max_runs:
            return True
        record = timed.record
        same = record["same_execution"]
        if (same["lo"], same["hi"]) in found:
            continue
        interval = Interval(
            same["lo"], same["hi"], record["status"], record["overhead"], record["run_id"]
        )
        found[(interval.lo, interval.hi)] = interval
        new_ids.add(interval.run_id or "")
        writer.add(record, timed.started_at, timed.ended_at)
        meter.add(interval)
    return max_runs is not None and writer.executed >= max_runs


def uncovered(known: list[Interval], start: int, end: int) -> list[tuple[int, int]]:
    """The stretches of [start, end] that no interval of the sorted, disjoint list covers."""
    gaps: list[tuple[int, int]] = []
    at = start
    for interval in known:
        if at > end:
            break
        top = end + 1 if interval.hi is None else interval.hi
        if top < at:
            continue
        if interval.lo > at:
            gaps.append((at, min(end, interval.lo - 1)))
        at = max(at, top + 1)
    if at <= end:
        gaps.append((at, end))
    return gaps


def _chain(
    found: dict[tuple[int, int | None], Interval], new_ids: set[str], start: int, end: int
) -> tuple[list[dict[str, Any]], int | None]:
    """The intervals from start upward, each touching the next, until end is passed, every
    larger budget is the same run (hi null), or a budget is not covered (returned)."""
    ordered, _ = distinct_intervals(found.values())
    steps: list[dict[str, Any]] = []
    budget: int | None = start
    while budget is not None and budget <= end:
        at = covering(ordered, budget)
        if at is None:
            return steps, budget
        interval = ordered[at]
        steps.append({**interval.as_dict(), "reused": interval.run_id not in new_ids})
        budget = None if interval.hi is None else interval.hi + 1
    return steps, None
