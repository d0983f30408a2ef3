"""The dashboard under load: `dtr-landscape bench-dashboard --load [--users 50 --runs 1000]`.

On a temporary store, it starts the real `dtr-landscape serve` (gunicorn and the job runner)
on a free loopback port, points locust's headless users at it (app/load_users.py: each one
browses /, /trace/<name> and /run/<id> and fires the pages' Dash callbacks), and while they
browse, a real `dtr-landscape sweep` of the shipped synthetic trace writes `runs` new runs
into the same store. When the sweep is done (and at least `min_seconds` have passed) the
users stop, and it reports the error count (any non-2xx answer, or a callback answer that is
not JSON) and the 95th percentile of each kind of page view and of every request.

Nothing here asserts a time: the figures are printed; tests/test_load.py runs a small
version and asserts only that there were no errors and every run was written.
"""

from __future__ import annotations

import contextlib
import csv
import json
import math
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from app.browser_bench import free_port

TRACE = "synthetic-mlp"
USERS_FILE = Path(__file__).resolve().with_name("load_users.py")
START_TIMEOUT_S = 120.0


@dataclass
class Served:
    """A running `dtr-landscape serve`: its base URL and its process (a session leader, so
    the process group is serve, gunicorn with its workers, and the runner)."""

    base: str
    process: subprocess.Popen[bytes]
    log: Path


def serve_env(db: Path, traces: Path, **settings: str) -> dict[str, str]:
    return {
        **os.environ,
        "DTR_LANDSCAPE_DB": str(db),
        "DTR_LANDSCAPE_TRACES": str(traces),
        **settings,
    }


