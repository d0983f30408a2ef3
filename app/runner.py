"""The job runner: the one process that starts engine subprocesses for queued jobs.

    python -m app.runner [--db PATH] [--seed]

`dtr-landscape serve` starts it beside gunicorn; a web worker that queues a job also starts
one when no runner has written a heartbeat lately (`ensure_runner`). An exclusive lock on
`jobs.sqlite.runner.lock` keeps it to one runner per store: a second one exits at once.

Per job it runs the plan's engine commands (app/plans.py), at most DTR_LANDSCAPE_MAX_JOBS
at once, each in its own session so a cancel stops the whole process group (SIGTERM, then
SIGKILL after a grace period). stderr goes to `jobs/<id>.log` beside the store, parsed for
`done/total` progress lines; stdout to `jobs/<id>.out` (a `run`'s JSON record, which the
runner stores). The web process never simulates: everything heavy happens in these
subprocesses.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import fcntl
import json
import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from types import FrameType
from typing import IO, Any

from app import settings
from app.jobs import Job, JobStore, jobs_folder, max_jobs
from app.plans import Plan, PlanError, engine, plan, seed_specs

POLL_S = 0.25
HEARTBEAT_S = 2.0
# A runner started on demand by a web worker (ensure_runner) returns after this long idle.
IDLE_EXIT_S = 300.0
KILL_GRACE_S = 5.0
LOG_LINES = 20
COMMANDS_TTL_S = 60.0
# Fold the store's Parquet parts into its snapshot once this many have piled up (each
# dashboard run publishes one part; many parts slow every reader down).
COMPACT_AFTER_PARTS = 200
PROGRESS = re.compile(r"(\d+)\s*/\s*(\d+)")
CURRENT = re.compile(r"\b(ratio|budget)\b[\s=:]+([0-9][0-9.,_]*)")


def parse_progress(line: str) -> tuple[int | None, int | None, str | None]:
    """(done, total, current budget) from one progress line; None where absent."""
    done = total = None
    match = PROGRESS.search(line)
    if match:
        done, total = int(match.group(1)), int(match.group(2))
    current = CURRENT.search(line)
    return done, total, (f"{current.group(1)} {current.group(2)}" if current else None)


_commands: tuple[float, set[str]] = (0.0, set())


def engine_commands() -> set[str]:
    """The engine CLI's subcommands, as its --help lists them ({traces,run,...}); asked again
    after a minute, so an engine upgraded under a running runner is seen."""
    global _commands
    if time.monotonic() - _commands[0] > COMMANDS_TTL_S or not _commands[1]:
        done = subprocess.run(engine("--help"), capture_output=True, text=True, timeout=60)
        match = re.search(r"\{([a-z_,-]+)\}", done.stdout)
        _commands = (time.monotonic(), set(match.group(1).split(",")) if match else {"run"})
    return _commands[1]


@dataclass
class Active:
    """A running job: its plan, the step in progress and that step's process."""

    job: Job
    plan: Plan
    step: int
    process: subprocess.Popen[bytes]
    log: IO[bytes]
    out_path: Path
    step_started: datetime
    offset: int = 0
    tail: collections.deque[str] = field(default_factory=lambda: collections.deque(maxlen=50))
    term_sent_at: float | None = None


