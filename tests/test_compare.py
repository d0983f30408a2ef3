"""The compare page's parts without a browser: its bad-input messages, the `diverge` job
through a real runner and engine subprocess, the cache, the what-if job and the builders.
(tests/test_browser.py drives the same page in Chromium.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from flask.testing import FlaskClient

from app import comparisons, data
from app.components.compare import compare_chart, counts_table, divergence_view, retain_buttons
from app.jobs import JobStore
from app.plans import compare_file, plan
from app.server import create_app
from engine.landscape.diverge import ANALYSIS_FORMAT
from engine.landscape.store import Store
from engine.sim.simulate import run_point
from tests.helpers import REPO, render_page
from tests.test_jobs import wait_for

TRACE = "synthetic-mlp"


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict:
    """A store with the shipped trace's hole (ok 0.40, oom 0.41), one run of another trace."""
    db = tmp_path / "landscape.duckdb"
    ids = Store.open(db).add_runs(
        [run_point(TRACE, ratio=r) for r in (0.40, 0.41)], source="engine", cap=60
    )
    record = run_point(TRACE, ratio=0.5)
    (other,) = Store.open(db).add_runs(
        [{**record, "trace": "other-trace", "trace_sha256": "e" * 64}], source="import:x"
    )
    monkeypatch.setenv("DTR_LANDSCAPE_DB", str(db))
    monkeypatch.delenv("DTR_LANDSCAPE_TRACES", raising=False)
    return {"db": db, "ok": ids[0], "oom": ids[1], "other": other}


@pytest.fixture
def client(store: dict) -> FlaskClient:
    return create_app().server.test_client()


@pytest.fixture
def runner(store: dict) -> Iterator[Path]:
    process = subprocess.Popen(
        [sys.executable, "-m", "app.runner", "--db", str(store["db"])],
        cwd=REPO,
        env={**os.environ, "DTR_LANDSCAPE_MAX_JOBS": "1"},
    )
    jobs = JobStore.beside(store["db"])
    deadline = time.monotonic() + 120
    # until its first heartbeat, the page's code would start a runner of its own
    while not jobs.runner_alive() and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    assert process.poll() is None, "the runner exited"
    try:
        yield store["db"]
    finally:
        process.terminate()
        process.wait(timeout=60)


def test_bad_pairs_say_what_is_wrong(client: FlaskClient, store: dict) -> None:
    ok, other = store["ok"], store["other"]
    cases = [
        ("", "Open this page as /compare?a=<run_id>&b=<run_id>"),
        (f"?a={ok}", "Open this page as"),
        (f"?a={ok}&b=nope", "No run with this id (run b) is in the store."),
        (f"?a={ok}&b={ok}", "the same run"),
        (f"?a={ok}&b={other}", "different traces: a is synthetic-mlp, b is other-trace"),
    ]
    for query, message in cases:
        content = render_page(client, "/compare", query)
        assert "Not found" in content
        assert message in content
    assert JobStore.beside(store["db"]).count() == 0  # a page view queues nothing


def test_the_page_shows_both_runs_before_any_analysis(client: FlaskClient, store: dict) -> None:
    content = render_page(client, "/compare", f"?a={store['ok']}&b={store['oom']}")
    for component in ("compare-status", "compare-content", "compare-outcomes", "compare-interval"):
        assert f'"{component}"' in content
    for run_id in (store["ok"], store["oom"]):
        record = data.run(run_id)
        assert record is not None and f"{record['budget']:,} B" in content
    assert JobStore.beside(store["db"]).count() == 0


def test_the_run_page_links_to_comparisons(client: FlaskClient, store: dict) -> None:
    content = render_page(client, f"/run/{store['oom']}")
    assert f"/compare?a={store['ok']}&b={store['oom']}" in content


