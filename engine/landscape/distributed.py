"""Where a sweep's runs execute: in this process, a local process pool, or a Dask cluster.

Every backend takes the same `RunTask`s and yields batches of `Finished` results in
completion order: each batch is every result that was ready, so the caller
(engine/landscape/sweep.py) publishes them at once as one store part. A killed sweep loses
only the runs in flight, and a parent that falls behind fast workers catches up with larger
parts instead of a backlog.

- `workers=1`: in this process, one run after another (no pool to start, nothing to orphan).
- `workers=N`: a `ProcessPoolExecutor` of N processes. They are spawned, not forked: the
  parent has imported DuckDB and pyarrow (thread pools, not fork-safe). Each worker watches
  its parent and exits when the parent dies, so a SIGKILLed sweep leaves no idle workers.
- `scheduler=ADDRESS`: a Dask cluster (`dask scheduler` / `dask worker`). Workers may be on
  other hosts without the trace, so the trace's bytes are scattered to every worker once and
  written to a local file named by their SHA-256 (the parse cache is keyed the same way).
  A task cannot be stopped once running (cancelling only drops queued ones), so each task
  carries its own time limit.
"""

from __future__ import annotations

import os
import signal
import socket
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine.sim.catalog import TraceRef
from engine.sim.simulate import run_point

if TYPE_CHECKING:  # multiprocessing is imported when a pool starts: the CLI starts faster
    from concurrent.futures import Future, ProcessPoolExecutor

CONNECT_TIMEOUT_S = 10  # Dask retries a refused connection until this passes


@dataclass(frozen=True)
class RunTask:
    """One run of a sweep: a point (policy, ratio, cap) and which repeat of it."""

    policy: str
    ratio: float | None  # None: a budget in bytes of its own (check-report's hole edges)
    budget: int  # floor(ratio * peak), computed by the planner; the run must agree
    repeat: int
    stage: str  # grid | interior | refine
    cap: float
    time_limit: float | None


@dataclass
class Finished:
    task: RunTask
    record: dict[str, Any] | None  # None when the run raised
    error: str | None
    started_at: datetime | None = None
    ended_at: datetime | None = None
    host: str | None = None


def run_task(trace: TraceRef, task: RunTask) -> Finished:
    """Run one task here (in whichever process or worker this is)."""
    started = datetime.now()
    try:
        record = run_point(
            trace,
            budget=task.budget if task.ratio is None else None,
            ratio=task.ratio,
            policy=task.policy,
            cap=task.cap,
            time_limit=task.time_limit,
        )
    except Exception as exc:  # reported per run; the sweep goes on with the others
        return Finished(task, None, f"{type(exc).__name__}: {exc}", started, datetime.now())
    return Finished(task, record, None, started, datetime.now(), socket.gethostname())


class LocalExecutor:
    """Runs in this process (workers=1) or in a pool of spawned processes, kept for the
    whole sweep so later stages (refinement) do not pay for new processes."""

    def __init__(self, trace: TraceRef, workers: int) -> None:
        self.trace = trace
        self.workers = workers
        self._pool: ProcessPoolExecutor | None = None

    def run(self, tasks: Sequence[RunTask]) -> Iterator[list[Finished]]:
        if self.workers <= 1:
            for task in tasks:
                yield [run_task(self.trace, task)]
            return
        from concurrent.futures import FIRST_COMPLETED, wait

        if self._pool is None:
            self._pool = spawn_pool(self.workers)
        # Feed the pool a bounded window, so an interrupted sweep has little queued work.
        pending: set[Future[Finished]] = set()
        queue = list(reversed(tasks))
        try:
            while queue or pending:
                while queue and len(pending) < 4 * self.workers:
                    pending.add(self._pool.submit(run_task, self.trace, queue.pop()))
                finished, pending = wait(pending, return_when=FIRST_COMPLETED)
                yield [future.result() for future in finished]
        finally:
            for future in pending:
                future.cancel()

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None


