"""Small helpers shared by tests: running the real CLI in a subprocess, and skipping (or,
in CI, failing) when data from outside the repository is missing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import NoReturn

import pytest
from flask.testing import FlaskClient

REPO = Path(__file__).resolve().parent.parent
# CI (.ci/run) is given the DTR traces and the golden records: there, a test that cannot find
# them must fail, not skip, or a broken path would pass CI with those tests unrun.
STRICT_ENV = "DTR_LANDSCAPE_STRICT"


def skip_or_fail(reason: str) -> NoReturn:
    """Skip the test for want of outside data, saying why; fail it under DTR_LANDSCAPE_STRICT=1."""
    if os.environ.get(STRICT_ENV) == "1":
        pytest.fail(f"{reason} ({STRICT_ENV}=1: missing data fails)", pytrace=False)
    pytest.skip(reason)


def cli(
    *args: str, env: dict[str, str] | None = None, timeout: float = 600
) -> subprocess.CompletedProcess[str]:
    """Run `dtr-landscape ARGS` as a real process (python -m engine.cli.main)."""
    full_env = {**os.environ, **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "engine.cli.main", *args],
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


def render_page(client: FlaskClient, pathname: str, search: str = "") -> str:
    """A page's content as the browser gets it: the Dash Pages router callback's answer."""
    client.get("/")  # the router callback is registered on the first request
    payload = {
        "output": ".._pages_content.children..._pages_store.data..",
        "outputs": [
            {"id": "_pages_content", "property": "children"},
            {"id": "_pages_store", "property": "data"},
        ],
        "inputs": [
            {"id": "_pages_location", "property": "pathname", "value": pathname},
            {"id": "_pages_location", "property": "search", "value": search},
        ],
        "changedPropIds": ["_pages_location.pathname"],
        "state": [],
    }
    response = client.post("/_dash-update-component", json=payload)
    assert response.status_code == 200
    return json.dumps(response.get_json()["response"]["_pages_content"])
