"""Sweeps end to end: the real CLI in subprocesses, real DuckDB stores, the shipped synthetic
trace (it completes from about 0.4 of its peak, with OOM pockets above that)."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from engine.landscape.progress import Progress
from engine.landscape.sampling import Sample, parse_grid, refine
from engine.landscape.store import Store, unflatten
from engine.sim.record import FIELD_NAMES
from engine.sim.simulate import run_point
from tests.helpers import REPO, cli

SYNTHETIC = "synthetic-mlp"
# What differs between two executions of the same point (who ran it, when, how fast).
VOLATILE = {"wall_s", "run_id", "host", "started_at", "ended_at", "sweep_id"}


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    cache = tmp_path_factory.mktemp("cache")
    return {"DTR_LANDSCAPE_CACHE": str(cache), "DTR_LANDSCAPE_TRACES": ""}


def sweep(db: Path, *args: str, env: dict[str, str]) -> dict:
    done = cli("sweep", SYNTHETIC, "--db", str(db), *args, env=env)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def stored(db: Path) -> list[dict]:
    """Every stored run as a record plus the store's columns, without the volatile ones."""
    rows = [unflatten(r) for r in Store.open(db).runs().to_dict("records")]
    return [{k: v for k, v in row.items() if k not in VOLATILE} for row in rows]


def outcome(row: dict) -> tuple:
    return tuple(row[k] for k in FIELD_NAMES if k not in VOLATILE) + (row["repeat"],)


def test_grid_sweep_stores_exactly_the_grid(tmp_path: Path, env: dict[str, str]) -> None:
    db = tmp_path / "a.duckdb"
    summary = sweep(db, "--grid", "0.35:0.45:0.01", env=env)
    assert summary["total"] == summary["done"] == 11 and summary["skipped_existing"] == 0
    assert summary["errors"] == 0 and sum(summary["by_status"].values()) == 11
    rows = stored(db)
    ratios = [round(0.35 + i * 0.01, 10) for i in range(11)]
    assert sorted(r["ratio"] for r in rows) == ratios  # no float drift: 0.38, not 0.38000000001
    for row in rows:
        expected = run_point(SYNTHETIC, ratio=row["ratio"])
        for name in FIELD_NAMES:
            if name not in VOLATILE:
                assert row[name] == expected[name], (row["ratio"], name)
        assert (row["stage"], row["repeat"], row["cap"], row["source"]) == ("grid", 0, 60, "engine")
    assert {"ok", "oom"} <= {r["status"] for r in rows}  # the grid crosses the feasibility edge
    sweeps = Store.open(db).query("SELECT * FROM sweeps")
    assert list(sweeps["sweep_id"]) == [summary["sweep_id"]] and list(sweeps["total"]) == [11]
    assert json.loads(sweeps["args"][0])["grid"] == "0.35:0.45:0.01"

    # Rerunning the same sweep adds nothing and keeps its id.
    again = sweep(db, "--grid", "0.35:0.45:0.01", env=env)
    assert (again["done"], again["skipped_existing"]) == (0, 11)
    assert again["sweep_id"] == summary["sweep_id"]
    assert len(stored(db)) == 11

    # `runs --json` lists them: the record's fields plus the store's.
    listed = cli("runs", SYNTHETIC, "--db", str(db), "--json", env=env)
    assert listed.returncode == 0, listed.stderr
    lines = [json.loads(line) for line in listed.stdout.splitlines()]
    assert len(lines) == 11 and [x["ratio"] for x in lines] == ratios
    assert set(FIELD_NAMES) | {"run_id", "source", "sweep_id", "repeat", "stage"} <= set(lines[0])
    assert {x["sweep_id"] for x in lines} == {summary["sweep_id"]}
    table = cli("runs", SYNTHETIC, "--db", str(db), "--policy", "DTR", env=env)
    assert table.returncode == 0 and table.stdout.splitlines()[-1] == "11 runs"