def spawn_pool(workers: int) -> ProcessPoolExecutor:
    """A pool of `workers` processes for sweeps and walks: spawned, not forked (see above),
    each exiting with this process."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    return ProcessPoolExecutor(
        max_workers=workers,
        mp_context=multiprocessing.get_context("spawn"),
        initializer=_exit_with_parent,
        initargs=(os.getpid(),),
    )


def _exit_with_parent(parent: int) -> None:
    """Pool initializer: a daemon thread ends this worker once its parent is gone. Ctrl-C
    reaches the whole process group; only the parent acts on it (it stops feeding work and
    shuts the pool down), so a worker finishes its run instead of dying with a traceback."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.5)
        os._exit(1)

    threading.Thread(target=watch, daemon=True, name="exit-with-parent").start()


# -- Dask ----------------------------------------------------------------------------------


def _trace_on_worker(name: str, sha256: str, data: bytes) -> TraceRef:
    """The shipped trace as a file on this worker's disk, written once per host."""
    folder = Path(tempfile.gettempdir()) / "dtr-landscape-traces"
    path = folder / f"{sha256}.log"
    if not path.is_file() or path.stat().st_size != len(data):
        folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=path.name, suffix=".tmp")
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)  # atomic: concurrent tasks never read a partial file
    return TraceRef(name, path, "path")


def run_shipped_task(task: RunTask, *, name: str, sha256: str, data: bytes) -> Finished:
    """A Dask task: the trace arrives as bytes (scattered once), the run happens here."""
    return run_task(_trace_on_worker(name, sha256, data), task)


def connect(scheduler: str) -> Any:
    """A Dask client, or a one-line ValueError naming the address that did not answer."""
    from distributed import Client

    try:
        return Client(scheduler, timeout=CONNECT_TIMEOUT_S, set_as_default=False)
    except (OSError, TimeoutError, ValueError, TypeError) as exc:
        raise ValueError(
            f"--scheduler: expected a reachable Dask scheduler like tcp://HOST:PORT, "
            f"could not connect to {scheduler!r} ({exc})"
        ) from None


class DaskExecutor:
    """Runs on a Dask cluster; connecting happens here, before anything is stored, so an
    unreachable scheduler is a one-line error and not a half-registered sweep."""

    def __init__(self, trace: TraceRef, sha256: str, scheduler: str) -> None:
        self.trace = trace
        self.sha256 = sha256
        self.client = connect(scheduler)
        self._data: Any = None

    def run(self, tasks: Sequence[RunTask]) -> Iterator[list[Finished]]:
        from distributed import as_completed

        if not tasks:
            return
        if self._data is None:  # the trace's bytes, once per worker
            self._data = self.client.scatter(
                self.trace.path.read_bytes(), broadcast=True, hash=False
            )
        futures = self.client.map(
            run_shipped_task,
            list(tasks),
            name=self.trace.name,
            sha256=self.sha256,
            data=self._data,
            pure=False,
        )
        by_key = {future.key: task for future, task in zip(futures, tasks, strict=True)}
        done = as_completed(futures, loop=self.client.loop, with_results=True, raise_errors=False)
        try:
            for batch in done.batches():
                yield [
                    result if isinstance(result, Finished) else _failed(by_key[f.key], result)
                    for f, result in batch
                ]
        finally:
            self.client.cancel([f for f in futures if not f.done()])

    def close(self) -> None:
        self.client.close()


def _failed(task: RunTask, result: Any) -> Finished:
    """A task that failed as a task (e.g. a worker without the engine installed): Dask gives
    an error as (type, exception, traceback) and a cancellation as the exception."""
    exc = result[1] if isinstance(result, tuple) else result
    return Finished(task, None, f"{type(exc).__name__}: {exc}")


Executor = LocalExecutor | DaskExecutor


def open_executor(
    trace: TraceRef, sha256: str, *, workers: int = 1, scheduler: str | None = None
) -> Executor:
    if scheduler:
        return DaskExecutor(trace, sha256, scheduler)
    return LocalExecutor(trace, workers)
