"""Building: the machine's prerequisites are named before anything is built, the wheel
carries the C runtime wherever it is built, and the Docker image builds it too.

There is no Docker engine on the development machines, so the Dockerfile is checked by its
shape and the same wheel build runs here (tools/check_build.sh).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from tests.helpers import REPO


def _stages() -> list[list[str]]:
    """The Dockerfile's stages, each as its logical lines (continuations joined)."""
    text = (REPO / "Dockerfile").read_text().replace("\\\n", " ")
    stages: list[list[str]] = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.upper().startswith("FROM "):
            stages.append([])
        stages[-1].append(line)
    return stages


def test_the_docker_image_builds_the_c_runtime_in_a_stage_with_a_compiler() -> None:
    build, final = _stages()[0], _stages()[-1]
    assert len(_stages()) == 2
    assert re.fullmatch(r"FROM python:3\.11-slim AS build", build[0])
    installs = " ".join(line for line in build if "apt-get install" in line)
    assert "gcc" in installs.split() and "libc6-dev" in installs.split()
    assert any("pip wheel" in line for line in build)
    # The image itself: slim, no compiler (Chromium only, for the figure exports), the wheel
    # from the build stage, and a check that refuses an image where the C runtime does not load.
    assert final[0] == "FROM python:3.11-slim"
    final_installs = " ".join(line for line in final if "apt-get install" in line).split()
    assert not {"gcc", "clang", "libc6-dev", "build-essential"} & set(final_installs)
    assert any(line.startswith("COPY --from=build /wheels") for line in final)
    assert any("pip install" in line and "/wheels/" in line for line in final)
    assert any("native.available()" in line for line in final)
    # the published report, for /published: copied in and named where the app looks
    [copied] = [line for line in final if "docs/landscapes.json" in line]
    report = copied.split()[-1]
    assert copied.startswith("COPY --from=build /src/docs/landscapes.json ")
    assert any(
        line.startswith("ENV ") and f"DTR_LANDSCAPE_REPORT={report}" in line for line in final
    )


def _prerequisites(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["sh", str(REPO / "tools" / "prerequisites.sh"), *args],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
    )


def test_prerequisites_pass_on_this_machine() -> None:
    done = _prerequisites(sys.executable)
    assert (done.returncode, done.stderr) == (0, "")


def test_prerequisites_name_each_missing_thing_on_one_line() -> None:
    no_python = _prerequisites("/nonexistent/python3.11")
    assert no_python.returncode == 1
    assert no_python.stderr.splitlines() == [
        "missing: /nonexistent/python3.11 (Python 3.11-3.13); install it, or pick another: "
        "make PYTHON=python3.12 ..."
    ]
    no_compiler = _prerequisites(sys.executable, CC="/nonexistent/gcc")
    assert no_compiler.returncode == 1
    assert no_compiler.stderr.splitlines() == [
        "missing: a C compiler (/nonexistent/gcc), to build the C runtime: apt-get install gcc"
    ]


@pytest.mark.slow
def test_a_fresh_wheel_carries_the_c_runtime() -> None:
    done = subprocess.run(
        ["sh", str(REPO / "tools" / "check_build.sh"), sys.executable],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "wheel holds engine/sim/_native/core." in done.stdout
    assert "installed: runtime: native C" in done.stdout