def test_repeats_and_interior_are_reproducible(tmp_path: Path, env: dict[str, str]) -> None:
    args = ("--ratios", "0.38,0.42,0.5", "--interior", "1", "--seed", "3", "--repeats", "2")
    first = sweep(tmp_path / "a.duckdb", *args, env=env)
    second = sweep(tmp_path / "b.duckdb", *args, env=env)
    assert first["sweep_id"] == second["sweep_id"]
    assert first["done"] == 2 * (3 + 2)  # three ratios, one inside each of two intervals
    a, b = stored(tmp_path / "a.duckdb"), stored(tmp_path / "b.duckdb")
    assert sorted(map(outcome, a)) == sorted(map(outcome, b))
    inside = sorted({r["ratio"] for r in a if r["stage"] == "interior"})
    assert len(inside) == 2 and 0.38 < inside[0] < 0.42 < inside[1] < 0.5
    assert all(round(r, 6) == r for r in inside)
    for ratio in {r["ratio"] for r in a}:  # each repeat of a point agrees exactly
        runs = [outcome(r)[:-1] for r in a if r["ratio"] == ratio]
        assert len(runs) == 2 and runs[0] == runs[1]
    assert sorted(r["repeat"] for r in a) == [0] * 5 + [1] * 5
    reseeded = (*args[:5], "4", *args[6:])
    other = sweep(tmp_path / "c.duckdb", *reseeded, env=env)
    assert other["sweep_id"] != first["sweep_id"]


def test_refine_adds_points_only_where_neighbours_differ(
    tmp_path: Path, env: dict[str, str]
) -> None:
    db = tmp_path / "a.duckdb"
    summary = sweep(db, "--grid", "0.3:0.6:0.05", "--refine", "0.01", env=env)
    rows = stored(db)
    grid = sorted((r for r in rows if r["stage"] == "grid"), key=lambda r: r["ratio"])
    refined = sorted(r["ratio"] for r in rows if r["stage"] == "refine")
    assert [r["ratio"] for r in grid] == parse_grid("0.3:0.6:0.05")
    differing = []
    for a, b in zip(grid, grid[1:], strict=False):
        oa, ob = a["overhead"], b["overhead"]
        jump = a["status"] == b["status"] == "ok" and max(oa, ob) / min(oa, ob) - 1 > 0.25
        if a["status"] != b["status"] or jump:
            differing.append((a["ratio"], b["ratio"]))
    assert differing, "the synthetic grid should cross its feasibility edge"
    expected = sorted(
        round(lo + i * 0.01, 10) for lo, hi in differing for i in range(1, 5) if lo + i * 0.01 < hi
    )
    assert refined == expected
    assert summary["total"] == summary["done"] == len(grid) + len(refined)
    samples = [Sample(r["ratio"], r["status"], r["overhead"]) for r in grid]
    assert refine(samples, 0.01) == expected
    # Refined intervals are at most one STEP wide: the same sweep again adds nothing.
    again = sweep(db, "--grid", "0.3:0.6:0.05", "--refine", "0.01", env=env)
    assert again["done"] == 0 and again["skipped_existing"] == summary["total"]


def test_timeouts_are_kept_and_retried_on_request(tmp_path: Path, env: dict[str, str]) -> None:
    db = tmp_path / "a.duckdb"
    # A limit of a nanosecond stops every run after its first operator.
    limited = sweep(db, "--ratios", "0.4,0.5", "--time-limit", "0.000000001", env=env)
    assert limited["by_status"] == {"timeout": 2}
    assert sweep(db, "--ratios", "0.4,0.5", env=env)["done"] == 0
    retried = sweep(db, "--ratios", "0.4,0.5", "--retry-timeouts", env=env)
    assert retried["done"] == 2 and retried["by_status"] == {"ok": 2}


def test_killed_sweep_resumes_to_the_same_runs(tmp_path: Path, env: dict[str, str]) -> None:
    args = ("--grid", "0.3:0.89:0.01", "--repeats", "2", "--workers", "1")  # 60 points
    killed_db, whole_db = tmp_path / "killed.duckdb", tmp_path / "whole.duckdb"
    proc = _start_sweep(killed_db, env, *args)
    proc.send_signal(signal.SIGKILL)
    proc.communicate()
    assert proc.returncode == -signal.SIGKILL
    interrupted = len(stored(killed_db))
    assert 5 <= interrupted < 120
    resumed = sweep(killed_db, *args, env=env)
    assert resumed["skipped_existing"] == interrupted and resumed["done"] == 120 - interrupted
    sweep(whole_db, *args, env=env)
    killed, whole = stored(killed_db), stored(whole_db)
    assert len(killed) == 120 and len({(r["budget"], r["repeat"]) for r in killed}) == 120
    assert sorted(map(outcome, killed)) == sorted(map(outcome, whole))


