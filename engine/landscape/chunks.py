"""The work of an exact walk, cut into chunks that run anywhere: here, in a process pool, or on
a Dask cluster.

A chunk walks budgets [start, end] execution by execution (engine/sim/native.py's `Walk`:
each run resumes where it first differs from the previous one) and stops early after
`max_seconds` or `max_runs`, returning where it stopped, so the parent can store what came
back, keep the workers busy, and queue the rest as a new chunk. A killed walk therefore loses
at most the chunks in flight, and the same command resumes from the store.

Policies the C runtime does not implement, and TwoPhase (it compares inside its scan, where
no state is kept), replay every run from the start: the same records, no sharing.
"""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from engine.sim import native
from engine.sim.policies import make_policy
from engine.sim.simulate import baseline, limit_for, load, make_record, run_point

if TYPE_CHECKING:
    from concurrent.futures import Future, ProcessPoolExecutor

    from engine.sim.catalog import TraceRef

CHUNK_SECONDS = 20.0  # a chunk reports back at least this often (a killed walk loses less)
CHUNK_RUNS = 2000
RESTART_SLICES = 10  # a parallel chunk's slice: at least this many fresh runs' time


@dataclass(frozen=True)
class ChunkTask:
    policy: str
    cap: float
    start: int  # the first budget to run
    end: int  # the last budget of the chunk (its last interval may reach beyond)
    max_runs: int = CHUNK_RUNS
    max_seconds: float = CHUNK_SECONDS


@dataclass
class Timed:
    record: dict[str, Any]
    started_at: datetime
    ended_at: datetime


@dataclass
class ChunkDone:
    task: ChunkTask
    runs: list[Timed] = field(default_factory=list)
    next_budget: int | None = None  # where the chunk stopped early, else None
    error: str | None = None
    host: str | None = None
    fresh_runs: int = 0
    resumed_runs: int = 0
    slot: int | str | None = None  # where it ran: a local pool's slot, a Dask worker's address
    asked: bool = False  # it stopped early because an idle worker asked for part of its rest


def walk_chunk(trace: TraceRef, task: ChunkTask, asked_file: str | None = None) -> ChunkDone:
    """Walk one chunk in this process. Once `asked_file` exists (the runner's request for work
    for an idle worker), the chunk stops after the run in progress and reports."""
    try:
        return _walk_chunk(trace, task, asked_file)
    except Exception as exc:  # reported per chunk; the walk goes on with the others
        return ChunkDone(task, error=f"{type(exc).__name__}: {exc}", host=socket.gethostname())


@dataclass
class _LiveWalk:
    """A walk that stopped early in this process, positioned just before the run of `budget`."""

    key: tuple[str, str, float]  # trace sha256, policy, cap
    budget: int
    walk: native.Walk
    steps: Iterator[native.WalkStep]


# The walk a chunk of this process stopped early, kept so that the chunk continuing it here
# resumes its state instead of starting with a fresh run (1-10 s on the large traces, paid
# again at every report otherwise). One per process: its snapshots may hold hundreds of MB.
_live: _LiveWalk | None = None


def _walk_chunk(trace: TraceRef, task: ChunkTask, asked_file: str | None = None) -> ChunkDone:
    global _live
    ref, program = load(trace)
    base = baseline(program)
    policy = make_policy(task.policy)
    done = ChunkDone(task, host=socket.gethostname())
    began = time.monotonic()
    budget: int | None = task.start
    sharing = native.supports(policy) and not policy.reads_budget
    steps: Iterator[native.WalkStep] | None = None
    key = (program.sha256 or "", task.policy, task.cap)
    before: dict[str, int] = {}
    if sharing:
        if _live is not None and _live.key == key and _live.budget == task.start:
            walk, steps = _live.walk, _live.steps
            before = walk.stats()
        else:
            walk = native.Walk(program, task.start, policy, remat_limit=limit_for(base, task.cap))
            steps = iter(walk)
        _live = None
    while budget is not None and budget <= task.end:
        if len(done.runs) >= task.max_runs or time.monotonic() - began > task.max_seconds:
            done.next_budget = budget
            break
        # a stat between runs (a few us; a run in a band takes 2 ms to 1 s)
        if asked_file is not None and done.runs and os.path.exists(asked_file):
            done.next_budget, done.asked = budget, True
            break
        started = datetime.now()
        if steps is not None:
            result = next(steps).result
            record = make_record(ref, program, base, result, policy.spec, None, frozenset())
        else:
            record = run_point(ref, budget=budget, policy=task.policy, cap=task.cap)
        record["run_id"] = uuid.uuid4().hex
        same = record["same_execution"]
        if not same["lo"] <= budget <= (same["hi"] if same["hi"] is not None else budget):
            raise RuntimeError(f"run at {budget} reported an interval [{same['lo']}, {same['hi']}]")
        done.runs.append(Timed(record, started, datetime.now()))
        budget = None if same["hi"] is None else same["hi"] + 1
    if sharing:
        assert steps is not None
        stats = walk.stats()
        done.fresh_runs = stats["fresh_runs"] - before.get("fresh_runs", 0)
        done.resumed_runs = stats["resumed_runs"] - before.get("resumed_runs", 0)
        if done.next_budget is not None:
            _live = _LiveWalk(key, done.next_budget, walk, steps)
    else:
        done.fresh_runs = len(done.runs)
    return done


