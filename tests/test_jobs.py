"""The jobs table and the runner: real SQLite, a real runner process, real engine runs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest

from app.jobs import Job, JobStore, job_answer
from app.launch import grid_ratios
from app.runner import Runner, parse_progress
from engine.landscape.store import Store
from tests.helpers import REPO

WAIT_S = 120  # an upper bound for polling, never an assertion about speed


def wait_for(jobs: JobStore, job_id: int, predicate, what: str) -> Job:
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        job = jobs.get(job_id)
        if job is not None and predicate(job):
            return job
        time.sleep(0.1)
    raise AssertionError(f"job {job_id} never {what}: {jobs.get(job_id)}")


@pytest.fixture
def runner(tmp_path: Path) -> Iterator[Path]:
    """A real runner process on a fresh store; yields the store's path."""
    db = tmp_path / "landscape.duckdb"
    process = subprocess.Popen(
        [sys.executable, "-m", "app.runner", "--db", str(db)],
        cwd=REPO,
        env={**os.environ, "DTR_LANDSCAPE_MAX_JOBS": "1"},
    )
    try:
        yield db
    finally:
        process.terminate()
        process.wait(timeout=60)


def spec(**extra: object) -> dict:
    return {"trace": "synthetic-mlp", "policy": "DTR", "cap": 60.0, "retain": "", **extra}


def test_submit_cancel_queued_and_list(tmp_path: Path) -> None:
    jobs = JobStore.beside(tmp_path / "landscape.duckdb")
    first = jobs.submit(spec(kind="run", ratio=0.5, total=1), "one")
    second = jobs.submit(spec(kind="run", ratio=0.6, total=1), "two")
    assert [j.id for j in jobs.recent("synthetic-mlp")] == [second, first]
    assert jobs.cancel(first) == "cancelled"
    assert jobs.next_queued() is not None and jobs.next_queued().id == second  # type: ignore[union-attr]
    assert jobs.cancel(999) is None
    assert not jobs.runner_alive()


def test_progress_lines() -> None:
    assert parse_progress("[12/40] ratio 0.42 oom") == (12, 40, "ratio 0.42")
    assert parse_progress("done 3 / 5 budget=123,456") == (3, 5, "budget 123,456")
    assert parse_progress("starting") == (None, None, None)


def test_runner_stores_a_run_and_its_event_log(runner: Path) -> None:
    jobs = JobStore.beside(runner)
    job_id = jobs.submit(spec(kind="run", ratio=0.45, total=1), "run at 0.45")
    job = wait_for(jobs, job_id, lambda j: j.status not in ("queued", "running"), "finished")
    assert job.status == "done", job
    assert (job.done, job.total, job.exit_code) == (1, 1, 0)
    store = Store.open(runner)
    (run_id,) = list(store.runs("synthetic-mlp")["run_id"])
    record = store.run(run_id)
    assert record is not None and record["source"] == "dashboard" and record["cap"] == 60.0
    # the event log: the same point replayed with --events into events/<run_id>.parquet
    events = jobs.submit(spec(kind="events", run_id=run_id, budget=record["budget"]), "events")
    job = wait_for(jobs, events, lambda j: j.status not in ("queued", "running"), "finished")
    assert job.status == "done", job
    log = pd.read_parquet(runner.parent / "events" / f"{run_id}.parquet")
    assert (log["kind"] == "operator").sum() == record["operators"]
    assert len(store.runs("synthetic-mlp")) == 1  # the replay added no second point


def test_a_published_holes_edges_job_stores_their_runs(runner: Path, tmp_path: Path) -> None:
    """A report of the synthetic trace's three holes (walked into another store), checked as a
    job: twelve runs stored, stage "check"."""
    walked = str(tmp_path / "walked.duckdb")
    engine = [sys.executable, "-m", "engine.cli.main"]
    walk = [*engine, "landscape", "synthetic-mlp", "--from", "0.40", "--to", "0.43", "--db", walked]
    subprocess.run(walk, cwd=REPO, check=True, capture_output=True)
    report = subprocess.run(
        [*engine, "holes", "--all", "--db", walked, "--json"],
        cwd=REPO,
        check=True,
        capture_output=True,
    )
    path = tmp_path / "report.json"
    path.write_bytes(report.stdout)
    jobs = JobStore.beside(runner)
    job_id = jobs.submit(spec(kind="published", report=str(path)), "published holes")
    job = wait_for(jobs, job_id, lambda j: j.status not in ("queued", "running"), "finished")
    assert job.status == "done" and job.exit_code == 0, job
    assert (job.done, job.total) == (12, 12)
    runs = Store.open(runner).runs("synthetic-mlp")
    assert len(runs) == 12 and set(runs["stage"]) == {"check"}