class Runner:
    def __init__(self, db: Path) -> None:
        self.db = db
        self.jobs = JobStore.beside(db)
        self.folder = jobs_folder(db)
        self.active: dict[int, Active] = {}
        self.stopping = False
        self.last_beat = 0.0

    # -- lifecycle -------------------------------------------------------------------------
    def recover(self) -> None:
        """Jobs left `running` by a runner that died: stop their processes, mark them."""
        for job in self.jobs.running():
            if job.pid and _is_engine_process(job.pid):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(job.pid, signal.SIGKILL)
            self.jobs.finish(
                job.id,
                "interrupted",
                error="the server stopped while it ran; the runs it stored are kept, and "
                "launching it again goes on from them",
            )

    def seed(self) -> None:
        """An empty store and no jobs ever: queue a quick grid of every trace."""
        from engine.landscape.store import Store
        from engine.sim.catalog import TraceNotFound, available

        if self.jobs.count() or Store.open(self.db).stats()["runs"]:
            return
        try:
            refs = available()
        except TraceNotFound:
            refs = [r for r in available("") if r.source == "shipped"]
        traces = {r.name: r.source for r in sorted(refs, key=lambda r: r.source != "shipped")}
        for spec, label in seed_specs(traces):
            self.jobs.submit(spec, label)

    def loop(self, exit_when_idle: float | None = None) -> None:
        """Run jobs until stopped; with `exit_when_idle`, also return after that many seconds
        with nothing running or queued (a runner a web worker started on demand must not
        outlive its server: the next job starts another)."""
        idle_since = time.time()
        while not (self.stopping and not self.active):
            now = time.time()
            if self.active:
                idle_since = now
            elif exit_when_idle is not None and now - idle_since > exit_when_idle:
                if self.jobs.next_queued() is None:
                    return
                idle_since = now
            if now - self.last_beat >= HEARTBEAT_S:
                self.jobs.heartbeat(os.getpid())
                self.last_beat = now
            for active in list(self.active.values()):
                self.tend(active)
            while not self.stopping and len(self.active) < max_jobs():
                job = self.jobs.next_queued()
                if job is None or not self.begin(job):
                    break
            time.sleep(POLL_S)

    def stop(self, _signum: int = 0, _frame: FrameType | None = None) -> None:
        """Stop every subprocess; their jobs end `interrupted`."""
        self.stopping = True
        for active in self.active.values():
            _signal_group(active.process, signal.SIGTERM)
            active.term_sent_at = active.term_sent_at or time.time()

    # -- one job ---------------------------------------------------------------------------
    def begin(self, job: Job) -> bool:
        """Start a queued job's first step; False if it was cancelled meanwhile."""
        workers = settings.SWEEP_WORKERS.value()
        try:
            the_plan = plan(job.spec, db=self.db, commands=engine_commands(), workers=workers)
        except (PlanError, KeyError, TypeError, ValueError) as exc:
            if self.jobs.start(job.id, None):
                self.jobs.finish(job.id, "failed", error=str(exc))
            return True
        if not self.jobs.start(job.id, the_plan.total):
            return False
        job = self.jobs.get(job.id) or job
        self.folder.mkdir(parents=True, exist_ok=True)
        log = open(self.folder / f"{job.id}.log", "ab")  # noqa: SIM115 - closed in finish_job
        self.active[job.id] = self._spawn(job, the_plan, 0, log)
        return True

    def _spawn(self, job: Job, the_plan: Plan, index: int, log: IO[bytes]) -> Active:
        step = the_plan.steps[index]
        if the_plan.events_path:
            Path(the_plan.events_path).parent.mkdir(parents=True, exist_ok=True)
        out_path = self.folder / f"{job.id}.out"
        with open(out_path, "wb") as out:
            process = subprocess.Popen(
                step.argv, stdout=out, stderr=log, stdin=subprocess.DEVNULL, start_new_session=True
            )
        self.jobs.update(job.id, pid=process.pid, current=step.current or None)
        offset = log.tell()
        return Active(job, the_plan, index, process, log, out_path, datetime.now(), offset)

    def tend(self, active: Active) -> None:
        job_id = active.job.id
        self._read_progress(active)
        code = active.process.poll()
        if code is None:
            self._maybe_cancel(active)
            return
        step = active.plan.steps[active.step]
        if active.term_sent_at is not None:
            status = "cancelled" if not self.stopping else "interrupted"
            self._end(active, status, code, None)
            return
        if code != 0:
            errors = [line for line in active.tail if "error" in line.lower()]
            error = errors[-1] if errors else f"exit status {code}"
            self._end(active, "failed", code, error)
            return
        try:
            if step.stores:
                self._store_record(active)
        except Exception as exc:  # a bad record or store error: the job fails, the runner goes on
            self._end(active, "failed", code, f"storing the result failed: {exc}")
            return
        if active.plan.steps[active.step].stores and len(active.plan.steps) > 1:
            self.jobs.update(job_id, done=active.step + 1)
        if active.step + 1 < len(active.plan.steps):
            self.active[job_id] = self._spawn(active.job, active.plan, active.step + 1, active.log)
            return
        total = active.plan.total
        if total is None and len(active.plan.steps) == 1:
            # a command that counts its own work (check-report's "12/12"): all of it is done
            job = self.jobs.get(job_id)
            total = job.total if job is not None else None
        self.jobs.update(job_id, done=total or active.step + 1)
        self._end(active, "done", code, None)

    def _read_progress(self, active: Active) -> None:
        active.log.flush()
        path = self.folder / f"{active.job.id}.log"
        with open(path, "rb") as log:
            log.seek(active.offset)
            chunk = log.read()
        if not chunk:
            return
        complete = chunk[: chunk.rfind(b"\n") + 1] if b"\n" in chunk else b""
        active.offset += len(complete)
        fields: dict[str, Any] = {}
        for raw in complete.decode("utf-8", "replace").splitlines():
            line = raw.rstrip()
            if not line:
                continue
            active.tail.append(line)
            done, total, current = parse_progress(line)
            if done is not None and len(active.plan.steps) == 1:
                fields["done"], fields["total"] = done, total
            if current:
                fields["current"] = current
        fields["log_tail"] = "\n".join(list(active.tail)[-LOG_LINES:])
        self.jobs.update(active.job.id, **fields)

    def _maybe_cancel(self, active: Active) -> None:
        if active.term_sent_at is None:
            job = self.jobs.get(active.job.id)
            if job is not None and job.cancel_requested:
                _signal_group(active.process, signal.SIGTERM)
                active.term_sent_at = time.time()
        elif time.time() - active.term_sent_at > KILL_GRACE_S:
            _signal_group(active.process, signal.SIGKILL)

    def _end(self, active: Active, status: str, code: int | None, error: str | None) -> None:
        # the process is reaped (poll returned); make sure its group is gone too
        _signal_group(active.process, signal.SIGKILL)
        active.log.close()
        tail = "\n".join(list(active.tail)[-LOG_LINES:]) or None
        self.jobs.finish(active.job.id, status, exit_code=code, error=error, log_tail=tail)
        del self.active[active.job.id]
        self._maybe_compact()

    def _maybe_compact(self) -> None:
        from engine.landscape.store import Store, StoreError

        store = Store.open(self.db)
        if len(list(store.parts_dir.glob("*.parquet"))) < COMPACT_AFTER_PARTS:
            return
        try:
            store.compact()  # under the store's own exclusive lock; readers never wait
        except (StoreError, OSError) as exc:
            print(f"app.runner: compaction failed: {exc}", file=sys.stderr)

    def _store_record(self, active: Active) -> None:
        from engine.landscape.store import Store

        lines = [x for x in active.out_path.read_text(encoding="utf-8").splitlines() if x.strip()]
        record = json.loads(lines[-1])
        Store.open(self.db).add_runs(
            [record],
            source="dashboard",
            cap=float(active.job.spec["cap"]),
            started_at=active.step_started,
            ended_at=datetime.now(),
        )