def _start_sweep(db: Path, env: dict[str, str], *args: str) -> subprocess.Popen[str]:
    """A sweep in the background, once it has published a few runs."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "engine.cli.main", "sweep", SYNTHETIC, "--db", str(db), *args],
        cwd=REPO,
        env={**os.environ, **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    parts = Store.open(db).parts_dir
    while len(list(parts.glob("runs-*.parquet"))) < 5 and proc.poll() is None:
        time.sleep(0.005)
    return proc


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_stopped_pool_sweep_leaves_no_workers(
    tmp_path: Path, env: dict[str, str], sig: signal.Signals
) -> None:
    db = tmp_path / "a.duckdb"
    proc = _start_sweep(db, env, "--grid", "0.2:1.9:0.001", "--workers", "2")  # 1,701 runs
    try:
        workers = psutil.Process(proc.pid).children(recursive=True)
        assert len(workers) >= 2  # the pool's processes (and multiprocessing's tracker)
        proc.send_signal(sig)
        out, _ = proc.communicate()
    finally:
        if proc.poll() is None:
            proc.kill()
    # The workers notice their parent is gone and exit by themselves (bounded wait).
    _, alive = psutil.wait_procs(workers, timeout=60)
    assert alive == []
    if sig == signal.SIGTERM:  # wound down: summary printed, everything it ran is stored
        assert proc.returncode == 143
        summary = json.loads(out)
        assert summary["interrupted"] is True and 5 <= summary["done"] < 1701
        assert Store.open(db).stats()["runs"] == summary["done"]
    else:
        assert proc.returncode == -signal.SIGKILL and out == ""


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (("--grid", "0.3:0.5:0"), "STEP must be positive"),
        (("--grid", "0.3:0.5:-0.01"), "STEP must be positive"),
        (("--grid", "0.5:0.3:0.01"), "FROM must be below TO"),
        (("--grid", "0.3:2.5:0.1"), "ratios must be in (0, 2]"),
        (("--ratios", "0,0.5"), "ratios must be in (0, 2]"),
        (("--grid", "0.0001:2:0.0001"), "at most 5000"),
        (("--grid", "0.1:1:0.1", "--interior", "1000"), "at most 5000"),
        (("--grid", "0.3:abc:0.01"), "expected a number, got 'abc'"),
        (("--grid", "0.3:0.5"), "expected FROM:TO:STEP"),
        (("--ratios", "0.4,x"), "expected a number, got 'x'"),
        (("--grid", "0.3:0.5:0.1", "--repeats", "two"), "expected a whole number"),
        (("--grid", "0.3:0.5:0.1", "--cap", "sixty"), "expected a number"),
        (("--grid", "0.3:0.5:0.1", "--cap", "1"), "greater than 1"),
        (("--grid", "0.3:0.5:0.1", "--interior", "1", "--seed", "x"), "integer seed"),
        (("--grid", "0.3:0.5:0.1", "--seed", "3"), "--seed only applies with --interior"),
        (("--grid", "0.3:0.5:0.1", "--refine", "0"), "expected a positive number"),
        (("--grid", "0.3:0.5:0.1", "--policy", "Nope"), "Nope"),
        (("--grid", "0.3:0.5:0.1", "--workers", "2", "--scheduler", "x"), "not allowed with"),
        (("--time-limit", "1"), "--grid"),
    ],
)
def test_bad_input_is_one_line_and_stores_nothing(
    tmp_path: Path, env: dict[str, str], args: tuple[str, ...], expected: str
) -> None:
    db = tmp_path / "store" / "db.duckdb"
    done = cli("sweep", SYNTHETIC, "--db", str(db), *args, env=env)
    assert done.returncode == 2
    assert done.stdout == "" and len(done.stderr.splitlines()) == 1, done.stderr
    assert done.stderr.startswith("dtr-landscape: error:") and expected in done.stderr
    assert not db.parent.exists()


def test_unknown_trace_is_one_line(tmp_path: Path, env: dict[str, str]) -> None:
    db = tmp_path / "store" / "db.duckdb"
    Store.open(db)  # a store, empty (`runs` on no store at all says that instead)
    for command in (("sweep", "no-such-trace", "--grid", "0.3:0.5:0.1"), ("runs", "no-such")):
        done = cli(*command, "--db", str(db), env=env)
        assert done.returncode == 2 and len(done.stderr.splitlines()) == 1, done.stderr
        assert "unknown trace" in done.stderr
    assert Store.open(db).stats()["runs"] == 0


def test_progress_line_on_a_terminal_and_in_a_log() -> None:
    term = io.StringIO()
    bar = Progress(0, stream=term, tty=True)
    bar.add_total(3)
    for status in ("ok", "oom", "ok"):
        bar.update(status)
    bar.close()
    text = term.getvalue()
    assert text.count("\n") == 1 and text.endswith("\n") and "\r" in text
    assert "3/3 100%" in text and "runs/min" in text and "ok 2 oom 1" in text
    log = io.StringIO()
    bar = Progress(0, stream=log, tty=False, every=3600)
    bar.add_total(2)
    bar.update("ok")
    bar.update("thrashed")
    bar.close()
    lines = log.getvalue().splitlines()
    assert "\r" not in log.getvalue() and lines[-1].startswith("sweep 2/2 100%")
    assert len(lines) == 2  # the start and the end; nothing in between within the hour


def test_grid_has_no_float_drift() -> None:
    grid = parse_grid("0.095:0.110:0.001")
    assert len(grid) == 16 and grid[8] == 0.103 and grid[-1] == 0.11
    assert parse_grid("0.1:0.2:0.03") == [0.1, 0.13, 0.16, 0.19]


def test_listed_runs_are_the_records_the_store_holds(tmp_path: Path) -> None:
    """`runs` reads plain rows (not a DataFrame) for speed: each listed run is what the
    record read through pandas gives, field for field, over runs of every kind: ok and
    failing, a what-if with retained storages, a walk's open interval, an import whose
    fields are NULL and whose cap is NaN."""
    import math

    from engine.landscape.listing import STORE_FIELDS, run_batches, stored_runs
    from engine.landscape.schema import unflatten

    db = tmp_path / "s.duckdb"
    store = Store.open(db)
    records = [run_point(SYNTHETIC, ratio=r) for r in (0.05, 0.4, 0.6, 1.0)]
    store.add_runs(records, source="engine", cap=60, stage="grid")
    sha = records[0]["trace_sha256"]
    what_if = run_point(SYNTHETIC, ratio=0.6, retain=frozenset({1, 2}))
    store.add_runs([what_if], source="engine", cap=60)
    store.compact()
    top = {**records[-1], "same_execution": {"lo": records[-1]["budget"], "hi": None}}
    store.add_runs([top], source="engine", cap=60, stage="walk")
    store.add_rows(
        "runs",
        [
            {
                "run_id": "f" * 32,
                "trace_sha256": sha,
                "budget": 7,
                "cap": math.nan,
                "source": "import:x",
            }
        ],
    )
    listed = stored_runs(SYNTHETIC, db=str(db))  # the trace's runs, by its SHA-256
    frame = store.runs(sha)
    by_pandas = [unflatten(row) for row in frame.to_dict("records")]
    names = (*FIELD_NAMES, *STORE_FIELDS)
    expected = [{name: row.get(name) for name in names} for row in by_pandas]
    for got, want in zip(listed, expected, strict=True):
        assert got == want, {k: (got[k], want[k]) for k in names if got[k] != want[k]}
    assert len(listed) == 7 and [r["budget"] for r in listed] == sorted(frame["budget"])
    assert {r["status"] for r in listed} >= {"ok", "oom"} and [1, 2] in [
        r["retained"] for r in listed
    ]
    imported = next(r for r in listed if r["source"] == "import:x")
    assert imported["cap"] is None and imported["failure"] is None and imported["status"] is None
    assert any(r["same_execution"]["hi"] is None for r in listed if r["status"] == "ok")
    # what `runs` writes as it reads: the same records, a batch at a time
    batches = list(run_batches(SYNTHETIC, db=str(db), size=2))
    assert [len(b) for b in batches] == [2, 2, 2, 1]
    assert repr([r for b in batches for r in b]) == repr(listed)
