"""Under DTR_LANDSCAPE_STRICT=1 (set by .ci/run) a test whose DTR traces are missing fails with
the reason; without it, it skips with the reason. simrd tests skip either way (CI has none).

Each case runs pytest on one real test of this suite in a subprocess, with the environment
that case describes.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import SIMRD_MISSING, TRACES_MISSING
from tests.helpers import REPO, STRICT_ENV

NEEDS_TRACES = "tests/test_native.py::test_shared_searches_equal_plain_ones"
NEEDS_SIMRD = "tests/test_reference.py"


def _pytest(target: str, **env: str) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if k not in (STRICT_ENV, "SIMRD_DIR")}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", target],
        cwd=REPO,
        env={**full, **env},
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_missing_traces_skip_without_the_switch(tmp_path: Path) -> None:
    done = _pytest(NEEDS_TRACES, DTR_LANDSCAPE_TRACES=str(tmp_path / "nowhere"))
    assert done.returncode == 0, done.stdout
    assert "1 skipped" in done.stdout and TRACES_MISSING in done.stdout


def test_missing_traces_fail_under_the_switch(tmp_path: Path) -> None:
    done = _pytest(
        NEEDS_TRACES, DTR_LANDSCAPE_TRACES=str(tmp_path / "nowhere"), **{STRICT_ENV: "1"}
    )
    assert done.returncode == 1, done.stdout
    assert "skipped" not in done.stdout
    assert TRACES_MISSING in done.stdout and f"{STRICT_ENV}=1" in done.stdout
    assert "nowhere" in done.stdout  # says which folder it looked for


def test_simrd_tests_still_skip_under_the_switch() -> None:
    done = _pytest(NEEDS_SIMRD, **{STRICT_ENV: "1"})
    assert done.returncode == 0, done.stdout
    assert "failed" not in done.stdout and "error" not in done.stdout
    assert "skipped" in done.stdout and SIMRD_MISSING in done.stdout