def _signal_group(process: subprocess.Popen[bytes], signum: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signum)


def _is_engine_process(pid: int) -> bool:
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    return b"engine.cli.main" in cmdline


def lock_path(db: Path) -> Path:
    return JobStore.beside(db).path.with_name("jobs.sqlite.runner.lock")


def main(argv: list[str] | None = None) -> int:
    from engine.landscape.store import default_path

    parser = argparse.ArgumentParser(prog="python -m app.runner")
    parser.add_argument("--db", help="the DuckDB store (default: DTR_LANDSCAPE_DB)")
    parser.add_argument("--seed", action="store_true", help="seed an empty store")
    parser.add_argument(
        "--exit-when-idle",
        type=float,
        metavar="SECONDS",
        help="return after this long with no job running or queued",
    )
    args = parser.parse_args(argv)
    db = default_path(args.db).resolve()
    path = lock_path(db)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return 0  # another runner owns this store
        runner = Runner(db)
        signal.signal(signal.SIGTERM, runner.stop)
        signal.signal(signal.SIGINT, runner.stop)
        runner.recover()
        if args.seed:
            runner.seed()
        runner.loop(exit_when_idle=args.exit_when_idle)
    return 0


_spawned: list[subprocess.Popen[bytes]] = []


def ensure_runner(db: Path) -> None:
    """Start a detached runner when none has written a heartbeat lately (the lock keeps it
    to one). Called by a web worker after it queues a job."""
    if JobStore.beside(db).runner_alive():
        return
    for process in list(_spawned):  # reap runners this worker started that have exited
        if process.poll() is not None:
            _spawned.remove(process)
    _spawned.append(
        subprocess.Popen(
            [sys.executable, "-m", "app.runner", "--db", str(db)]
            + ["--exit-when-idle", str(IDLE_EXIT_S)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
    )


if __name__ == "__main__":
    sys.exit(main())