def test_an_estimate_job_answers_in_the_jobs_panel_and_stores_nothing(runner: Path) -> None:
    """An estimate of a walk, launched as a job: its command's JSON is the job's output, read
    back as one sentence (the CLI's own, engine/landscape/estimate.py describe); its sample
    walks are its progress; the store gets no run."""
    from app.components.jobs_panel import jobs_panel
    from engine.landscape.estimate import describe

    jobs = JobStore.beside(runner)
    job_id = jobs.submit(spec(kind="estimate", range=[0.3, 0.5]), "estimate of a walk")
    job = wait_for(jobs, job_id, lambda j: j.status not in ("queued", "running"), "finished")
    assert job.status == "done" and job.exit_code == 0, job
    assert (job.done, job.total) == (24, 24)  # 8 strata, 8 halvings of two samples each
    result = json.loads(jobs.output(job_id) or "")
    assert (result["trace"], result["policy"], result["cap"]) == ("synthetic-mlp", "DTR", 60.0)
    assert len(result["strata"]) == 16 and result["executions"] > 0
    answer = job_answer(jobs, job, workers=2)
    assert answer == describe(result, workers=2)
    assert answer.startswith(f"about {result['executions']:,.0f} executions, ")
    assert "with 2 workers" in answer and "nothing stored" in answer
    assert Store.open(runner).stats()["runs"] == 0
    shown = str(
        jobs_panel(
            [job], now=time.time(), runner_alive=True, cancel_type="c", answers={job_id: answer}
        ).to_plotly_json()
    )
    assert answer in shown
    other = jobs.submit(spec(kind="run", ratio=0.5, total=1), "a run")
    done = wait_for(jobs, other, lambda j: j.status not in ("queued", "running"), "finished")
    assert job_answer(jobs, done, workers=2) is None  # a run's output is not an estimate
    (runner.parent / "jobs" / f"{job_id}.out").write_text("{not json")
    assert job_answer(jobs, job, workers=2) is None


def test_an_audit_job_answers_with_its_verdict(runner: Path, tmp_path: Path) -> None:
    """An audit launched as a job over the dashboard's store: a walk's executions drawn and run
    again; the answer is the CLI's sentence (engine/landscape/audit.py describe), every record
    as stored. A record that differs fails the job, and the answer names the run and field."""
    from app.components.jobs_panel import jobs_panel
    from engine.landscape.audit import describe

    engine = [sys.executable, "-m", "engine.cli.main"]
    walk = [*engine, "landscape", "synthetic-mlp", "--from", "0.40", "--to", "0.41"]
    subprocess.run([*walk, "--db", str(runner)], cwd=REPO, check=True, capture_output=True)
    jobs = JobStore.beside(runner)
    job_id = jobs.submit(spec(kind="audit", range=[0.4, 0.41], sample=5, total=5), "audit")
    job = wait_for(jobs, job_id, lambda j: j.status not in ("queued", "running"), "finished")
    assert job.status == "done" and job.exit_code == 0, job
    assert (job.done, job.total) == (5, 5)
    result = json.loads(jobs.output(job_id) or "")
    answer = job_answer(jobs, job, workers=2)
    assert answer == describe(result) and answer.endswith("every record as stored")
    assert answer.startswith("synthetic-mlp DTR: 5 of ")
    shown = str(
        jobs_panel(
            [job], now=time.time(), runner_alive=True, cancel_type="c", answers={job_id: answer}
        ).to_plotly_json()
    )
    assert answer in shown
    store = Store.open(runner)
    [row] = store.rows("SELECT * FROM runs WHERE status = 'oom' ORDER BY same_lo LIMIT 1")
    store.add_rows("runs", [dict(row, run_id="f" * 32, clock=row["clock"] + 1)])
    bad = jobs.submit(spec(kind="audit", range=[0.4, 0.41], sample=500, total=500), "audit all")
    job = wait_for(jobs, bad, lambda j: j.status not in ("queued", "running"), "finished")
    assert job.status == "failed" and job.exit_code == 1, job
    answer = job_answer(jobs, job, workers=2)
    assert answer is not None and f"1 differ: run {'f' * 32} at " in answer
    assert answer.endswith("(clock)")


