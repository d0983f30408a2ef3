"""The dashboard answers real requests through Dash and Flask (in-process test client), over
a real DuckDB store and jobs table in a temporary folder."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from flask.testing import FlaskClient
from werkzeug.test import TestResponse

from app.jobs import JobStore
from app.server import create_app
from engine.landscape.store import Store
from engine.sim.simulate import run_point
from tests.helpers import pattern_outputs, post_callback, render_page, spoil_runs, unspoil


@pytest.fixture(scope="module")
def seeded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    """A store with a few synthetic-mlp runs (one imported) around its hole."""
    db = tmp_path_factory.mktemp("store") / "landscape.duckdb"
    store = Store.open(db)
    records = [run_point("synthetic-mlp", ratio=r) for r in (0.39, 0.40, 0.41, 0.43)]
    ids = store.add_runs(records[:3], source="engine", cap=60)
    ids += store.add_runs(records[3:], source="import:simrd", cap=60)
    # a trace only the store knows (imported records): its page shows, nothing can run it
    store.add_runs([{**records[0], "trace": "imported-mlp"}], source="import:demo", cap=60)
    return db, ids


@pytest.fixture
def client(seeded: tuple[Path, list[str]], monkeypatch: pytest.MonkeyPatch) -> FlaskClient:
    monkeypatch.setenv("DTR_LANDSCAPE_DB", str(seeded[0]))
    monkeypatch.delenv("DTR_LANDSCAPE_TRACES", raising=False)
    return create_app().server.test_client()


def test_index_and_layout_are_served(client: FlaskClient) -> None:
    assert "DTR landscape" in client.get("/").get_data(as_text=True)
    response = client.get("/_dash-layout")
    assert response.status_code == 200 and "DTR landscape" in json.dumps(response.get_json())


def test_overview_has_a_strip_per_trace_and_ignores_stray_query(client: FlaskClient) -> None:
    content = render_page(client, "/", "?stray=1")
    assert '"trace": "synthetic-mlp"' in content and '"type": "home-strip"' in content
    assert "first success" in content and "0.4000" in content
    assert "set DTR_LANDSCAPE_TRACES" in content  # no DTR traces: says how to get them


def test_overview_lists_dtr_traces_without_runs(
    client: FlaskClient, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "resnet32-56-9000000000.0-2020-10-1-13-3-30-default.log").write_text("")
    monkeypatch.setenv("DTR_LANDSCAPE_TRACES", str(tmp_path))
    content = render_page(client, "/")
    assert "No runs under DTR yet" in content and "/trace/resnet32-56" in content
    assert "set DTR_LANDSCAPE_TRACES" not in content


def test_trace_page(client: FlaskClient) -> None:
    content = render_page(client, "/trace/synthetic-mlp")
    for component in (
        "trace-strip",
        "trace-pinned",
        "trace-overhead",
        "trace-holes",
        "trace-launch-button",
        "trace-jobs",
    ):
        assert f'"{component}"' in content


def test_run_page(client: FlaskClient, seeded: tuple[Path, list[str]]) -> None:
    run_id = seeded[1][2]  # the oom at 0.41
    content = render_page(client, f"/run/{run_id}")
    assert "Failure snapshot" in content and "over budget by" in content
    assert "Record the event log" in content and "nearest budget below" in content
    record = Store.open(seeded[0]).run(run_id)
    assert record is not None and f"{record['budget']:,} B" in content


@pytest.mark.parametrize(
    ("path", "what"),
    [("/run/nope", "run 'nope'"), ("/trace/nope", "trace 'nope'"), ("/no/such/page", "this page")],
)
def test_not_found(client: FlaskClient, path: str, what: str) -> None:
    content = render_page(client, path)
    assert f"Not found: {what}" in content


def test_pages_do_not_create_jobs(client: FlaskClient, seeded: tuple[Path, list[str]]) -> None:
    for path in ("/", "/trace/synthetic-mlp", f"/run/{seeded[1][0]}"):
        render_page(client, path)
    assert JobStore.beside(seeded[0]).count() == 0


def test_launching_needs_a_trace_of_the_engines_catalog(
    client: FlaskClient, seeded: tuple[Path, list[str]]
) -> None:
    from app.job_actions import submit

    assert '"trace": "imported-mlp"' in render_page(client, "/")  # the store knows it
    form = {"trace": "imported-mlp", "mode": "ratio", "value": "0.5", "policy": "DTR"}
    shown = json.dumps(submit(form).to_plotly_json(), default=str)
    assert "not in the engine's catalog" in shown and "nothing was launched" in shown
    assert JobStore.beside(seeded[0]).count() == 0


def _deferring(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, runs: int
) -> tuple[Path, FlaskClient]:
    """A store of `runs` synthetic-mlp runs and the app over it, deferring what has more than
    `runs` - 1 (DTR_LANDSCAPE_DEFER_CARDS_ABOVE): the store's runs are one too many."""
    db = tmp_path / "landscape.duckdb"
    records = [run_point("synthetic-mlp", ratio=0.36 + 0.005 * i) for i in range(runs)]
    Store.open(db).add_runs(records, source="engine", cap=60)
    monkeypatch.setenv("DTR_LANDSCAPE_DB", str(db))
    monkeypatch.delenv("DTR_LANDSCAPE_TRACES", raising=False)
    monkeypatch.setenv("DTR_LANDSCAPE_DEFER_CARDS_ABOVE", str(runs - 1))
    return db, create_app().server.test_client()


