"""Shared fixtures. Tests that need data from outside the repository skip, saying why; under
DTR_LANDSCAPE_STRICT=1 (CI sets it) missing DTR traces or golden records fail them instead."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.helpers import skip_or_fail

TRACES_MISSING = (
    "DTR traces not available: set DTR_LANDSCAPE_TRACES to the folder of the DTR logs "
    "(simrd/logs.zip of uwsampl/dtr-prototype)"
)
SIMRD_MISSING = (
    "unmodified simrd not available: set SIMRD_DIR to the simrd/ folder of a "
    "uwsampl/dtr-prototype checkout"
)


def _env_dir(name: str) -> Path | None:
    value = os.environ.get(name)
    if not value:
        return None
    path = Path(value)
    return path if path.is_dir() else None


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session")
def traces_dir() -> Path:
    """The folder of the DTR logs (DTR_LANDSCAPE_TRACES)."""
    path = _env_dir("DTR_LANDSCAPE_TRACES")
    if path is None:
        given = os.environ.get("DTR_LANDSCAPE_TRACES")
        skip_or_fail(
            f"{TRACES_MISSING} (it is {given!r}, not a folder)" if given else TRACES_MISSING
        )
    return path


@pytest.fixture(scope="session")
def simrd_dir() -> Path:
    """The simrd/ folder of an unmodified uwsampl/dtr-prototype checkout (SIMRD_DIR). CI has
    none, so these tests skip even under DTR_LANDSCAPE_STRICT."""
    path = _env_dir("SIMRD_DIR")
    if path is None:
        pytest.skip(SIMRD_MISSING)
    return path
