"""Launching and cancelling: the optional access token (app/access.py) and the limit on
waiting jobs (app/jobs.py), in process over a real store and jobs table. The same through a
real browser is in tests/test_browser.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app import settings
from app.access import TOKEN_ENV, token_problem
from app.jobs import MAX_QUEUED_ENV, JobStore, QueueFull, max_queued
from app.server import create_app
from engine.landscape.store import Store
from engine.sim.simulate import run_point
from tests.helpers import cli

SPEC = {"kind": "run", "trace": "synthetic-mlp", "policy": "DTR", "cap": 60.0, "ratio": 0.5}
FORM = {"trace": "synthetic-mlp", "mode": "ratio", "value": "0.45", "policy": "DTR"}


def test_no_token_set_means_open(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(TOKEN_ENV, raising=False)
    assert token_problem(None) is None and token_problem("anything") is None


def test_token_is_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(TOKEN_ENV, "s3cret-\u00e9")
    assert "needs its access token" in (token_problem(None) or "")
    assert "needs its access token" in (token_problem("") or "")
    assert token_problem("s3cret") == "Wrong access token."
    assert token_problem("s3cret-\u00e9x") == "Wrong access token."
    assert token_problem("s3cret-\u00e9") is None


def test_queue_limit_counts_waiting_jobs_only(tmp_path: Path) -> None:
    jobs = JobStore.beside(tmp_path / "landscape.duckdb")
    first = jobs.submit(SPEC, "a", max_queued=2)
    jobs.submit(SPEC, "b", max_queued=2)
    with pytest.raises(QueueFull) as refused:
        jobs.submit(SPEC, "c", max_queued=2)
    assert str(refused.value) == "2 jobs are already waiting (limit 2); wait or cancel one."
    assert jobs.count() == 2
    assert jobs.start(first, 1)  # a running job no longer waits
    jobs.submit(SPEC, "c", max_queued=2)
    assert jobs.count() == 3
    jobs.submit(SPEC, "seed", max_queued=None)  # the runner's seeding has no limit
    assert jobs.count() == 4


def test_max_queued_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(MAX_QUEUED_ENV, raising=False)
    assert max_queued() == 20
    monkeypatch.setenv(MAX_QUEUED_ENV, "3")
    assert max_queued() == 3
    monkeypatch.setenv(MAX_QUEUED_ENV, "many")
    assert max_queued() == 20  # lenient at run time: a page never fails on it
    monkeypatch.setenv(MAX_QUEUED_ENV, "0")
    assert max_queued() == 1
    with pytest.raises(ValueError, match="DTR_LANDSCAPE_MAX_QUEUED must be a whole number"):
        settings.check()  # what `serve` does first


@pytest.mark.parametrize(
    ("name", "value", "expected"),
    [
        ("DTR_LANDSCAPE_MAX_JOBS", "two", "at least 1"),
        ("DTR_LANDSCAPE_MAX_QUEUED", "-3", "at least 1"),
        ("DTR_LANDSCAPE_DEFER_CARDS_ABOVE", "20k", "at least 0"),
        ("DTR_LANDSCAPE_SWEEP_WORKERS", "0", "at least 1"),
        ("DTR_LANDSCAPE_ASK_AGAIN_S", "1.5", "at least 1"),
    ],
)
def test_serve_refuses_a_mistyped_setting(name: str, value: str, expected: str) -> None:
    # a real `dtr-landscape serve`: it names the setting and the value, and starts nothing
    done = cli("serve", "--port", "1", env={name: value}, timeout=120)
    assert done.returncode == 2
    assert f"dtr-landscape: error: {name} must be a whole number of {expected}" in done.stderr
    assert repr(value) in done.stderr and "Traceback" not in done.stderr
    assert "gunicorn" not in done.stderr.lower() and done.stdout == ""


@pytest.fixture
def page_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> JobStore:
    """A store with runs, its jobs table, a token and a limit of two waiting jobs; the app
    built (the pages register then). No runner: queued jobs stay queued."""
    db = tmp_path / "landscape.duckdb"
    Store.open(db).add_runs([run_point("synthetic-mlp", ratio=0.5)], source="engine", cap=60)
    monkeypatch.setenv("DTR_LANDSCAPE_DB", str(db))
    monkeypatch.delenv("DTR_LANDSCAPE_TRACES", raising=False)
    monkeypatch.setenv(TOKEN_ENV, "letmein")
    monkeypatch.setenv(MAX_QUEUED_ENV, "2")
    create_app()
    return JobStore.beside(db)


def _text(component: object) -> str:
    return json.dumps(component.to_plotly_json(), default=str)  # type: ignore[attr-defined]


@pytest.mark.parametrize(("token", "words"), [(None, "needs its access token"), ("x", "Wrong")])
def test_launch_without_the_token_launches_nothing(
    page_env: JobStore, token: str | None, words: str
) -> None:
    from app.job_actions import submit

    shown = _text(submit(FORM, token))
    assert words in shown and "Nothing was launched." in shown and '"error"' in shown
    assert page_env.count() == 0


def test_launch_beyond_the_queue_limit_is_refused(page_env: JobStore) -> None:
    from app.job_actions import submit

    page_env.submit(SPEC, "waiting 1")
    page_env.submit(SPEC, "waiting 2")
    shown = _text(submit(FORM, "letmein"))
    assert "2 jobs are already waiting (limit 2); wait or cancel one." in shown
    assert page_env.count() == 2


def test_the_token_field_is_shown_only_when_a_token_is_set() -> None:
    from app.components.launch_form import token_field

    field = token_field("t", required=True)
    assert not field.hidden and field.children[1].type == "password"  # type: ignore[index]
    assert token_field("t", required=False).hidden


def _run_page(
    page_env: JobStore, clicked: str, token: str | None, retain: str | None = None
) -> str:
    """The run page's answer to a click on `clicked` (its rerun buttons, or recording the
    event log), through the app's own request handling, as the browser sends it."""
    from tests.helpers import post_callback

    client = create_app().server.test_client()
    store = Store.open(page_env.path.with_name("landscape.duckdb"))  # page_env's
    (run_id,) = [r["run_id"] for r in store.rows("SELECT run_id FROM runs")]
    if clicked == "run-record-events":
        response = post_callback(
            client,
            [("run-events", "children"), ("run-events-interval", "disabled")]
            + [("run-record-events", "hidden")],
            [("run-events-interval", "n_intervals", None), ("run-record-events", "n_clicks", 1)],
            [("run-id", "data", run_id), ("run-token", "value", token)],
            changed=["run-record-events.n_clicks"],
        )
    else:
        response = post_callback(
            client,
            [("run-message", "children")],
            [(button, "n_clicks", 1 if button == clicked else None) for button in RERUNS],
            [("run-retain", "value", retain), ("run-id", "data", run_id)]
            + [("run-token", "value", token)],
            changed=[f"{clicked}.n_clicks"],
            pattern="run-message.children",
        )
    assert response.status_code == 200, response.get_data(as_text=True)
    return json.dumps(response.get_json()["response"])