def test_a_failing_engine_command_fails_the_job(runner: Path) -> None:
    jobs = JobStore.beside(runner)
    job_id = jobs.submit(spec(kind="run", budget=1000, retain="999999", total=1), "bad")
    job = wait_for(jobs, job_id, lambda j: j.status not in ("queued", "running"), "finished")
    assert job.status == "failed" and job.exit_code == 2
    assert job.error is not None and "--retain" in job.error


def test_cancel_stops_the_subprocess(runner: Path) -> None:
    jobs = JobStore.beside(runner)
    ratios = grid_ratios(0.0004, 2.0, 0.0004)  # 5,000 budgets: runs long enough to cancel
    job_id = jobs.submit(
        spec(kind="grid", grid=[0.0004, 2.0, 0.0004], ratios=ratios, total=len(ratios)), "long"
    )
    queued = jobs.submit(spec(kind="run", ratio=0.5, total=1), "waits behind it (max 1 job)")
    wait_for(jobs, job_id, lambda j: j.status == "running" and j.pid is not None, "ran")
    assert jobs.cancel(job_id) == "running"
    job = wait_for(jobs, job_id, lambda j: j.status == "cancelled", "was cancelled")
    assert job.pid is not None
    with pytest.raises(ProcessLookupError):
        os.kill(job.pid, 0)
    # the runner goes on with the next job
    assert wait_for(jobs, queued, lambda j: j.status == "done", "ran").done == 1


def test_runner_seeds_an_empty_store(tmp_path: Path) -> None:
    db = tmp_path / "landscape.duckdb"
    (tmp_path / "no-dtr").mkdir()
    env = {
        **os.environ,
        "DTR_LANDSCAPE_DB": str(db),
        "DTR_LANDSCAPE_TRACES": str(tmp_path / "no-dtr"),
    }
    process = subprocess.Popen([sys.executable, "-m", "app.runner", "--seed"], cwd=REPO, env=env)
    try:
        jobs = JobStore.beside(db)
        deadline = time.monotonic() + WAIT_S
        while not jobs.count() and time.monotonic() < deadline:
            time.sleep(0.1)
        (seed,) = jobs.recent()
        assert seed.trace == "synthetic-mlp" and seed.label.startswith("seed")
        job = wait_for(jobs, seed.id, lambda j: j.status not in ("queued", "running"), "ended")
        assert job.status == "done", job
        assert len(Store.open(db).runs("synthetic-mlp")) == seed.total == 26
    finally:
        process.terminate()
        process.wait(timeout=60)
    # a second start on a seeded store queues nothing more
    Runner(db).seed()
    assert jobs.count() == 1


def test_a_runner_started_on_demand_goes_when_idle(tmp_path: Path) -> None:
    """The runner a web worker starts (ensure_runner) must not outlive its server: with
    nothing to do it returns on its own; a queued job keeps it until the job is done."""
    db = tmp_path / "landscape.duckdb"
    jobs = JobStore.beside(db)
    job_id = jobs.submit(spec(kind="run", ratio=0.5, total=1), "run at 0.5")
    process = subprocess.Popen(
        [sys.executable, "-m", "app.runner", "--db", str(db), "--exit-when-idle", "1"], cwd=REPO
    )
    try:
        assert process.wait(timeout=WAIT_S) == 0
    finally:
        if process.poll() is None:
            process.kill()
    job = jobs.get(job_id)
    assert job is not None and job.status == "done"
