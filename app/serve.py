"""Serve the dashboard (what `dtr-landscape serve` runs): gunicorn and the job runner, as two
child processes.

gunicorn imports `app.wsgi` in each worker after the fork (no --preload), so no DuckDB
connection ever crosses a fork. The runner (app/runner.py) starts engine subprocesses for
queued jobs and, with --seed, queues a quick sweep of every trace when the store is empty, in
the background: the first page never waits for it. Both read DTR_LANDSCAPE_DB and
DTR_LANDSCAPE_TRACES from the environment `dtr-landscape serve --db --traces` sets.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
from types import FrameType

from app import settings

# Signals passed on to the children, so `docker stop` or a kill of this process stops them.
FORWARDED_SIGNALS = (signal.SIGINT, signal.SIGTERM)
RUNNER_STOP_TIMEOUT_S = 15


def gunicorn_command(host: str, port: int, workers: int) -> list[str]:
    """The gunicorn command line for `app.wsgi:server`."""
    return [
        sys.executable,
        "-m",
        "gunicorn",
        "--bind",
        f"{host}:{port}",
        "--workers",
        str(workers),
        # a PDF export renders in its request (app/figures.py, bounded at 60 s): more than
        # gunicorn's default 30 s, so a slow rendering is answered, not its worker killed
        "--timeout",
        "90",
        "app.wsgi:server",
    ]


def runner_command(seed: bool = True) -> list[str]:
    """The job runner's command line (the store from DTR_LANDSCAPE_DB)."""
    return [sys.executable, "-m", "app.runner", *(["--seed"] if seed else [])]


def serve(host: str = "127.0.0.1", port: int = 8050, workers: int = 2, seed: bool = True) -> int:
    """Run gunicorn and the runner until gunicorn exits; returns gunicorn's exit code.
    A mistyped setting (app/settings.py) is a ValueError before anything starts."""
    settings.check()
    runner = subprocess.Popen(runner_command(seed))
    web = subprocess.Popen(gunicorn_command(host, port, workers))
    children = (web, runner)
    previous = {}
    if threading.current_thread() is threading.main_thread():

        def forward(signum: int, _frame: FrameType | None) -> None:
            for child in children:
                if child.poll() is None:
                    child.send_signal(signum)

        previous = {signum: signal.signal(signum, forward) for signum in FORWARDED_SIGNALS}
    try:
        return web.wait()
    finally:
        if runner.poll() is None:
            runner.terminate()  # the runner stops its engine subprocesses on SIGTERM
        try:
            runner.wait(timeout=RUNNER_STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            runner.kill()
            runner.wait()
        for signum, handler in previous.items():
            signal.signal(signum, handler)
