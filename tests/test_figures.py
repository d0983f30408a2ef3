"""Figures for papers (app/figures.py): every chart as PNG, SVG and PDF, through the export
route, `dtr-landscape figure` and the builders the pages use. Real store, real event logs,
real kaleido driving Debian's Chromium; each file is opened and checked, not only sized."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from flask.testing import FlaskClient

from app import data, figures
from app.components.charts import operator_chart, overhead_curve, pinned_vs_depth
from app.components.compare import compare_chart
from app.components.strip import outcome_strip
from app.plans import compare_file
from app.server import create_app
from engine.landscape.event_logs import compare_stored, write_analysis
from engine.landscape.store import Store
from engine.sim.simulate import run_point
from tests.helpers import check_file, cli, open_png, render_page

TRACE = "synthetic-mlp"


@pytest.fixture(scope="module")
def stored(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    """A store with a hole of the shipped trace, one run's event log and a cached comparison."""
    folder = tmp_path_factory.mktemp("figures")
    db = folder / "landscape.duckdb"
    store = Store.open(db)
    ids = store.add_runs(
        [run_point(TRACE, ratio=r) for r in (0.38, 0.40, 0.41, 0.44)], source="engine", cap=60
    )
    ok, oom = ids[1], ids[2]
    analysis = compare_stored(store, ok, oom)  # records both event logs beside the store
    write_analysis(compare_file(db, ok, oom), analysis)
    yield {"db": db, "ok": ok, "oom": oom, "ids": ids, "analysis": analysis}


@pytest.fixture
def env(stored: dict, monkeypatch: pytest.MonkeyPatch) -> dict:
    monkeypatch.setenv("DTR_LANDSCAPE_DB", str(stored["db"]))
    monkeypatch.delenv("DTR_LANDSCAPE_TRACES", raising=False)
    return stored


def params(stored: dict) -> dict[str, dict[str, str]]:
    return {
        "strip": {"trace": TRACE, "policy": "DTR"},
        "scatter": {"trace": TRACE, "depth": "max_nesting_depth"},
        "overhead": {"trace": TRACE},
        "operators": {"run": stored["oom"]},
        "compare": {"a": stored["ok"], "b": stored["oom"]},
    }


def test_each_figure_is_the_pages_chart(env: dict) -> None:
    """The same builder and data as the page: the traces are the page figure's."""
    runs = data.runs(TRACE, "DTR")
    events = data.read_events(data.events_path_for(env["oom"]))
    assert events is not None
    page = {
        "strip": outcome_strip(runs, height=260),
        "scatter": pinned_vs_depth(runs, "max_nesting_depth"),
        "overhead": overhead_curve(runs),
        "operators": operator_chart(events),
        "compare": compare_chart(env["analysis"]),
    }
    for kind, wanted in page.items():
        built = figures.build(kind, params(env)[kind])
        assert json.loads(built.to_json())["data"] == json.loads(wanted.to_json())["data"], kind
        assert built.layout.width == figures.KINDS[kind].width


def test_every_chart_renders_as_png_svg_and_pdf(env: dict) -> None:
    items = [
        (figures.build(kind, p), fmt) for kind, p in params(env).items() for fmt in figures.FORMATS
    ]
    rendered = figures.render(items)
    for (fig, fmt), body in zip(items, rendered, strict=True):
        check_file(fmt, body)
        if fmt == "png":
            assert open_png(body) == (
                fig.layout.width * figures.PNG_SCALE,
                fig.layout.height * figures.PNG_SCALE,
            )


@pytest.mark.parametrize(
    ("kind", "query", "message"),
    [
        ("nope", {}, "unknown figure 'nope'"),
        ("strip", {}, "needs trace"),
        ("strip", {"trace": "no-such-trace"}, "no stored runs of trace 'no-such-trace'"),
        ("scatter", {"trace": TRACE, "depth": "x"}, "depth must be one of"),
        ("operators", {"run": "nope"}, "no run 'nope'"),
    ],
)
def test_bad_figure_parameters(env: dict, kind: str, query: dict, message: str) -> None:
    with pytest.raises(figures.FigureError, match=message):
        figures.build(kind, query)


