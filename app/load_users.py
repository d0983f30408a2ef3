"""The users of the dashboard load benchmark (app/load_bench.py), a locustfile:

    python -m locust -f app/load_users.py --headless --host http://127.0.0.1:PORT ...

Each user browses as a browser does: a page's HTML shell, its layout and dependencies, then
the Dash Pages router callback that builds the page's content (where the store is read);
and, while on a page, the callbacks its intervals fire (the overview's strips, the trace
page's views and jobs panel). Any status other than 2xx, or a callback answer that is not
JSON, is an error. The time of each whole page view (the sum of its four requests) is kept
apart from locust's per-request statistics and written at the end as JSON.

Settings come from the environment: LOAD_TRACE (default synthetic-mlp), LOAD_RUN_IDS (run
ids to open, comma-separated), LOAD_STOP_FILE (the run stops once that file exists) and
LOAD_PAGES_FILE (where the page view times go: {page: [milliseconds, ...]}).
"""

from __future__ import annotations

import json
import os
import random
import time
from pathlib import Path
from typing import Any

import gevent
from locust import HttpUser, between, events, task
from locust.env import Environment

TRACE = os.environ.get("LOAD_TRACE") or "synthetic-mlp"
RUN_IDS = [r for r in (os.environ.get("LOAD_RUN_IDS") or "").split(",") if r]
STOP_FILE = os.environ.get("LOAD_STOP_FILE")
PAGES_FILE = os.environ.get("LOAD_PAGES_FILE")
CALLBACK = "/_dash-update-component"
page_views: dict[str, list[float]] = {}  # page -> milliseconds of each complete view


@events.quitting.add_listener
def _write_page_views(**_kwargs: Any) -> None:
    if PAGES_FILE:
        Path(PAGES_FILE).write_text(json.dumps(page_views))


@events.init.add_listener
def _stop_when_told(environment: Environment, **_kwargs: Any) -> None:
    """Quit (and write the statistics) once the benchmark creates the stop file."""
    if not STOP_FILE:
        return

    def watch() -> None:
        while not Path(STOP_FILE).exists():
            gevent.sleep(0.5)
        if environment.runner is not None:
            environment.runner.quit()

    gevent.spawn(watch)


def _outputs(*pairs: tuple[str, str]) -> dict[str, Any]:
    """Dash's `output` string and list for one or several (id, property) outputs."""
    specs = [{"id": i, "property": p} for i, p in pairs]
    if len(pairs) == 1:  # a single output is sent as itself, not as a list of one
        return {"output": f"{pairs[0][0]}.{pairs[0][1]}", "outputs": specs[0]}
    return {"output": ".." + "...".join(f"{i}.{p}" for i, p in pairs) + "..", "outputs": specs}


def _declared(dependencies: list[dict[str, Any]], first: str) -> dict[str, Any] | None:
    """The `output`/`outputs` of the served callback whose first output is `first` (an
    `id.property`), as the page's JavaScript sends them: read from /_dash-dependencies, so a
    callback that gains an output is still called the way a browser calls it."""
    for dependency in dependencies:
        declared = str(dependency.get("output", ""))
        names = declared.strip(".").split("...") if declared.startswith("..") else [declared]
        if names and names[0] == first:
            pairs = [name.rsplit(".", 1) for name in names]
            return _outputs(*((component, prop) for component, prop in pairs))
    return None


def _router(pathname: str) -> dict[str, Any]:
    return {
        **_outputs(("_pages_content", "children"), ("_pages_store", "data")),
        "inputs": [
            {"id": "_pages_location", "property": "pathname", "value": pathname},
            {"id": "_pages_location", "property": "search", "value": ""},
        ],
        "changedPropIds": ["_pages_location.pathname"],
        "state": [],
    }


def _overview_refresh() -> dict[str, Any]:
    return {
        **_outputs(("home-strips", "children"), ("home-fingerprint", "data")),
        "inputs": [
            {"id": "home-policy", "property": "value", "value": "DTR"},
            {"id": "home-interval", "property": "n_intervals", "value": 1},
        ],
        "changedPropIds": ["home-interval.n_intervals"],
        "state": [{"id": "home-fingerprint", "property": "data", "value": "stale"}],
    }


