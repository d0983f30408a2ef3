"""Serve the dashboard with gunicorn, in a child process (what `dtr-landscape serve` runs)."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
from types import FrameType

# Signals passed on to gunicorn, so `docker stop` or a kill of this process stops it too.
FORWARDED_SIGNALS = (signal.SIGINT, signal.SIGTERM)


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
        "app.wsgi:server",
    ]


def serve(host: str = "127.0.0.1", port: int = 8050, workers: int = 2) -> int:
    """Run gunicorn until it exits and return its exit code."""
    process = subprocess.Popen(gunicorn_command(host, port, workers))
    if threading.current_thread() is not threading.main_thread():
        return process.wait()  # signal handlers can only be set in the main thread

    def forward(signum: int, _frame: FrameType | None) -> None:
        process.send_signal(signum)

    previous = {signum: signal.signal(signum, forward) for signum in FORWARDED_SIGNALS}
    try:
        return process.wait()
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
