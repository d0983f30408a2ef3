"""The dashboard's render times, measured in the browser (`dtr-landscape bench-dashboard`).

A temporary store is filled with 10,000 runs; a real `dtr-landscape serve` (gunicorn and the
job runner) serves it; Debian's Chromium, driven by Playwright, opens the overview and a run
detail. The time reported is the page's own clock (`performance.now()`, milliseconds since
navigation started) at the moment the content is drawn: every graph of the overview has been
plotted, the run detail shows its metrics table.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
REPO = Path(__file__).resolve().parent.parent
TRACE = "synthetic-mlp"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _seed(db: Path, runs: int) -> str:
    """`runs` stored runs of the shipped trace over a fine grid of budgets; returns one id."""
    from engine.landscape.store import Store
    from engine.sim.simulate import run_point

    store = Store.open(db)
    base = [run_point(TRACE, ratio=round(0.30 + 0.01 * i, 2)) for i in range(50)]
    records = []
    for i in range(runs):
        record = dict(base[i % len(base)])
        record["budget"] += i // len(base)  # distinct budgets, same executions
        records.append(record)
    ids = store.add_runs(records, source="engine", cap=60)
    store.compact()
    return ids[0]


def bench_dashboard(runs: int = 10_000) -> list[str]:
    if not CHROMIUM.exists():
        return ["dashboard render: needs Debian's chromium at /usr/bin/chromium"]
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        db = folder / "landscape.duckdb"
        run_id = _seed(db, runs)
        (folder / "no-dtr-traces").mkdir()
        port = free_port()
        env = {
            **os.environ,
            "DTR_LANDSCAPE_DB": str(db),
            "DTR_LANDSCAPE_TRACES": str(folder / "no-dtr-traces"),
        }
        server = subprocess.Popen(
            [sys.executable, "-m", "engine.cli.main", "serve", "--port", str(port)],
            cwd=REPO,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        base = f"http://127.0.0.1:{port}"
        try:
            _wait_for(base)
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
                page = browser.new_page(viewport={"width": 1440, "height": 900})
                # Warm-up: the first request of each worker loads Dash's bundles.
                page.goto(base + "/")
                page.wait_for_function(PLOTTED, timeout=120_000)
                overview = _render_ms(page, base + "/", PLOTTED)
                detail = _render_ms(page, base + f"/run/{run_id}", METRICS_SHOWN)
                browser.close()
        finally:
            os.killpg(server.pid, signal.SIGTERM)
            server.wait(timeout=60)
    return [
        f"dashboard, overview with {runs:,} stored runs: first render in {overview:,.0f} ms",
        f"dashboard, run detail: rendered in {detail:,.0f} ms",
    ]


def _wait_for(base: str) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(base + "/", timeout=5) as response:
                if response.status == 200:
                    return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError("the dashboard did not start")


# Plotly sets `_fullData` on a graph once it has drawn it (SVG or WebGL alike).
PLOTTED = (
    "() => { const g = document.querySelectorAll('.js-plotly-plot'); "
    "return g.length > 0 && [...g].every(p => p._fullData && p._fullData.length > 0); }"
)
METRICS_SHOWN = "() => !!document.querySelector('table.metrics')"


def _render_ms(page: object, url: str, ready: str) -> float:
    page.goto(url)  # type: ignore[attr-defined]
    page.wait_for_function(ready, timeout=120_000)  # type: ignore[attr-defined]
    return float(page.evaluate("performance.now()"))  # type: ignore[attr-defined]
