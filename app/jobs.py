"""The jobs table: work launched from the dashboard, kept in SQLite beside the store.

One file (`jobs.sqlite` next to the DuckDB store, WAL mode, stdlib `sqlite3`) shared by the
web workers, which insert jobs and request cancellation, and the runner (app/runner.py), the
one process that starts engine subprocesses and writes their progress. WAL lets the web
workers read while the runner writes. Every connection is short-lived: nothing is opened at
import time or kept across a fork.

A job's `spec` (JSON) says what to do, in the launch form's terms; the runner turns it into
engine command lines when it starts the job (app/plans.py `plan`).

States: queued -> running -> done | failed | cancelled | interrupted. A queued job can be
cancelled at once; a running one gets `cancel_requested` and the runner terminates it.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app import settings

JOBS_FILE = "jobs.sqlite"
JOBS_DIR = "jobs"  # beside the store: the runner's <id>.log (stderr) and <id>.out (stdout)
OUTPUT_LIMIT = 1 << 20  # an output read back for the page (an estimate's JSON is a few KB)
MAX_JOBS_ENV = settings.MAX_JOBS.env
# Jobs the web side may leave waiting: launching beyond it is refused, so a loop of launches
# cannot pile up unbounded work (the runner's own seeding is not limited).
MAX_QUEUED_ENV = settings.MAX_QUEUED.env
# A runner that has not written its heartbeat for this long is taken to be gone.
RUNNER_STALE_S = 10.0

ACTIVE = ("queued", "running")
FINISHED = ("done", "failed", "cancelled", "interrupted")


def jobs_folder(store_path: str | os.PathLike[str]) -> Path:
    """Where the runner keeps each job's stderr and stdout: jobs/ beside the store."""
    return Path(store_path).parent / JOBS_DIR


_SCHEMA = """
CREATE TABLE IF NOT EXISTS jobs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    kind TEXT NOT NULL,
    trace TEXT NOT NULL,
    policy TEXT NOT NULL,
    label TEXT NOT NULL,
    spec TEXT NOT NULL,
    status TEXT NOT NULL DEFAULT 'queued',
    cancel_requested INTEGER NOT NULL DEFAULT 0,
    pid INTEGER,
    done INTEGER NOT NULL DEFAULT 0,
    total INTEGER,
    current TEXT,
    created_at REAL NOT NULL,
    started_at REAL,
    ended_at REAL,
    exit_code INTEGER,
    error TEXT,
    log_tail TEXT
);
CREATE INDEX IF NOT EXISTS jobs_trace ON jobs (trace, id);
CREATE TABLE IF NOT EXISTS runner (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    pid INTEGER NOT NULL,
    beat_at REAL NOT NULL
);
"""


def max_jobs() -> int:
    """How many engine subprocesses the runner keeps going at once (DTR_LANDSCAPE_MAX_JOBS)."""
    return settings.MAX_JOBS.value()


def max_queued() -> int:
    """How many queued jobs the dashboard accepts at once (DTR_LANDSCAPE_MAX_QUEUED)."""
    return settings.MAX_QUEUED.value()


class QueueFull(RuntimeError):
    """A launch refused because `limit` jobs are already waiting."""

    def __init__(self, waiting: int, limit: int) -> None:
        self.waiting, self.limit = waiting, limit
        jobs = "1 job is" if waiting == 1 else f"{waiting} jobs are"
        super().__init__(f"{jobs} already waiting (limit {limit}); wait or cancel one.")


@dataclass(frozen=True)
class Job:
    id: int
    kind: str
    trace: str
    policy: str
    label: str
    spec: dict[str, Any]
    status: str
    cancel_requested: bool
    pid: int | None
    done: int
    total: int | None
    current: str | None
    created_at: float
    started_at: float | None
    ended_at: float | None
    exit_code: int | None
    error: str | None
    log_tail: str | None

    def elapsed(self, now: float | None = None) -> float | None:
        if self.started_at is None:
            return None
        end = self.ended_at if self.ended_at is not None else (now or time.time())
        return max(0.0, end - self.started_at)

    def eta(self, now: float | None = None) -> float | None:
        """Seconds left, extrapolated from the budgets done so far."""
        elapsed = self.elapsed(now)
        if self.status != "running" or elapsed is None or not self.total or not self.done:
            return None
        return elapsed / self.done * (self.total - self.done)