def test_a_figure_never_simulates(env: dict) -> None:
    """No event log, no cached comparison: a message, not a replay."""
    below, above = env["ids"][0], env["ids"][3]
    with pytest.raises(figures.FigureError, match="no event log yet"):
        figures.build("operators", {"run": below})
    with pytest.raises(figures.FigureError, match="have not been compared yet"):
        figures.build("compare", {"a": below, "b": above})
    assert not data.events_path_for(below).exists()


@pytest.fixture
def client(env: dict) -> FlaskClient:
    return create_app().server.test_client()


def test_export_route_serves_downloads(client: FlaskClient, env: dict) -> None:
    for kind, fmt in (("compare", "pdf"),):  # every kind and format: the test above
        query = params(env)[kind]
        response = client.get(f"/export/{kind}.{fmt}", query_string=query)
        assert response.status_code == 200, response.get_data(as_text=True)
        assert response.mimetype == figures.FORMATS[fmt]
        disposition = response.headers["Content-Disposition"]
        assert disposition.startswith("attachment;") and disposition.endswith(f'.{fmt}"')
        check_file(fmt, response.get_data())


@pytest.mark.parametrize(
    ("path", "status", "message"),
    [
        (f"/export/strip.gif?trace={TRACE}", 400, "unknown format 'gif'"),
        ("/export/strip.png", 400, "needs trace"),
        ("/export/strip.png?trace=nope", 404, "no stored runs"),
        ("/export/operators.pdf?run=nope", 404, "no run 'nope'"),
    ],
)
def test_export_route_bad_requests(
    client: FlaskClient, path: str, status: int, message: str
) -> None:
    response = client.get(path)
    assert response.status_code == status and message in response.get_data(as_text=True)


def test_figure_command(env: dict, tmp_path: Path) -> None:
    db = str(env["db"])
    outs = [tmp_path / f"strip.{fmt}" for fmt in figures.FORMATS]
    done = cli("figure", "strip", TRACE, "--db", db, *[f"--out={p}" for p in outs])
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["files"] == [str(p) for p in outs]
    for path in outs:
        check_file(path.suffix[1:], path.read_bytes())
    # a pair never compared: the command line computes and caches the comparison first
    below, above = env["ids"][0], env["ids"][3]
    pdf = tmp_path / "compare.pdf"
    done = cli("figure", "compare", below, above, "--db", db, "--out", str(pdf))
    assert done.returncode == 0, done.stderr
    assert "recording the event log of run a" in done.stderr
    check_file("pdf", pdf.read_bytes())
    assert compare_file(env["db"], below, above).is_file()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("strip", TRACE, "--out", "x.jpg"), "must end in .png, .svg or .pdf"),
        (("operators", "nope", "--out", "x.png"), "no run 'nope'"),
        (("compare", "nope", "nope", "--out", "x.png"), "the same run"),
    ],
)
def test_figure_command_bad_input(env: dict, args: tuple[str, ...], message: str) -> None:
    done = cli("figure", *args, "--db", str(env["db"]))
    assert done.returncode == 2 and message in done.stderr, done.stderr


def test_pages_offer_their_charts_exports(client: FlaskClient, env: dict) -> None:
    """PDF links to the server; PNG/SVG buttons for Plotly in the browser, where the chart's
    graph id is a plain one."""
    home = render_page(client, "/")
    assert f"/export/strip.pdf?trace={TRACE}&policy=DTR" in home
    assert f"/export/strip.png?trace={TRACE}&policy=DTR" in home  # pattern ids: server links
    trace = render_page(client, f"/trace/{TRACE}")
    for kind in ("strip", "scatter", "overhead"):
        assert f"/export/{kind}.pdf?trace={TRACE}" in trace
    assert trace.count('"type": "export-in-browser"') == 6
    run = render_page(client, f"/run/{env['oom']}")  # its event log is recorded
    assert f"/export/operators.pdf?run={env['oom']}" in run