def split(start: int, end: int, pieces: int, minimum: int = 1 << 20) -> list[tuple[int, int]]:
    """[start, end] in at most `pieces` contiguous parts of at least `minimum` bytes."""
    width = end - start + 1
    count = max(1, min(pieces, width // minimum))
    bounds = [start + width * k // count for k in range(count + 1)]
    return [(bounds[k], bounds[k + 1] - 1) for k in range(count)]


def rest_split(done: ChunkDone, recent: int = 16) -> list[tuple[int, int]]:
    """The rest of a chunk that stopped early, [next_budget, end], in two pieces for two
    workers. Work gathers where intervals are narrow (just past a hole's edge, 1-3 KB on
    ResNet-32 where the chunk's other megabytes are a few executions), so halving the bytes
    leaves one piece with nearly all of it. The cut goes where the chunk would get after as
    many more runs as it just did (one more slice), at the density of its last `recent`
    intervals: the first piece keeps a worker busy until the second piece's next report."""
    assert done.next_budget is not None
    start, end = done.next_budget, done.task.end
    los = [t.record["same_execution"]["lo"] for t in done.runs[-recent:]]
    if not los or end - start < 2:
        return [(start, end)]
    span = max(1, start - los[0])  # bytes the last len(los) executions covered
    ahead = span * max(1, len(done.runs)) // len(los)
    cut = start + max(1, ahead)
    if cut > end:
        return [(start, end)]
    return [(start, cut - 1), (cut, end)]


def rest_halves(done: ChunkDone, restart_s: float, recent: int = 16) -> list[tuple[int, int]]:
    """The rest of a chunk that stopped early for an idle worker, in two halves of its bytes,
    or whole when, at the density and run time of its last `recent` executions, it would take
    less than two fresh runs (`restart_s`): the worker taking the upper half begins it with
    one. Halves in bytes can be far from halves in work (a hole's edge gathers executions),
    but a worker whose half ends soon asks again (ChunkRunner), and each ask costs one fresh
    run, so the work ends balanced after a few asks."""
    assert done.next_budget is not None
    start, end = done.next_budget, done.task.end
    tail = done.runs[-recent:]
    if not tail or end - start < 2:
        return [(start, end)]
    span = max(1, start - tail[0].record["same_execution"]["lo"])
    tail_s = sum(float(t.record.get("wall_s") or 0.0) for t in tail)
    if tail_s * (end - start + 1) / span < 2 * restart_s:
        return [(start, end)]
    middle = start + (end - start + 1) // 2
    return [(start, middle - 1), (middle, end)]


# -- where chunks run ------------------------------------------------------------------------
class ChunkRunner:
    """Runs chunk tasks in this process (workers=1), in spawned processes, or on Dask, and
    yields each ChunkDone as it finishes; `submit` may be called while iterating.

    A chunk that stopped early continues best where it ran: that process still holds its walk
    (`_live`), anywhere else the rest starts with a fresh run (3 s a slice in InceptionV4's
    band). So the rest of a chunk goes to the front of the queue, and in the local pool to the
    very process that ran it: each process is a pool of its own, so the runner chooses. Queued
    at the back, with the band's 178 gaps queued ahead of it, every 20 s slice of the band
    walk began with a fresh run (26 of 26 slices in 200 s, 22% of the runs' seconds, 16 of
    them avoidable).

    In the local pool a worker with nothing queued for it asks a busy chunk to report at once
    (a file the chunk checks between runs), and the walk gives it half of that chunk's rest
    (`wants_split`, `rest_halves`). Before, it waited for the chunk's next report, up to 20 s:
    InceptionV4's whole walk kept 1.76 of 2 cores busy. A Dask worker cannot be asked; there
    a chunk's rest is cut at every report while nothing is queued (`rest_split`)."""

    def __init__(
        self, trace: TraceRef, sha256: str, *, workers: int = 1, scheduler: str | None = None
    ) -> None:
        self.trace = trace
        self.sha256 = sha256
        self.workers = workers
        self.queue: list[ChunkTask] = []
        self._pools: list[ProcessPoolExecutor] = []
        self._meant_for: dict[ChunkTask, int | str] = {}  # a chunk's rest -> where its walk is
        self._running: dict[int, ChunkTask] = {}  # local pool: slot -> its chunk
        self._asked_dir: str | None = None  # local pool: the files that ask a slot to report
        self._not_to_ask: set[ChunkTask] = set()  # rests of an asked chunk that were not split
        self._client: Any = None
        self._data: Any = None
        if scheduler:
            from engine.landscape.distributed import connect

            self._client = connect(scheduler)
            self.workers = max(1, len(self._client.scheduler_info().get("workers", {})))

    def submit(self, tasks: Sequence[ChunkTask], *, after: ChunkDone | None = None) -> None:
        """Queue tasks; with `after`, they are the rest of that chunk: they go first, and the
        one starting where it stopped goes to the process that ran it."""
        if after is None:
            self.queue.extend(tasks)
            return
        self.queue[0:0] = tasks
        for task in tasks:
            if after.slot is not None and task.start == after.next_budget:
                self._meant_for[task] = after.slot
        if after.asked and len(tasks) == 1:  # too little left to share: not asked again
            self._not_to_ask.add(tasks[0])

    @property
    def can_ask(self) -> bool:
        """Whether a busy chunk can be asked to report for an idle worker (the local pool)."""
        return self._client is None and self.workers > 1

    def wants_split(self) -> bool:
        """Whether the rest of a chunk that just reported should be cut for another worker:
        nothing is queued and, in the local pool, another worker is idle; on Dask (where no
        chunk can be asked) whenever nothing is queued."""
        if self.queue:
            return False
        return not self.can_ask or len(self._running) < self.workers - 1

    def results(self) -> Iterator[ChunkDone]:
        if self._client is not None:
            yield from self._dask()
        elif self.workers <= 1:
            while self.queue:
                yield walk_chunk(self.trace, self.queue.pop(0))
        else:
            yield from self._local_pool()

    def _take(self, slot: int | str, idle: Sequence[int | str]) -> ChunkTask | None:
        """The next task for an idle slot: the rest of the chunk it ran, else the first task
        not meant for another idle slot, else the first."""
        for rule in (
            lambda t: self._meant_for.get(t) == slot,
            lambda t: self._meant_for.get(t) not in idle,
            lambda t: True,
        ):
            for k, task in enumerate(self.queue):
                if rule(task):
                    self._meant_for.pop(task, None)
                    return self.queue.pop(k)
        return None

    def _local_pool(self) -> Iterator[ChunkDone]:
        from concurrent.futures import FIRST_COMPLETED, wait

        from engine.landscape.distributed import spawn_pool

        if not self._pools:
            self._pools = [spawn_pool(1) for _ in range(self.workers)]
        if self._asked_dir is None:
            self._asked_dir = tempfile.mkdtemp(prefix="dtr-landscape-ask-")
        asked = [os.path.join(self._asked_dir, str(k)) for k in range(self.workers)]
        running: dict[Future[ChunkDone], int] = {}
        try:
            while self.queue or running:
                idle: list[int | str] = [
                    k for k in range(self.workers) if k not in running.values()
                ]
                # the slots with a chunk's rest meant for them choose first
                idle.sort(key=lambda k: k not in self._meant_for.values())
                for slot in idle:
                    task = self._take(slot, idle)
                    if task is not None:
                        assert isinstance(slot, int)
                        future = self._pools[slot].submit(walk_chunk, self.trace, task, asked[slot])
                        running[future] = slot
                        self._running[slot] = task
                self._ask(self.workers - len(running), asked)
                finished, _ = wait(running, return_when=FIRST_COMPLETED)
                for future in finished:
                    ran_on = running.pop(future)
                    self._not_to_ask.discard(self._running.pop(ran_on))
                    if os.path.exists(asked[ran_on]):  # asked, or done before it saw it
                        os.unlink(asked[ran_on])
                    done = future.result()
                    done.slot = ran_on
                    yield done
        finally:
            for future in running:
                future.cancel()
            self._running.clear()

    def _ask(self, idle: int, asked: Sequence[str]) -> None:
        """With nothing queued, ask as many busy chunks as slots are idle (the widest first)
        to report after their run in progress, so the walk can share out their rest."""
        if self.queue or idle <= 0:
            return
        busy = [
            (task.end - task.start, slot)
            for slot, task in self._running.items()
            if task not in self._not_to_ask and not os.path.exists(asked[slot])
        ]
        for _, slot in sorted(busy, reverse=True)[:idle]:
            with open(asked[slot], "w"):
                pass

    def _dask(self) -> Iterator[ChunkDone]:
        from distributed import as_completed

        if self._data is None:  # the trace's bytes, once per worker
            self._data = self._client.scatter(
                self.trace.path.read_bytes(), broadcast=True, hash=False
            )
        running = as_completed([], loop=self._client.loop, with_results=True, raise_errors=False)
        tasks: dict[str, ChunkTask] = {}
        pinned: dict[str, str | None] = {}  # future key -> the worker it was meant for

        def submit(task: ChunkTask, worker: str | None) -> None:
            future = self._client.submit(
                walk_shipped_chunk,
                task,
                name=self.trace.name,
                sha256=self.sha256,
                data=self._data,
                pure=False,
                workers=None if worker is None else [worker],
                allow_other_workers=worker is not None,
            )
            tasks[future.key] = task
            pinned[future.key] = worker
            running.add(future)

        def feed() -> None:
            # as many tasks as each worker has threads, each on its worker: a worker running
            # one more queued task would drop the walk its last chunk left live
            info = self._client.scheduler_info().get("workers", {})
            threads = {a: max(1, int(w.get("nthreads") or 1)) for a, w in info.items()}
            if not threads:  # none registered yet: the scheduler holds them until one is
                while self.queue and len(tasks) < 2:
                    submit(self.queue.pop(0), None)
                return
            self.workers = sum(threads.values())
            busy = list(pinned.values())
            free: list[int | str] = [a for a in threads for _ in range(threads[a] - busy.count(a))]
            free.sort(key=lambda a: a not in self._meant_for.values())
            for worker in free:
                task = self._take(worker, free)
                if task is not None:
                    assert isinstance(worker, str)
                    submit(task, worker)

        feed()
        try:
            for future, result in running:
                task = tasks.pop(future.key)
                pinned.pop(future.key, None)
                if not isinstance(result, ChunkDone):
                    exc = result[1] if isinstance(result, tuple) else result
                    result = ChunkDone(task, error=f"{type(exc).__name__}: {exc}")
                yield result
                feed()
        finally:
            running.clear()

    def close(self) -> None:
        for pool in self._pools:
            pool.shutdown(wait=True, cancel_futures=True)
        self._pools = []
        if self._asked_dir is not None:
            shutil.rmtree(self._asked_dir, ignore_errors=True)
            self._asked_dir = None
        if self._client is not None:
            self._client.close()
            self._client = None


def walk_shipped_chunk(task: ChunkTask, *, name: str, sha256: str, data: bytes) -> ChunkDone:
    """A Dask task: the trace arrives as bytes (scattered once), the chunk walks here."""
    from distributed import get_worker

    from engine.landscape.distributed import _trace_on_worker

    done = walk_chunk(_trace_on_worker(name, sha256, data), task)
    done.slot = get_worker().address  # its walk is live here (`_live`): the rest comes back
    return done
