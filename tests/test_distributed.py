"""Sweeps on a real Dask cluster: `dask scheduler` and two `dask worker` processes on
127.0.0.1, the sweep CLI as another process, the shipped synthetic trace."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from distributed import Client

from engine.landscape.store import Store, unflatten
from engine.sim.record import FIELD_NAMES
from tests.helpers import cli, three_chunks, walk_in_slices, walk_with_asks

SYNTHETIC = "synthetic-mlp"
VOLATILE = {"wall_s", "run_id", "host", "started_at", "ended_at", "sweep_id"}
STARTUP_LIMIT_S = 120  # how long to wait for the cluster to come up before giving up


def _dask() -> str:
    """The `dask` command installed beside this interpreter (the project's venv)."""
    return str(Path(sys.executable).parent / "dask")


def _start(args: list[str], log: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    """A dask command in the background, its output in a log file (read when debugging)."""
    with open(log, "wb") as out:  # the child keeps its own copy of the descriptor
        return subprocess.Popen(
            [_dask(), *args], env=env, cwd=log.parent, stdout=out, stderr=subprocess.STDOUT
        )


def _stop(procs: list[subprocess.Popen[bytes]]) -> None:
    """Workers first: a worker whose scheduler is gone waits to reconnect instead of exiting."""
    for proc in reversed(procs):
        if proc.poll() is None:
            proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """A scheduler and two single-threaded workers; yields (address, workers' temp dir)."""
    base = tmp_path_factory.mktemp("dask")
    worker_tmp = base / "worker-tmp"
    worker_tmp.mkdir()
    env = {
        **os.environ,
        "TMPDIR": str(worker_tmp),  # where workers write the shipped trace
        "DTR_LANDSCAPE_CACHE": str(base / "worker-cache"),
        "DTR_LANDSCAPE_TRACES": "",  # the workers must not find the trace by name
    }
    scheduler_file = base / "scheduler.json"
    # --no-dashboard still serves /health on the dashboard address: keep it on loopback too
    loopback = ["--host", "127.0.0.1", "--no-dashboard", "--dashboard-address", "127.0.0.1:0"]
    procs: list[subprocess.Popen[bytes]] = []
    try:
        scheduler = ["scheduler", "--port", "0", "--scheduler-file", str(scheduler_file)]
        procs.append(_start(scheduler + loopback, base / "scheduler.log", env))
        deadline = time.monotonic() + STARTUP_LIMIT_S
        while not scheduler_file.exists() and procs[0].poll() is None:
            assert time.monotonic() < deadline, "the Dask scheduler did not start"
            time.sleep(0.1)
        address = json.loads(scheduler_file.read_text())["address"]
        assert address.startswith("tcp://127.0.0.1:")
        for i in range(2):
            worker = ["worker", address, "--nthreads", "1", "--no-nanny", "--name", f"w{i}"]
            worker += ["--local-directory", str(base / f"w{i}")]
            procs.append(_start(worker + loopback, base / f"worker-{i}.log", env))
        with Client(address, timeout=STARTUP_LIMIT_S) as client:
            client.wait_for_workers(2, timeout=STARTUP_LIMIT_S)
        yield address, worker_tmp
    finally:
        _stop(procs)


def stored(db: Path) -> list[dict]:
    rows = [unflatten(r) for r in Store.open(db).runs().to_dict("records")]
    return [{k: v for k, v in row.items() if k not in VOLATILE} for row in rows]


def outcome(row: dict) -> tuple:
    return (*(row[k] for k in FIELD_NAMES if k not in VOLATILE), row["repeat"], row["stage"])


def test_sweep_on_a_dask_cluster_equals_a_local_one(
    tmp_path: Path, cluster: tuple[str, Path]
) -> None:
    address, worker_tmp = cluster
    env = {"DTR_LANDSCAPE_CACHE": str(tmp_path / "cache"), "DTR_LANDSCAPE_TRACES": ""}
    args = ("--grid", "0.35:0.5:0.01", "--repeats", "2", "--interior", "1", "--seed", "7")
    remote = cli(
        "sweep",
        SYNTHETIC,
        "--db",
        str(tmp_path / "dask.duckdb"),
        *args,
        "--scheduler",
        address,
        env=env,
    )
    assert remote.returncode == 0, remote.stderr
    local = cli(
        "sweep", SYNTHETIC, "--db", str(tmp_path / "local.duckdb"), *args, "--workers", "2", env=env
    )
    assert local.returncode == 0, local.stderr
    a, b = json.loads(remote.stdout), json.loads(local.stdout)
    assert a["done"] == b["done"] == 2 * (16 + 15) and a["errors"] == b["errors"] == 0
    on_dask, on_pool = stored(tmp_path / "dask.duckdb"), stored(tmp_path / "local.duckdb")
    assert sorted(map(outcome, on_dask)) == sorted(map(outcome, on_pool))
    assert len({(r["budget"], r["repeat"]) for r in on_dask}) == len(on_dask) == 62
    # The workers ran the trace from the bytes they were sent, not from a path of ours.
    assert [p.name for p in (worker_tmp / "dtr-landscape-traces").glob("*.log")] == [
        f"{on_dask[0]['trace_sha256']}.log"
    ]
    assert {r["trace"] for r in on_dask} == {SYNTHETIC}


def test_each_dask_task_gets_the_time_limit(tmp_path: Path, cluster: tuple[str, Path]) -> None:
    address, _ = cluster
    db = tmp_path / "db.duckdb"
    done = cli(
        "sweep",
        SYNTHETIC,
        "--db",
        str(db),
        "--ratios",
        "0.4,0.5,0.6",
        "--time-limit",
        "0.000000001",
        "--scheduler",
        address,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["by_status"] == {"timeout": 3}


def test_unreachable_scheduler_is_one_line_and_stores_nothing(tmp_path: Path) -> None:
    db = tmp_path / "store" / "db.duckdb"
    done = cli(
        "sweep", SYNTHETIC, "--db", str(db), "--ratios", "0.5", "--scheduler", "tcp://127.0.0.1:9"
    )
    assert done.returncode == 2 and len(done.stderr.splitlines()) == 1, done.stderr
    assert "expected a reachable Dask scheduler" in done.stderr
    assert not db.parent.exists()


def test_exact_walk_on_a_dask_cluster_equals_a_local_one(
    tmp_path: Path, cluster: tuple[str, Path]
) -> None:
    """Chunks of an exact walk on the cluster's workers, stitched here: the same intervals
    as a walk in this machine's one process."""
    address, _ = cluster
    env = {"DTR_LANDSCAPE_CACHE": str(tmp_path / "cache"), "DTR_LANDSCAPE_TRACES": ""}
    walk = ("landscape", SYNTHETIC, "--from", "0.3", "--to", "0.6", "--json")
    remote = cli(*walk, "--db", str(tmp_path / "dask.duckdb"), "--scheduler", address, env=env)
    assert remote.returncode == 0, remote.stderr
    local = cli(*walk, "--db", str(tmp_path / "local.duckdb"), env=env)
    assert local.returncode == 0, local.stderr
    a, b = json.loads(remote.stdout), json.loads(local.stdout)
    assert a["complete"] and a["coverage"] == 1.0 and len(a["intervals"]) > 100
    key = ("lo", "hi", "status", "overhead")
    assert [tuple(i[k] for k in key) for i in a["intervals"]] == [
        tuple(i[k] for k in key) for i in b["intervals"]
    ]


def test_the_rest_of_a_chunk_continues_on_the_dask_worker_that_ran_it(
    tmp_path: Path, cluster: tuple[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Three chunks on the two workers in slices of 10 runs: each slice's rest goes to the
    worker whose process holds its walk, so every chunk begins with one fresh run and no
    slice after its first does, and the records are those of each chunk walked whole."""
    from engine.landscape.chunks import ChunkRunner

    address, _ = cluster
    monkeypatch.setenv("DTR_LANDSCAPE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("DTR_LANDSCAPE_TRACES", "")
    ref, sha256, chunks, whole = three_chunks(SYNTHETIC)
    used = walk_in_slices(ChunkRunner(ref, sha256, scheduler=address), chunks, whole)
    assert len(used) == 2 and all(str(place).startswith("tcp://127.0.0.1:") for place in used)


def test_an_idle_dask_worker_asks_a_busy_chunk_for_half_its_rest(
    tmp_path: Path, cluster: tuple[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """As in a local pool (tests/test_landscape_walk.py): a worker left idle sets the Event
    that asks the other's long chunk to report, and takes the upper half of its rest."""
    from engine.landscape.chunks import ChunkRunner
    from engine.sim.catalog import resolve
    from engine.sim.simulate import load

    address, _ = cluster
    monkeypatch.setenv("DTR_LANDSCAPE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("DTR_LANDSCAPE_TRACES", "")
    ref = resolve(SYNTHETIC)
    sha256 = load(ref)[1].sha256
    assert sha256
    used = walk_with_asks(ChunkRunner(ref, sha256, scheduler=address))
    assert len(used) == 2 and all(str(place).startswith("tcp://127.0.0.1:") for place in used)


def test_a_reports_hole_edges_checked_on_a_dask_cluster(
    tmp_path: Path, cluster: tuple[str, Path]
) -> None:
    """check-report's runs at budgets of their own (not ratios) on the cluster's workers."""
    address, _ = cluster
    env = {"DTR_LANDSCAPE_CACHE": str(tmp_path / "cache"), "DTR_LANDSCAPE_TRACES": ""}
    db = str(tmp_path / "walk.duckdb")
    walk = cli("landscape", SYNTHETIC, "--from", "0.40", "--to", "0.43", "--db", db, env=env)
    assert walk.returncode == 0, walk.stderr
    report = cli("holes", "--all", "--db", db, "--json", env=env)
    assert report.returncode == 0, report.stderr
    path = tmp_path / "report.json"
    path.write_text(report.stdout, encoding="utf-8")
    done = cli("check-report", str(path), "--scheduler", address, "--json", env=env)
    assert done.returncode == 0, done.stderr
    [trace] = json.loads(done.stdout)["traces"]
    assert len(trace["holes"]) == 3 and trace["runs"] == 12
    assert all(e["agrees"] and e["budget"] for h in trace["holes"] for e in h["edges"])