def _job(row: sqlite3.Row) -> Job:
    values = dict(row)
    values["spec"] = json.loads(values["spec"])
    values["cancel_requested"] = bool(values["cancel_requested"])
    return Job(**values)


@dataclass(frozen=True)
class JobStore:
    """The jobs table of one store folder."""

    path: Path

    def output(self, job_id: int) -> str | None:
        """What the job's engine command printed (its last step's stdout), if it is there and
        small: None otherwise."""
        path = jobs_folder(self.path) / f"{int(job_id)}.out"
        try:
            with open(path, "rb") as out:
                data = out.read(OUTPUT_LIMIT + 1)
        except OSError:
            return None
        return data.decode("utf-8", "replace") if len(data) <= OUTPUT_LIMIT else None

    @classmethod
    def beside(cls, store_path: str | os.PathLike[str]) -> JobStore:
        """The jobs file in the same folder as the DuckDB store at `store_path`."""
        return cls(Path(store_path).with_name(JOBS_FILE))

    @contextlib.contextmanager
    def connect(self) -> Iterator[sqlite3.Connection]:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        con = sqlite3.connect(self.path, timeout=30, isolation_level=None)
        con.row_factory = sqlite3.Row
        try:
            con.execute("PRAGMA journal_mode=WAL")
            con.execute("PRAGMA busy_timeout=30000")
            con.executescript(_SCHEMA)
            yield con
        finally:
            con.close()

    # -- the web side ----------------------------------------------------------------------
    def submit(self, spec: dict[str, Any], label: str, *, max_queued: int | None = None) -> int:
        """Queue a job; returns its id. With `max_queued`, QueueFull when that many jobs are
        waiting already (counted and inserted in one write transaction, so two web workers
        cannot both take the last place)."""
        with self.connect() as con:
            con.execute("BEGIN IMMEDIATE")
            try:
                waiting = con.execute("SELECT count(*) FROM jobs WHERE status = 'queued'")
                queued = int(waiting.fetchone()[0])
                if max_queued is not None and queued >= max_queued:
                    raise QueueFull(queued, max_queued)
                job_id = self._insert(con, spec, label)
            except BaseException:
                con.execute("ROLLBACK")
                raise
            con.execute("COMMIT")
            return job_id

    @staticmethod
    def _insert(con: sqlite3.Connection, spec: dict[str, Any], label: str) -> int:
        cur = con.execute(
            "INSERT INTO jobs (kind, trace, policy, label, spec, total, created_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)",
            (
                spec["kind"],
                spec["trace"],
                spec.get("policy", ""),
                label,
                json.dumps(spec, sort_keys=True),
                spec.get("total"),
                time.time(),
            ),
        )
        return int(cur.lastrowid or 0)

    def cancel(self, job_id: int) -> str | None:
        """Cancel a queued job at once, or ask the runner to stop a running one.
        Returns the job's status afterwards (None for an unknown id)."""
        with self.connect() as con:
            con.execute(
                "UPDATE jobs SET status = 'cancelled', ended_at = ? "
                "WHERE id = ? AND status = 'queued'",
                (time.time(), job_id),
            )
            con.execute(
                "UPDATE jobs SET cancel_requested = 1 WHERE id = ? AND status = 'running'",
                (job_id,),
            )
            row = con.execute("SELECT status FROM jobs WHERE id = ?", (job_id,)).fetchone()
            return str(row["status"]) if row else None

    def get(self, job_id: int) -> Job | None:
        with self.connect() as con:
            row = con.execute("SELECT * FROM jobs WHERE id = ?", (job_id,)).fetchone()
        return _job(row) if row else None

    def recent(self, trace: str | None = None, limit: int = 50) -> list[Job]:
        """The newest jobs first, of one trace or of all."""
        with self.connect() as con:
            if trace is None:
                rows = con.execute("SELECT * FROM jobs ORDER BY id DESC LIMIT ?", (limit,))
            else:
                rows = con.execute(
                    "SELECT * FROM jobs WHERE trace = ? ORDER BY id DESC LIMIT ?", (trace, limit)
                )
            return [_job(r) for r in rows.fetchall()]

    def latest_for(self, kind: str, key: str, value: str) -> Job | None:
        """The newest job of `kind` whose spec has `key` == `value`, in any state."""
        for job in self.recent(limit=500):
            if job.kind == kind and str(job.spec.get(key)) == value:
                return job
        return None

    def count(self) -> int:
        with self.connect() as con:
            return int(con.execute("SELECT count(*) FROM jobs").fetchone()[0])

    def runner_alive(self, now: float | None = None) -> bool:
        with self.connect() as con:
            row = con.execute("SELECT beat_at FROM runner WHERE id = 1").fetchone()
        return bool(row) and (now or time.time()) - float(row["beat_at"]) < RUNNER_STALE_S

    # -- the runner side -------------------------------------------------------------------
    def heartbeat(self, pid: int) -> None:
        with self.connect() as con:
            con.execute(
                "INSERT INTO runner (id, pid, beat_at) VALUES (1, ?, ?) "
                "ON CONFLICT (id) DO UPDATE SET pid = excluded.pid, beat_at = excluded.beat_at",
                (pid, time.time()),
            )

    def next_queued(self) -> Job | None:
        with self.connect() as con:
            row = con.execute(
                "SELECT * FROM jobs WHERE status = 'queued' ORDER BY id LIMIT 1"
            ).fetchone()
        return _job(row) if row else None

    def running(self) -> list[Job]:
        with self.connect() as con:
            rows = con.execute("SELECT * FROM jobs WHERE status = 'running' ORDER BY id")
            return [_job(r) for r in rows.fetchall()]

    def start(self, job_id: int, total: int | None) -> bool:
        """Mark a queued job running; False when it was cancelled meanwhile."""
        with self.connect() as con:
            cur = con.execute(
                "UPDATE jobs SET status = 'running', started_at = ?, total = ? "
                "WHERE id = ? AND status = 'queued'",
                (time.time(), total, job_id),
            )
            return cur.rowcount == 1

    def update(self, job_id: int, **fields: Any) -> None:
        allowed = {"pid", "done", "total", "current", "log_tail", "error"}
        unknown = set(fields) - allowed
        if unknown:
            raise ValueError(f"not updatable: {', '.join(sorted(unknown))}")
        if not fields:
            return
        sets = ", ".join(f"{name} = ?" for name in fields)
        with self.connect() as con:
            con.execute(f"UPDATE jobs SET {sets} WHERE id = ?", (*fields.values(), job_id))

    def finish(
        self,
        job_id: int,
        status: str,
        *,
        exit_code: int | None = None,
        error: str | None = None,
        log_tail: str | None = None,
    ) -> None:
        if status not in FINISHED:
            raise ValueError(f"not a final status: {status}")
        with self.connect() as con:
            con.execute(
                "UPDATE jobs SET status = ?, ended_at = ?, exit_code = ?, "
                "error = coalesce(?, error), log_tail = coalesce(?, log_tail) WHERE id = ?",
                (status, time.time(), exit_code, error, log_tail, job_id),
            )


def job_answer(store: JobStore, job: Job, workers: int) -> str | None:
    """What a finished job found that the store does not show, in one sentence read from what
    its command printed (the CLI's own sentence): an estimate's cost, an audit's verdict (also
    when the audit failed because a record differs). None for other jobs, or when the output
    is not what the job prints."""
    if job.kind == "estimate" and job.status == "done":
        from engine.landscape.estimate import describe as estimate_sentence

        return _answer(store, job, lambda result: estimate_sentence(result, workers=workers))
    if job.kind == "audit" and job.status in ("done", "failed"):
        from engine.landscape.audit import describe as audit_sentence

        return _answer(store, job, audit_sentence)
    return None


def _answer(store: JobStore, job: Job, sentence: Callable[[Any], str]) -> str | None:
    try:
        return sentence(json.loads(store.output(job.id) or ""))
    except (ValueError, KeyError, TypeError):
        return None