def _trace_refresh() -> dict[str, Any]:
    return {
        **_outputs(
            ("trace-strip", "figure"),
            ("trace-pinned", "figure"),
            ("trace-overhead", "figure"),
            ("trace-holes-box", "children"),
            ("trace-summary", "children"),
            ("trace-exports", "children"),
            ("trace-fingerprint", "data"),
            ("trace-interval", "interval"),
            ("trace-interval", "max_intervals"),
            ("trace-ask-again", "disabled"),
        ),
        "inputs": [
            {"id": "trace-interval", "property": "n_intervals", "value": 1},
            {"id": "trace-ask-again", "property": "n_intervals", "value": None},
            {"id": "trace-policy", "property": "value", "value": "DTR"},
            {"id": "trace-depth-mode", "property": "value", "value": "depth_at_peak_pinned"},
        ],
        "changedPropIds": ["trace-interval.n_intervals"],
        "state": [
            {"id": "trace-fingerprint", "property": "data", "value": "stale"},
            {"id": "trace-name", "property": "data", "value": TRACE},
        ],
    }


def _jobs_refresh() -> dict[str, Any]:
    return {
        **_outputs(("trace-jobs", "children")),
        "inputs": [
            {"id": "trace-jobs-interval", "property": "n_intervals", "value": 1},
            {"id": "trace-launch-message", "property": "children", "value": None},
            {"id": "trace-cancel-message", "property": "children", "value": None},
        ],
        "changedPropIds": ["trace-jobs-interval.n_intervals"],
        "state": [{"id": "trace-name", "property": "data", "value": TRACE}],
    }


class Browsing(HttpUser):
    wait_time = between(0.5, 2.0)

    dependencies: list[dict[str, Any]] | None = None

    def _get(self, path: str, name: str) -> bool:
        with self.client.get(path, name=name, catch_response=True) as response:
            if response.status_code != 200:
                response.failure(f"status {response.status_code}")
                return False
            if path == "/_dash-dependencies" and self.dependencies is None:
                try:
                    self.dependencies = response.json()
                except ValueError:
                    response.failure("not JSON")
                    return False
            return True

    def _callback(self, payload: dict[str, Any], name: str) -> bool:
        first = payload["output"].strip(".").split("...")[0]
        declared = _declared(self.dependencies or [], first)
        if declared is not None:
            payload = {**payload, **declared}
        with self.client.post(CALLBACK, json=payload, name=name, catch_response=True) as response:
            if response.status_code == 204:  # PreventUpdate: nothing changed, a valid answer
                return True
            if response.status_code != 200:
                response.failure(f"status {response.status_code}")
                return False
            try:
                response.json()
            except ValueError:
                response.failure("not JSON")
                return False
            return True

    def _view(self, path: str, name: str) -> None:
        """One page view as a browser makes it; its time is kept when every request of it
        succeeded (a failed one is counted as that request's error)."""
        start = time.perf_counter()
        ok = (
            self._get(path, f"GET {name}")
            and self._get("/_dash-layout", "GET /_dash-layout")
            and self._get("/_dash-dependencies", "GET /_dash-dependencies")
            and self._callback(_router(path), f"router {name}")
        )
        if ok:
            page_views.setdefault(name, []).append((time.perf_counter() - start) * 1000)

    @task(3)
    def overview(self) -> None:
        self._view("/", "/")
        self._callback(_overview_refresh(), "callback overview strips")

    @task(3)
    def trace(self) -> None:
        self._view(f"/trace/{TRACE}", "/trace/<name>")
        self._callback(_trace_refresh(), "callback trace views")
        self._callback(_jobs_refresh(), "callback trace jobs")

    @task(2)
    def run_page(self) -> None:
        if RUN_IDS:
            self._view(f"/run/{random.choice(RUN_IDS)}", "/run/<run_id>")