RERUNS = ("run-rerun", "run-rerun-retain")


@pytest.mark.parametrize("clicked", [*RERUNS, "run-record-events"])
@pytest.mark.parametrize(("token", "words"), [(None, "needs its access token"), ("x", "Wrong")])
def test_a_run_pages_launches_need_the_token(
    page_env: JobStore, clicked: str, token: str | None, words: str
) -> None:
    shown = _run_page(page_env, clicked, token, retain="1")
    assert words in shown and "Nothing was launched." in shown and '"error"' in shown
    assert '"role": "alert"' in shown and page_env.count() == 0


@pytest.mark.parametrize("clicked", [*RERUNS, "run-record-events"])
def test_a_run_pages_launches_beyond_the_queue_limit_are_refused(
    page_env: JobStore, clicked: str
) -> None:
    page_env.submit(SPEC, "waiting 1")
    page_env.submit(SPEC, "waiting 2")
    shown = _run_page(page_env, clicked, "letmein", retain="1")
    refused = "2 jobs are already waiting (limit 2); wait or cancel one. Nothing was launched."
    assert refused in shown
    assert page_env.count() == 2


def test_a_run_pages_retention_needs_storage_ids(page_env: JobStore) -> None:
    shown = _run_page(page_env, "run-rerun-retain", "letmein", retain="")
    assert "Enter the storage ids to retain." in shown and page_env.count() == 0
    shown = _run_page(page_env, "run-rerun-retain", "letmein", retain="1, x")
    assert "Storage ids are whole numbers like 3131,932; got 'x'." in shown
    assert '"error"' in shown and page_env.count() == 0


def test_a_run_pages_rerun_with_the_token_is_queued(page_env: JobStore) -> None:
    shown = _run_page(page_env, "run-rerun-retain", "letmein", retain=" 12, 3")
    assert "Queued job #1: rerun at " in shown and " retaining 12,3. Follow it on " in shown
    (job,) = page_env.recent("synthetic-mlp", limit=5)
    assert job.spec["kind"] == "run" and job.spec["retain"] == "12,3"