def test_plan_of_a_diverge_job(store: dict) -> None:
    spec = {"kind": "diverge", "trace": TRACE, "policy": "DTR", "cap": 60.0}
    spec.update(a=store["ok"], b=store["oom"], key="k", total=3)
    the_plan = plan(spec, db=store["db"], commands={"run", "diverge"})
    (step,) = the_plan.steps
    argv = step.argv
    assert argv[argv.index("--runs") + 1 : argv.index("--runs") + 3] == [store["ok"], store["oom"]]
    assert argv[argv.index("--out") + 1] == str(
        compare_file(store["db"], store["ok"], store["oom"])
    )
    assert the_plan.total == 3 and not step.stores


def test_cache_names_are_unambiguous_file_names(tmp_path: Path) -> None:
    db = tmp_path / "landscape.duckdb"
    assert compare_file(db, "abc", "def").name == "abc__def.json"
    odd = [
        compare_file(db, "x_", "_y"),
        compare_file(db, "x__", "y"),
        compare_file(db, "../x", "y"),
    ]
    assert len({p.name for p in odd}) == 3 and all(p.parent == tmp_path / "compare" for p in odd)


def test_diverge_job_then_what_if_job(runner: Path, store: dict) -> None:
    """What the page's callback does, step by step, against a real runner."""
    ok, oom = data.run(store["ok"]), data.run(store["oom"])
    assert ok is not None and oom is not None
    assert not data.has_event_log(ok) and data.read_compare(store["ok"], store["oom"]) is None
    jobs = JobStore.beside(runner)
    job_id = comparisons.submit_diverge(ok, oom)
    job = wait_for(jobs, job_id, lambda j: j.status not in ("queued", "running"), "finished")
    assert job.status == "done", job
    assert (job.done, job.total) == (3, 3)  # two event logs recorded, then the analysis
    analysis = data.read_compare(store["ok"], store["oom"])
    assert analysis is not None and analysis["format"] == ANALYSIS_FORMAT
    assert data.has_event_log(ok) and data.has_event_log(oom)
    # the builders take it as it is
    chart = compare_chart(analysis)
    lines = [t for t in chart.data if t.mode == "lines"]  # pinned and depth of a and b
    assert len(lines) == 4 and {t.legendgroup for t in lines} == {"a", "b"}
    assert [t.x[0] for t in chart.data if t.mode == "markers"] == [oom["operators"]] * 2
    divergence = json.dumps(divergence_view(analysis).to_plotly_json(), default=str)
    assert f"{analysis['divergence']['operator']:,}" in divergence
    assert "from operator" in json.dumps(counts_table(analysis).to_plotly_json(), default=str)
    # the what-if: a stored run at b's budget retaining the divergence victim
    storage = analysis["retain"][0]["storage"]
    assert str(storage) in json.dumps(retain_buttons(analysis, "t").to_plotly_json(), default=str)
    message, queued = comparisons.submit_what_if(analysis, storage, store["ok"], store["oom"])
    assert queued, message
    (what_if_job,) = [j for j in jobs.recent() if j.kind == "run"]
    assert what_if_job.spec["retain"] == str(storage)
    job = wait_for(jobs, what_if_job.id, lambda j: j.status not in ("queued", "running"), "ran")
    assert job.status == "done", job
    stored = data.what_if_run(oom, [storage])
    assert stored is not None and stored["retained"] == [storage]
    columns, active = comparisons.outcome_columns(ok, oom, analysis)
    assert not active
    assert [heading for heading, _ in columns] == ["run a", "run b", f"b retaining {storage}"]
    assert columns[2][1]["run_id"] == stored["run_id"]


def test_a_cache_of_another_format_is_recomputed(store: dict) -> None:
    path = data.compare_path(store["ok"], store["oom"])
    path.parent.mkdir(parents=True)
    runs = {"a": {"run_id": store["ok"]}, "b": {"run_id": store["oom"]}}
    path.write_text(json.dumps({"format": ANALYSIS_FORMAT + 1, "runs": runs}))
    assert data.read_compare(store["ok"], store["oom"]) is None
    path.write_text(json.dumps({"format": ANALYSIS_FORMAT, "runs": runs}))
    assert data.read_compare(store["ok"], store["oom"]) is not None
    assert data.read_compare(store["oom"], store["ok"]) is None  # another pair's file