def start_serve(db: Path, env: dict[str, str], *, workers: int = 2) -> Served:
    """Start `dtr-landscape serve` on a free port and wait until it answers."""
    port = free_port()
    log = db.parent / f"serve-{port}.log"
    with open(log, "wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "engine.cli.main", "serve", "--port", str(port)]
            + ["--workers", str(workers)],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    served = Served(f"http://127.0.0.1:{port}", process, log)
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        try:
            with urllib.request.urlopen(served.base + "/", timeout=5) as response:
                if response.status == 200:
                    return served
        except OSError:
            pass
        if process.poll() is not None or time.monotonic() > deadline:
            stop_serve(served)
            raise RuntimeError(f"the server did not start: {log.read_text(errors='replace')}")
        time.sleep(0.2)


def stop_serve(served: Served, timeout: float = 60) -> None:
    """SIGTERM (serve passes it on to gunicorn and the runner), SIGKILL if that is ignored."""
    if served.process.poll() is None:
        served.process.send_signal(signal.SIGTERM)
        try:
            served.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(served.process.pid, signal.SIGKILL)
            served.process.wait()


@contextlib.contextmanager
def serving(db: Path, env: dict[str, str], *, workers: int = 2) -> Iterator[Served]:
    served = start_serve(db, env, workers=workers)
    try:
        yield served
    finally:
        stop_serve(served)


def sweep_grid(runs: int) -> str:
    """A grid of exactly `runs` ratios from 0.3 (at most 1,701 at a step of 0.001)."""
    if not 2 <= runs <= 1701:
        raise ValueError(f"--runs: expected 2 to 1701 runs, got {runs}")
    return f"0.3:{0.3 + (runs - 1) * 0.001:.3f}:0.001"


@dataclass
class LoadResult:
    users: int
    runs_written: int
    sweep_seconds: float
    seconds: float
    requests: int
    errors: int
    p95_ms: float  # every request
    page_views: int
    page_p95_ms: float  # every complete page view (shell, layout, dependencies, content)
    page_p95_by_kind_ms: dict[str, float] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        kinds = ", ".join(f"{name} {ms:,.0f}" for name, ms in self.page_p95_by_kind_ms.items())
        out = [
            f"dashboard under load: {self.users} users browsing for {self.seconds:.0f} s "
            f"while a sweep wrote {self.runs_written:,} runs ({self.sweep_seconds:.0f} s)",
            f"  requests {self.requests:,}, errors {self.errors}; p95 per request "
            f"{self.p95_ms:,.0f} ms",
            f"  page views {self.page_views:,}, p95 {self.page_p95_ms:,.0f} ms ({kinds} ms)",
        ]
        out += [f"  failure: {line}" for line in self.failures[:10]]
        return out


def percentile(values: list[float], q: float) -> float:
    """The q-th percentile (nearest rank) of values; 0 for none."""
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


def _stats(prefix: Path) -> tuple[int, int, float, list[str]]:
    """(requests, errors, p95 of every request, failures) from locust's CSV files."""
    requests = errors = 0
    p95 = 0.0
    with open(f"{prefix}_stats.csv", newline="") as f:
        for row in csv.DictReader(f):
            if row["Name"] == "Aggregated":
                requests, errors = int(row["Request Count"]), int(row["Failure Count"])
                p95 = float(row["95%"] or 0)
    failures: list[str] = []
    failures_csv = Path(f"{prefix}_failures.csv")
    if failures_csv.exists():
        with open(failures_csv, newline="") as f:
            failures = [
                f"{r['Method']} {r['Name']}: {r['Error']} (x{r['Occurrences']})"
                for r in csv.DictReader(f)
            ]
    return requests, errors, p95, failures


def _seed(db: Path) -> list[str]:
    """A few runs to browse from the start (their ids are the /run/<id> pages), off the
    sweep's 0.001 grid, so the sweep skips none of its points as already stored."""
    from engine.landscape.store import Store
    from engine.sim.simulate import run_point

    ratios = (0.3605, 0.3805, 0.4005, 0.4105, 0.4205, 0.4505, 0.5005)
    records = [run_point(TRACE, ratio=r) for r in ratios]
    return Store.open(db).add_runs(records, source="engine", cap=60)


def bench_load(
    users: int = 50,
    runs: int = 1000,
    *,
    spawn_rate: float = 10,
    min_seconds: float = 20,
    workers: int = 2,
    folder: Path | None = None,
) -> LoadResult:
    """Run the benchmark in `folder` (a temporary one by default); see the module doc."""
    from engine.landscape.store import Store

    with contextlib.ExitStack() as stack:
        if folder is None:
            folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="dtr-load-")))
        folder.mkdir(parents=True, exist_ok=True)
        db = folder / "landscape.duckdb"
        run_ids = _seed(db)
        traces = folder / "no-dtr-traces"
        traces.mkdir(exist_ok=True)
        env = serve_env(db, traces)
        served = stack.enter_context(serving(db, env, workers=workers))
        stop_file, prefix = folder / "stop-users", folder / "locust"
        pages_file = folder / "page-views.json"
        users_env = {
            **env,
            "LOAD_TRACE": TRACE,
            "LOAD_RUN_IDS": ",".join(run_ids),
            "LOAD_STOP_FILE": str(stop_file),
            "LOAD_PAGES_FILE": str(pages_file),
        }
        started = time.monotonic()
        with open(folder / "locust.log", "wb") as log:
            locust = subprocess.Popen(
                [sys.executable, "-m", "locust", "-f", str(USERS_FILE), "--headless"]
                + ["--users", str(users), "--spawn-rate", str(spawn_rate)]
                + ["--host", served.base, "--run-time", "2h", "--csv", str(prefix)]
                + ["--only-summary", "--loglevel", "WARNING", "--exit-code-on-error", "0"],
                env=users_env,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
            try:
                sweep_started = time.monotonic()
                sweep = subprocess.run(
                    [sys.executable, "-m", "engine.cli.main", "sweep", TRACE]
                    + ["--grid", sweep_grid(runs), "--workers", "1", "--db", str(db)],
                    env=env,
                    capture_output=True,
                    text=True,
                )
                sweep_seconds = time.monotonic() - sweep_started
                if sweep.returncode != 0:
                    raise RuntimeError(f"the sweep failed: {sweep.stderr.strip()}")
                time.sleep(max(0.0, min_seconds - (time.monotonic() - started)))
                stop_file.touch()
                locust.wait(timeout=300)
            finally:
                if locust.poll() is None:
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(locust.pid, signal.SIGKILL)
                    locust.wait()
        seconds = time.monotonic() - started
        if not Path(f"{prefix}_stats.csv").exists():
            raise RuntimeError(f"locust wrote no statistics: {(folder / 'locust.log').read_text()}")
        requests, errors, p95, failures = _stats(prefix)
        views: dict[str, list[float]] = (
            json.loads(pages_file.read_text()) if pages_file.exists() else {}
        )
        every = [ms for times in views.values() for ms in times]
        return LoadResult(
            users=users,
            runs_written=Store.open(db).stats()["runs"] - len(run_ids),
            sweep_seconds=sweep_seconds,
            seconds=seconds,
            requests=requests,
            errors=errors,
            p95_ms=p95,
            page_views=len(every),
            page_p95_ms=percentile(every, 95),
            page_p95_by_kind_ms={k: percentile(v, 95) for k, v in sorted(views.items())},
            failures=failures,
        )


def main(args: Any) -> int:
    result = bench_load(args.users, args.runs)
    for line in result.lines():
        print(line)
    return 0 if result.errors == 0 and result.runs_written == args.runs else 1
