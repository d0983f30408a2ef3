"""Small helpers shared by tests: running the real CLI in a subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def cli(
    *args: str, env: dict[str, str] | None = None, timeout: float = 600
) -> subprocess.CompletedProcess[str]:
    """Run `dtr-landscape ARGS` as a real process (python -m engine.cli)."""
    full_env = {**os.environ, **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "engine.cli", *args],
        cwd=REPO,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def cli_json(*args: str, env: dict[str, str] | None = None) -> dict:
    done = cli(*args, env=env)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)