def _fill_card(client: FlaskClient, trace: str, policy: str) -> TestResponse:
    """The deferred card's own request, as the browser sends it for the pattern ids."""
    return post_callback(
        client,
        [
            ({"trace": trace, "type": "home-card"}, "children"),
            ({"trace": trace, "type": "home-card-ask-again"}, "disabled"),
        ],
        [
            (
                {"trace": trace, "type": "home-card-request"},
                "data",
                {"trace": trace, "policy": policy},
            ),
            ({"trace": trace, "type": "home-card-ask-again"}, "n_intervals", None),
        ],
        pattern=pattern_outputs(
            ({"trace": "MATCH", "type": "home-card"}, "children"),
            ({"trace": "MATCH", "type": "home-card-ask-again"}, "disabled"),
        ),
    )


def test_a_card_of_many_runs_comes_after_the_page(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Past DTR_LANDSCAPE_DEFER_CARDS_ABOVE runs a card not built yet is a place on the page
    # that its own request fills; the page itself reads no run.
    db, client = _deferring(tmp_path, monkeypatch, runs=13)
    content = render_page(client, "/")
    assert "Reading its 13 runs under DTR" in content and '"home-card-request"' in content
    assert '"home-strip"' not in content and "first success" not in content
    response = _fill_card(client, "synthetic-mlp", "DTR")
    assert response.status_code == 200, response.get_data(as_text=True)
    answer = response.get_json()["response"]
    filled = json.dumps(answer)
    assert '"type": "home-strip"' in filled and "first success" in filled
    # until the answer, the card's place asks again every DTR_LANDSCAPE_ASK_AGAIN_S seconds
    # (past gunicorn's timeout, after which a request is lost); answered, no more
    assert '"type": "home-card-ask-again"' in content and '"interval": 120000' in content
    assert answer['{"trace":"synthetic-mlp","type":"home-card-ask-again"}'] == {"disabled": True}
    # built once, the card is on the page itself the next time
    content = render_page(client, "/")
    assert '"type": "home-strip"' in content and "Reading its" not in content
    # the request names a trace and a policy the dashboard knows, or nothing is built
    for trace, policy in (("no-such-trace", "DTR"), ("synthetic-mlp", "NoSuchPolicy")):
        assert _fill_card(client, trace, policy).status_code == 204  # PreventUpdate
    # up to the limit a card is built with the page, as before
    Store.open(db).add_runs([run_point("synthetic-mlp", ratio=0.6)], source="engine", cap=60)
    monkeypatch.setenv("DTR_LANDSCAPE_DEFER_CARDS_ABOVE", "14")
    content = render_page(client, "/")
    assert '"type": "home-strip"' in content and "Reading its" not in content


def test_an_overview_card_whose_runs_cannot_be_read_says_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # (21 runs: a count no other test's card was built at, in this process's card cache)
    db, client = _deferring(tmp_path, monkeypatch, runs=21)
    assert "Reading its 21 runs under DTR" in render_page(client, "/")
    written = spoil_runs(db)
    response = _fill_card(client, "synthetic-mlp", "DTR")
    assert response.status_code == 200, response.get_data(as_text=True)
    said = json.dumps(response.get_json()["response"])
    assert "Could not read its runs under DTR: " in said and "runs-" in said  # the file
    assert "builds it again when runs are added, or when reloaded" in said
    assert '"type": "home-strip"' not in said
    unspoil(written)
    filled = json.dumps(_fill_card(client, "synthetic-mlp", "DTR").get_json()["response"])
    assert '"type": "home-strip"' in filled and "Could not read" not in filled


def _refresh_trace(client: FlaskClient, trace: str, seen: str) -> TestResponse:
    """The trace page's refresh, as its Interval's tick sends it."""
    return post_callback(
        client,
        [
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
        ],
        [
            ("trace-interval", "n_intervals", 1),
            ("trace-ask-again", "n_intervals", None),
            ("trace-policy", "value", "DTR"),
            ("trace-depth-mode", "value", "depth_at_peak_pinned"),
        ],
        [("trace-fingerprint", "data", seen), ("trace-name", "data", trace)],
        changed=["trace-interval.n_intervals"],
    )


def test_a_trace_page_of_many_runs_shows_before_its_views(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Past DTR_LANDSCAPE_DEFER_CARDS_ABOVE runs the page comes with empty charts and its
    # refresh, due after 0.5 s, brings the views; under the limit they come with the page.
    db, client = _deferring(tmp_path, monkeypatch, runs=17)
    content = render_page(client, "/trace/synthetic-mlp")
    assert "Reading its 17 runs under DTR" in content and "first success" not in content
    assert '"interval": 500' in content and "Launch" in content  # the rest of the page is there
    assert '"max_intervals": 1' in content  # one request for the views, not one a tick
    # and if that request is lost, it asks again past gunicorn's timeout
    assert '{"id": "trace-ask-again", "disabled": false, "interval": 120000}' in content
    # and its jobs list keeps ticking meanwhile, on ticks of its own that never stop
    assert '{"id": "trace-jobs-interval", "interval": 2000}' in content
    response = _refresh_trace(client, "synthetic-mlp", "")
    assert response.status_code == 200, response.get_data(as_text=True)
    answer = response.get_json()["response"]
    assert "first success" in json.dumps(answer["trace-summary"])
    assert answer["trace-strip"]["figure"]["data"]  # the strip, drawn
    assert (
        answer["trace-fingerprint"]["data"] != "" and answer["trace-interval"]["interval"] == 2000
    )
    assert answer["trace-interval"]["max_intervals"] == -1  # ticking again
    assert answer["trace-ask-again"] == {"disabled": True}  # answered
    content = render_page(client, "/trace/synthetic-mlp")  # built now: with the page
    assert "Reading its" not in content and "first success" in content
    Store.open(db).add_runs([run_point("synthetic-mlp", ratio=0.6)], source="engine", cap=60)
    monkeypatch.setenv("DTR_LANDSCAPE_DEFER_CARDS_ABOVE", "18")
    content = render_page(client, "/trace/synthetic-mlp")  # 18 runs, under the limit
    assert "Reading its" not in content and "first success" in content


def test_a_trace_page_whose_views_cannot_be_read_says_why_and_asks_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A pending page sends one request for its views: when that fails, its answer says why and
    # sets the page ticking again, 10 s apart, instead of leaving it "Reading its ... runs".
    # (19 runs: a count no other test's views were built at, in this process's view cache)
    db, client = _deferring(tmp_path, monkeypatch, runs=19)
    assert "Reading its 19 runs" in render_page(client, "/trace/synthetic-mlp")
    written = spoil_runs(db)
    response = _refresh_trace(client, "synthetic-mlp", "")
    assert response.status_code == 200, response.get_data(as_text=True)
    answer = response.get_json()["response"]
    said = json.dumps(answer["trace-summary"])
    assert "Could not read its runs under DTR: " in said and "runs-" in said  # the file
    assert "Trying again in 10 s" in said and "LINE 1" not in said  # its first line only
    assert answer["trace-fingerprint"]["data"] == ""  # still pending
    assert answer["trace-interval"] == {"interval": 10000, "max_intervals": -1}
    assert "trace-strip" not in answer  # the empty charts stay as they are
    assert "trace-ask-again" not in answer  # still on, should the next request be lost
    unspoil(written)
    answer = _refresh_trace(client, "synthetic-mlp", "").get_json()["response"]
    assert "first success" in json.dumps(answer["trace-summary"])
    assert answer["trace-interval"] == {"interval": 2000, "max_intervals": -1}
    # a page already showing its views keeps them: a failing tick is the server's error only
    spoil_runs(db)
    assert _refresh_trace(client, "synthetic-mlp", "stale").status_code == 500
