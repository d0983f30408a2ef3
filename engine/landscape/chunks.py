"""The work of an exact walk, cut into chunks that run anywhere: here, in a process pool, or on
a Dask cluster.

A chunk walks budgets [start, end] execution by execution (engine/sim/native.py's `Walk`:
each run resumes where it first differs from the previous one) and stops early after
`max_seconds` or `max_runs`, or when an idle worker asks for part of it, returning where it
stopped, so the parent can store what came back, keep the workers busy, and queue the rest
as a new chunk. A killed walk therefore loses at most the chunks in flight, and the same
command resumes from the store.

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
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from engine.sim import native
from engine.sim.policies import make_policy
from engine.sim.simulate import baseline, limit_for, load, make_record, run_point

if TYPE_CHECKING:
    from concurrent.futures import Future, ProcessPoolExecutor

    from engine.sim.catalog import TraceRef

CHUNK_SECONDS = 20.0  # a chunk's time limit unless its task says (a walk's slices say 2 s)
CHUNK_RUNS = 2000
ASK_LOOK_S = 0.5  # on Dask a chunk looks whether it is asked at most this often (a round trip)


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


def walk_chunk(
    trace: TraceRef, task: ChunkTask, asked: Callable[[], bool] | None = None
) -> ChunkDone:
    """Walk one chunk in this process. Once `asked()` (the runner asks for work for an idle
    worker), the chunk stops after the run in progress and reports."""
    try:
        return _walk_chunk(trace, task, asked)
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


def _walk_chunk(trace: TraceRef, task: ChunkTask, asked: Callable[[], bool] | None) -> ChunkDone:
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
        if asked is not None and done.runs and asked():
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
@dataclass(frozen=True)
class AskedFile:
    """A local pool's request that a chunk report: its slot's file exists (a stat between
    runs, a few us, where a run in a band takes 2 ms to 1 s)."""

    path: str

    def __call__(self) -> bool:
        return os.path.exists(self.path)


class AskedEvent:
    """A Dask worker's request that a chunk report: a named `distributed.Event` is set. Each
    look is a round trip to the scheduler, so the chunk looks at most every ASK_LOOK_S."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._event: Any = None
        self._looked = time.monotonic()

    def __call__(self) -> bool:
        if time.monotonic() - self._looked < ASK_LOOK_S:
            return False
        if self._event is None:
            from distributed import Event

            self._event = Event(self.name)
        self._looked = time.monotonic()
        return bool(self._event.is_set())


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

    A worker with nothing queued for it asks a busy chunk to report after its run in progress
    (a file in the local pool, a named Event on Dask), and the walk gives it half of that
    chunk's rest (`wants_split`, `rest_halves`). Before, it waited for the chunk's next
    report, up to 20 s, and InceptionV4's whole walk kept 1.76 of 2 cores busy."""

    def __init__(
        self, trace: TraceRef, sha256: str, *, workers: int = 1, scheduler: str | None = None
    ) -> None:
        self.trace = trace
        self.sha256 = sha256
        self.workers = workers
        self.queue: list[ChunkTask] = []
        self._pools: list[ProcessPoolExecutor] = []
        self._meant_for: dict[ChunkTask, int | str] = {}  # a chunk's rest -> where its walk is
        self._running: dict[int | str, ChunkTask] = {}  # a local slot or Dask key -> its chunk
        self._asked: set[int | str] = set()  # the running chunks asked to report
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

    def wants_split(self) -> bool:
        """Whether the rest of a chunk that just reported should be cut for another worker:
        nothing is queued and another worker is idle."""
        return not self.queue and len(self._running) < self.workers - 1

    def _to_ask(self, idle: int) -> list[int | str]:
        """With nothing queued, as many running chunks as workers are idle, the widest first,
        not asked yet and not a rest that was too small to share: those to ask to report."""
        if self.queue or idle <= 0:
            return []
        busy = [
            (task.end - task.start, str(key), key)
            for key, task in self._running.items()
            if key not in self._asked and task not in self._not_to_ask
        ]
        chosen = [key for _, _, key in sorted(busy, reverse=True)[:idle]]
        self._asked.update(chosen)
        return chosen

    def _finished(self, key: int | str) -> None:
        self._not_to_ask.discard(self._running.pop(key))
        self._asked.discard(key)

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
                        ask = AskedFile(asked[slot])
                        running[self._pools[slot].submit(walk_chunk, self.trace, task, ask)] = slot
                        self._running[slot] = task
                for slot in self._to_ask(self.workers - len(running)):
                    assert isinstance(slot, int)
                    with open(asked[slot], "w"):
                        pass
                finished, _ = wait(running, return_when=FIRST_COMPLETED)
                for future in finished:
                    ran_on = running.pop(future)
                    self._finished(ran_on)
                    if os.path.exists(asked[ran_on]):  # asked, or done before it saw it
                        os.unlink(asked[ran_on])
                    done = future.result()
                    done.slot = ran_on
                    yield done
        finally:
            for future in running:
                future.cancel()
            self._running.clear()
            self._asked.clear()

    def _dask(self) -> Iterator[ChunkDone]:
        from distributed import Event, as_completed

        if self._data is None:  # the trace's bytes, once per worker
            self._data = self._client.scatter(
                self.trace.path.read_bytes(), broadcast=True, hash=False
            )
        running = as_completed([], loop=self._client.loop, with_results=True, raise_errors=False)
        pinned: dict[str, str | None] = {}  # future key -> the worker it was meant for
        events: dict[int | str, str] = {}  # future key -> the Event asking its chunk to report

        def submit(task: ChunkTask, worker: str | None) -> None:
            event = f"dtr-landscape-ask-{uuid.uuid4().hex}"
            future = self._client.submit(
                walk_shipped_chunk,
                task,
                name=self.trace.name,
                sha256=self.sha256,
                data=self._data,
                ask=event,
                pure=False,
                workers=None if worker is None else [worker],
                allow_other_workers=worker is not None,
            )
            self._running[future.key] = task
            pinned[future.key] = worker
            events[future.key] = event
            running.add(future)

        def feed() -> None:
            # as many tasks as each worker has threads, each on its worker: a worker running
            # one more queued task would drop the walk its last chunk left live
            info = self._client.scheduler_info().get("workers", {})
            threads = {a: max(1, int(w.get("nthreads") or 1)) for a, w in info.items()}
            if not threads:  # none registered yet: the scheduler holds them until one is
                while self.queue and len(self._running) < 2:
                    submit(self.queue.pop(0), None)
                return
            self.workers = sum(threads.values())
            busy = list(pinned.values())
            free: list[int | str] = [a for a in threads for _ in range(threads[a] - busy.count(a))]
            free.sort(key=lambda a: a not in self._meant_for.values())
            idle = 0
            for worker in free:
                task = self._take(worker, free)
                if task is not None:
                    assert isinstance(worker, str)
                    submit(task, worker)
                else:
                    idle += 1
            for key in self._to_ask(idle):
                Event(events[key], client=self._client).set()

        feed()
        try:
            for future, result in running:
                task = self._running[future.key]
                if future.key in self._asked:  # a set Event stays on the scheduler until cleared
                    Event(events[future.key], client=self._client).clear()
                self._finished(future.key)
                pinned.pop(future.key, None)
                events.pop(future.key, None)
                if not isinstance(result, ChunkDone):
                    exc = result[1] if isinstance(result, tuple) else result
                    result = ChunkDone(task, error=f"{type(exc).__name__}: {exc}")
                yield result
                feed()
        finally:
            running.clear()
            self._running.clear()
            self._asked.clear()

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


def walk_shipped_chunk(
    task: ChunkTask, *, name: str, sha256: str, data: bytes, ask: str | None = None
) -> ChunkDone:
    """A Dask task: the trace arrives as bytes (scattered once), the chunk walks here, and
    reports early once the Event named `ask` is set."""
    from distributed import get_worker

    from engine.landscape.distributed import _trace_on_worker

    asked = None if ask is None else AskedEvent(ask)
    done = walk_chunk(_trace_on_worker(name, sha256, data), task, asked)
    done.slot = get_worker().address  # its walk is live here (`_live`): the rest comes back
    return done
