"""The server killed mid-job and started again: the job is shown as ended (or resumed),
never lost or left `running`, and the store opens with every published run readable.
A real `dtr-landscape serve` (gunicorn and the runner), a real sweep, a real SIGKILL."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import psutil

from app.jobs import FINISHED, JobStore
from app.launch import grid_ratios
from app.load_bench import serve_env, serving, start_serve
from engine.landscape.store import Store, unflatten
from engine.sim.simulate import run_point

WAIT_S = 180  # an upper bound for polling, never an assertion about speed


def _until(predicate, what: str):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        found = predicate()
        if found:
            return found
        time.sleep(0.2)
    raise AssertionError(f"never {what}")


def test_killed_server_mid_job_loses_nothing(tmp_path: Path) -> None:
    db = tmp_path / "landscape.duckdb"
    store = Store.open(db)
    seeded = store.add_runs([run_point("synthetic-mlp", ratio=0.5)], source="engine", cap=60)
    (tmp_path / "no-dtr-traces").mkdir()
    env = serve_env(db, tmp_path / "no-dtr-traces", DTR_LANDSCAPE_SWEEP_WORKERS="1")
    jobs = JobStore.beside(db)

    first = start_serve(db, env)
    try:
        ratios = grid_ratios(0.3, 1.9, 0.001)  # 1,601 runs: still going when killed
        spec = {"kind": "grid", "trace": "synthetic-mlp", "policy": "DTR", "cap": 60.0}
        spec.update(grid=[0.3, 1.9, 0.001], ratios=ratios, total=len(ratios))
        job_id = jobs.submit(spec, "a long grid")
        job = _until(
            lambda: (j := jobs.get(job_id)) and j.status == "running" and j.pid and j,
            "started the job",
        )
        _until(lambda: store.stats()["runs"] > len(seeded) + 20, "published runs")
        os.killpg(first.process.pid, signal.SIGKILL)  # serve, gunicorn and the runner at once
        first.process.wait()
    finally:
        if first.process.poll() is None:
            os.killpg(first.process.pid, signal.SIGKILL)
            first.process.wait()
    assert (jobs.get(job_id) or job).status == "running"  # nobody was left to say otherwise

    with serving(db, env):  # the restarted runner settles what the dead one left behind
        after = _until(
            lambda: (j := jobs.get(job_id)) and (j.status in FINISHED or j.pid != job.pid) and j,
            "settled the job",
        )
        assert after.status == "interrupted" and "the server stopped" in (after.error or "")
        # the engine process of the killed server does not run on unseen
        assert not (psutil.pid_exists(job.pid) and psutil.Process(job.pid).status() != "zombie")

    reopened = Store.open(db)
    rows = reopened.query("SELECT * FROM runs ORDER BY run_id")
    assert len(rows) > len(seeded) + 20
    records = [unflatten(row) for row in rows.to_dict("records")]
    assert all(r["status"] in ("ok", "oom", "thrashed") for r in records)
    assert {r["run_id"] for r in records} >= set(seeded)
    reopened.compact()  # the parts of a killed writer fold into a snapshot like any others
    assert len(Store.open(db).query("SELECT run_id FROM runs")) == len(rows)
