"""The dashboard in a real browser: `dtr-landscape serve` (gunicorn and the job runner) on a
free port over a temporary store, driven by Playwright with Debian's Chromium.

Screenshots of each page (1440x900) go to tests/artifacts/. Waits poll for a state with a
generous upper bound; nothing asserts how long anything took.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import pytest
from playwright import sync_api as playwright

from app import ids
from app.browser_bench import CHROMIUM, CHROMIUM_ARGS, free_port
from app.components.strip import BAND_LIMIT as STRIP_BAND_LIMIT
from app.figures import KINDS
from app.ids import LAUNCH_FIELD, LAUNCH_INPUTS
from app.jobs import JobStore
from app.landscape import in_view, with_x
from app.launch import MODE_FIELDS, MODES
from engine.landscape.event_logs import compare_stored
from engine.landscape.holes import holes_report
from engine.landscape.store import Store
from engine.landscape.walk import walk_landscape
from engine.sim.simulate import baseline, budget_for, load, run_point
from tests.helpers import REPO, check_file, open_png, spoil_runs, unspoil, walk_in_progress

expect = playwright.expect

ARTIFACTS = REPO / "tests" / "artifacts"
VIEWPORT = {"width": 1440, "height": 900}
WAIT_MS = 60_000  # upper bound for a state to appear, never an assertion about speed
# ... and for states that wait on engine jobs or a server-side rendering (a replay of
# InceptionV4 on two cores shared with other work): generous, still never about speed
JOB_WAIT_MS = 300_000
TRACE = "synthetic-mlp"
IMPORTED_TRACE = "imported-mlp"

expect.set_options(timeout=WAIT_MS)


def _seed(db: Path) -> None:
    store = Store.open(db)
    ratios = [round(0.30 + 0.02 * i, 2) for i in range(16)] + [0.41]
    records = [run_point(TRACE, ratio=r) for r in ratios]
    store.add_runs(records[:-3], source="engine", cap=60)
    store.add_runs(records[-3:], source="import:simrd", cap=60)
    # A second trace known only from imported records: a strip of its own.
    store.add_runs([{**r, "trace": IMPORTED_TRACE} for r in records[::2]], source="import:demo")


@contextlib.contextmanager
def serving(folder: Path, db: Path, traces: Path, **settings: str) -> Iterator[str]:
    """A real `dtr-landscape serve` over the store `db`, with these extra environment
    settings; yields its base URL."""
    port = free_port()
    env = {
        **os.environ,
        "DTR_LANDSCAPE_DB": str(db),
        "DTR_LANDSCAPE_TRACES": str(traces),
        "DTR_LANDSCAPE_MAX_JOBS": "2",
        **settings,
    }
    log = open(folder / "serve.log", "wb")  # noqa: SIM115 - closed below
    process = subprocess.Popen(
        [sys.executable, "-m", "engine.cli.main", "serve", "--port", str(port), "--workers", "2"],
        cwd=REPO,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while True:
        try:
            with urllib.request.urlopen(base + "/", timeout=5) as response:
                if response.status == 200:
                    break
        except OSError:
            pass
        if process.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"server did not start: {(folder / 'serve.log').read_text()}")
        time.sleep(0.2)
    try:
        yield base
    finally:
        process.send_signal(signal.SIGTERM)  # serve forwards it to gunicorn and the runner
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        log.close()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """(base URL, store path) of a real `dtr-landscape serve`."""
    folder = tmp_path_factory.mktemp("served")
    db = folder / "landscape.duckdb"
    _seed(db)
    (folder / "no-dtr-traces").mkdir()
    # every overview card and trace page's views come in requests of their own after the
    # page (deferred_card, pending_views), as a walked landscape's do;
    # tests/test_app_smoke.py has both ways
    with serving(folder, db, folder / "no-dtr-traces", DTR_LANDSCAPE_DEFER_CARDS_ABOVE="0") as base:
        yield base, db


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    with playwright.sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser, server):  # type: ignore[no-untyped-def]
    context = browser.new_context(viewport=VIEWPORT)
    tab = context.new_page()
    tab.set_default_timeout(WAIT_MS)
    yield tab
    context.close()


def shot(page, name: str) -> None:  # type: ignore[no-untyped-def]
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.wait_for_load_state("networkidle")
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


def drawn(page, graph: str) -> None:  # type: ignore[no-untyped-def]
    """Wait until the graph holds data: a page of many runs (here: every page, the server
    defers them all) shows its graphs empty until their views come."""
    page.wait_for_function(
        "sel => { const p = document.querySelector(sel + ' .js-plotly-plot'); "
        "return !!(p && p.data && p.data.length); }",
        arg=graph,
    )


def points(page, graph: str) -> int:  # type: ignore[no-untyped-def]
    """How many points the scatter traces of a graph hold (Plotly's own data)."""
    drawn(page, graph)
    return int(
        page.evaluate(
            """sel => document.querySelector(sel + ' .js-plotly-plot').data
                 .filter(t => t.type === 'scatter')
                 .reduce((n, t) => n + t.x.length, 0)""",
            graph,
        )
    )


def click_point(page, graph: str, outcome: str, index: int = 0) -> str:  # type: ignore[no-untyped-def]
    """Click a point of one outcome's trace; returns the run id it carries (customdata)."""
    drawn(page, graph)
    plot = page.locator(f"{graph} .js-plotly-plot")
    names = plot.evaluate("gd => gd.data.filter(t => t.type === 'scatter').map(t => t.name)")
    run_id = plot.evaluate(
        "(gd, a) => gd.data.find(t => t.name === a[0]).customdata[a[1]]", [outcome, index]
    )
    point = plot.locator(".scatterlayer .trace").nth(names.index(outcome))
    box = point.locator(".points path").nth(index).bounding_box()
    assert box is not None
    x, y = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
    page.mouse.move(x, y)
    page.mouse.click(x, y)
    return str(run_id)


def wait_until_jobs_end(db: Path) -> None:
    """Until no job of the store is queued or running (120 s at most)."""
    jobs = JobStore.beside(db)
    deadline = time.monotonic() + 120
    while any(j.status in ("queued", "running") for j in jobs.recent()):
        assert time.monotonic() < deadline, jobs.recent()
        time.sleep(0.2)


def launch(page, mode: str, **fields: str) -> str:  # type: ignore[no-untyped-def]
    page.locator(f"#trace-launch-mode input[value='{mode}']").check()
    for name, value in fields.items():
        page.fill(f"#trace-launch-{name}", value)
    return answer(page, "#trace-launch-button", "trace-launch-message")


def answer(page, button: str, output: str) -> str:  # type: ignore[no-untyped-def]
    """Click `button` and return the text its callback put in `output` once the page shows it
    (the callback's own response, so an earlier message on the page is never mistaken)."""

    def is_answer(response) -> bool:  # type: ignore[no-untyped-def]
        if "_dash-update-component" not in response.url:
            return False
        request = json.loads(response.request.post_data or "{}")
        return request.get("output") == f"{output}.children"  # that callback's, no other

    with page.expect_response(is_answer) as answered:
        page.click(button)
    body = answered.value.json()["response"][output]["children"]
    text = _text_of(body)
    expect(page.locator(f"#{output}")).to_contain_text(text)
    return text


def _text_of(node: object) -> str:
    """The text of a Dash component tree as JSON (strings, lists, {props: {children}})."""
    if isinstance(node, str):
        return node
    if isinstance(node, list):
        return "".join(_text_of(n) for n in node)
    if isinstance(node, dict):
        return _text_of(node.get("props", {}).get("children", ""))
    return ""


def test_overview_shows_a_strip_per_trace(page, server) -> None:  # type: ignore[no-untyped-def]
    base, _ = server
    page.goto(base + "/")
    for trace in (TRACE, IMPORTED_TRACE):
        expect(page.locator(f"#card-{trace} .js-plotly-plot")).to_be_visible()
    expect(page.locator(".card.pending")).to_have_count(0)  # every deferred card came
    assert points(page, f"#card-{IMPORTED_TRACE}") == 9
    expect(page.locator(f"#card-{TRACE}")).to_contain_text("first success")
    shot(page, "overview")


def test_clicking_a_point_opens_its_run(page, server) -> None:  # type: ignore[no-untyped-def]
    base, db = server
    page.goto(base + "/")
    run_id = click_point(page, f"#card-{TRACE}", "oom", 2)
    page.wait_for_url(f"**/run/{run_id}")
    record = Store.open(db).run(run_id)
    assert record is not None and record["status"] == "oom"
    heading = page.locator("h2.run-title")
    expect(heading).to_contain_text(run_id)
    expect(heading).to_contain_text("oom")
    expect(page.locator(".run-headline")).to_contain_text(f"{record['budget']:,} B")
    expect(page.locator("table.metrics").first).to_contain_text(f"{record['peak_pinned']:,} B")
    shot(page, "run")
    # the trace page's strip opens runs too
    page.goto(base + f"/trace/{TRACE}")
    other = click_point(page, "#trace-strip", "ok", 1)
    page.wait_for_url(f"**/run/{other}")


def test_launching_a_run_adds_its_point_without_reload(page, server) -> None:  # type: ignore[no-untyped-def]
    base, _ = server
    page.goto(base + f"/trace/{TRACE}")
    before = points(page, "#trace-strip")
    page.evaluate("window.__sameDocument = true")
    assert "Queued job" in launch(page, "ratio", value="0.415")
    page.wait_for_function(
        "n => document.querySelector('#trace-strip .js-plotly-plot').data"
        ".filter(t => t.type === 'scatter').reduce((k, t) => k + t.x.length, 0) > n",
        arg=before,
    )
    assert page.evaluate("window.__sameDocument") is True  # no reload happened
    shot(page, "trace")


def test_cancelling_stops_the_subprocess_and_survives_reload(page, server) -> None:  # type: ignore[no-untyped-def]
    base, db = server
    page.goto(base + f"/trace/{TRACE}")
    message = launch(page, "grid", **{"from": "0.0004", "to": "2", "step": "0.0004"})
    match = re.search(r"job #(\d+)", message)
    assert match, message
    job_id = int(match.group(1))
    row = page.locator(f"#job-row-{job_id}")
    expect(row.locator(".status")).to_have_text("running")
    jobs = JobStore.beside(db)
    row.get_by_role("button", name="Cancel").click()
    expect(row.locator(".status")).to_have_text("cancelled")
    job = jobs.get(job_id)
    assert job is not None and job.status == "cancelled" and job.pid is not None
    with pytest.raises(ProcessLookupError):
        os.kill(job.pid, 0)
    page.reload()
    expect(page.locator(f"#job-row-{job_id} .status")).to_have_text("cancelled")
    shot(page, "trace-jobs")


@pytest.mark.parametrize(
    ("mode", "fields", "message"),
    [
        ("ratio", {"value": "abc"}, "must be a number"),
        ("ratio", {"value": "2.5"}, "in (0, 2]"),
        ("grid", {"from": "0.3", "to": "0.8", "step": "0"}, "Step must be positive"),
        ("grid", {"from": "0.0001", "to": "2", "step": "0.0001"}, "at most 5,000"),
        ("bytes", {"value": "1e9"}, "whole number"),
    ],
)
def test_bad_input_shows_a_message_and_launches_nothing(  # type: ignore[no-untyped-def]
    page, server, mode: str, fields: dict[str, str], message: str
) -> None:
    base, db = server
    jobs = JobStore.beside(db)
    before = jobs.count()
    page.goto(base + f"/trace/{TRACE}")
    shown = launch(page, mode, **fields)
    assert message in shown
    expect(page.locator("#trace-launch-message .error")).to_be_visible()
    assert jobs.count() == before


def test_the_launch_form_shows_the_fields_of_the_chosen_mode(page, server) -> None:  # type: ignore[no-untyped-def]
    """Each mode shows the fields it reads (app/launch.py MODE_FIELDS) and hides the others;
    a hidden field's text is not checked, so a launch goes through whatever it holds."""
    base, db = server
    page.goto(base + f"/trace/{TRACE}")
    page.locator("#trace-launch-button").wait_for()
    expect(page.locator("#trace-token")).to_be_hidden()  # this server asks for no token
    for mode in MODES:
        page.locator(f"#trace-launch-mode input[value='{mode}']").check()
        for name, input_id in LAUNCH_INPUTS.items():
            field = page.locator(f"#{input_id}{LAUNCH_FIELD}")
            if name in MODE_FIELDS[mode]:
                expect(field).to_be_visible()
            else:
                expect(field).to_be_hidden()
    page.locator("#trace-launch-mode input[value='ratio']").check()
    page.fill("#trace-launch-cap", "one")
    page.locator("#trace-launch-mode input[value='edges']").check()
    assert "Cap must be a number" in answer(page, "#trace-launch-button", "trace-launch-message")
    page.locator("#trace-launch-mode input[value='grid']").check()
    expect(page.locator("#trace-launch-step-field")).to_be_visible()
    expect(page.locator("#trace-launch-value-field")).to_be_hidden()
    jobs = JobStore.beside(db)
    before = jobs.count()
    page.fill("#trace-launch-cap", "60")
    page.locator("#trace-launch-mode input[value='ratio']").check()
    page.fill("#trace-launch-value", "0.45")
    page.locator("#trace-launch-mode input[value='walk']").check()
    page.fill("#trace-launch-from", "abc")  # bad, and hidden once the mode changes
    page.locator("#trace-launch-mode input[value='ratio']").check()
    shown = answer(page, "#trace-launch-button", "trace-launch-message")
    assert "Queued job" in shown and "run at ratio 0.45" in shown  # the walk's fields stay out
    assert jobs.count() == before + 1


def test_an_estimate_launched_here_answers_in_the_jobs_panel(page, server) -> None:  # type: ignore[no-untyped-def]
    """Before a long walk, its estimate: a job whose answer (the CLI's sentence) shows in the
    jobs panel when it is done, and no run is stored."""
    base, db = server
    wait_until_jobs_end(db)  # earlier tests' jobs store their runs first
    page.goto(base + f"/trace/{TRACE}")
    before = Store.open(db).stats()["runs"]
    shown = launch(page, "estimate", **{"from": "0.3", "to": "0.5"})
    job_id = int(re.findall(r"job #(\d+)", shown)[0])
    assert "estimate of an exact walk 0.3..0.5" in shown
    row = page.locator(f"#job-row-{job_id}")
    expect(row.locator(".status")).to_have_text("done", timeout=120_000)
    expect(row.locator(".answer")).to_contain_text(re.compile(r"^about [0-9,]+ executions, "))
    expect(row.locator(".answer")).to_contain_text("nothing stored")
    shot(page, "estimate-answer")
    assert Store.open(db).stats()["runs"] == before


def test_an_audit_launched_here_answers_with_its_verdict(page, server) -> None:  # type: ignore[no-untyped-def]
    """Stored executions run again from scratch as a job: the jobs panel shows the verdict (the
    CLI's sentence), and the audit stores nothing."""
    base, db = server
    wait_until_jobs_end(db)  # earlier tests' jobs store their runs first
    page.goto(base + f"/trace/{TRACE}")
    before = Store.open(db).stats()["runs"]
    shown = launch(page, "audit", **{"from": "0.3", "to": "0.8", "points": "4"})
    job_id = int(re.findall(r"job #(\d+)", shown)[0])
    assert "audit of 4 stored executions 0.3..0.8" in shown
    row = page.locator(f"#job-row-{job_id}")
    expect(row.locator(".status")).to_have_text("done", timeout=120_000)
    expect(row.locator(".answer")).to_contain_text(
        re.compile(r"^synthetic-mlp DTR: 4 of [0-9,]+ stored executions run again on engine")
    )
    expect(row.locator(".answer")).to_contain_text("every record as stored")
    shot(page, "audit-answer")
    assert Store.open(db).stats()["runs"] == before


def test_controls_are_reachable_by_tab(page, server) -> None:  # type: ignore[no-untyped-def]
    base, _ = server
    page.goto(base + f"/trace/{TRACE}")
    page.locator("#trace-launch-button").wait_for()
    page.locator("#trace-launch-mode input[value='grid']").check()  # a mode of three fields
    wanted = {
        "policy": "#trace-policy",
        "mode": "#trace-launch-mode",
        "from": "#trace-launch-from",
        "step": "#trace-launch-step",
        "cap": "#trace-launch-cap",
        "launch": "#trace-launch-button",
    }
    reached: set[str] = set()
    page.locator("body").click(position={"x": 5, "y": 5})
    for _ in range(150):
        page.keyboard.press("Tab")
        for name, selector in wanted.items():
            if page.evaluate(
                "s => !!document.activeElement && !!document.activeElement.closest(s)", selector
            ):
                reached.add(name)
        if reached == set(wanted):
            break
    assert reached == set(wanted)


def test_not_found_pages(page, server) -> None:  # type: ignore[no-untyped-def]
    base, _ = server
    page.goto(base + "/run/no-such-run")
    expect(page.locator(".not-found")).to_contain_text("Not found: run 'no-such-run'")
    shot(page, "not-found-run")
    page.goto(base + "/no/such/page")
    expect(page.locator(".not-found")).to_contain_text("Not found")


# -- with an access token and a limit on waiting jobs -------------------------------------------
TOKEN = "letmein"


@pytest.fixture(scope="module")
def guarded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    folder = tmp_path_factory.mktemp("guarded")
    db = folder / "landscape.duckdb"
    _seed(db)
    (folder / "no-dtr-traces").mkdir()
    settings = {
        "DTR_LANDSCAPE_TOKEN": TOKEN,
        "DTR_LANDSCAPE_MAX_QUEUED": "1",
        "DTR_LANDSCAPE_MAX_JOBS": "1",
    }
    with serving(folder, db, folder / "no-dtr-traces", **settings) as base:
        yield base, db


def test_token_and_queue_limit_guard_launching_and_cancelling(browser, guarded) -> None:  # type: ignore[no-untyped-def]
    base, db = guarded
    jobs = JobStore.beside(db)
    context = browser.new_context(viewport=VIEWPORT)
    page = context.new_page()
    page.set_default_timeout(WAIT_MS)
    try:
        page.goto(base + f"/trace/{TRACE}")
        expect(page.locator("#trace-token")).to_be_visible()
        assert "needs its access token" in launch(page, "ratio", value="0.45")
        page.fill("#trace-token", "wrong")
        assert "Wrong access token" in launch(page, "ratio", value="0.45")
        assert jobs.count() == 0
        page.fill("#trace-token", TOKEN)
        grid = {"from": "0.0004", "to": "2", "step": "0.0004"}
        running = int(re.findall(r"job #(\d+)", launch(page, "grid", **grid))[0])
        row = page.locator(f"#job-row-{running}")
        expect(row.locator(".status")).to_have_text("running")
        waiting = int(re.findall(r"job #(\d+)", launch(page, "ratio", value="0.45"))[0])
        expect(page.locator(f"#job-row-{waiting} .status")).to_have_text("queued")
        refused = launch(page, "ratio", value="0.46")
        assert "1 job is already waiting (limit 1); wait or cancel one." in refused
        assert jobs.count() == 2
        # cancelling needs the token too
        page.fill("#trace-token", "")
        cancel = f"#job-row-{running} button.cancel"
        assert "was not cancelled" in answer(page, cancel, "trace-cancel-message")
        assert (jobs.get(running) or running).status == "running"  # type: ignore[union-attr]
        page.fill("#trace-token", TOKEN)
        page.locator(f"#job-row-{waiting}").get_by_role("button", name="Cancel").click()
        expect(page.locator(f"#job-row-{waiting} .status")).to_have_text("cancelled")
        row.get_by_role("button", name="Cancel").click()
        expect(row.locator(".status")).to_have_text("cancelled")
        shot(page, "trace-guarded")
    finally:
        context.close()


# -- why a budget fails: compare, retain, export ------------------------------------------------
def open_hole_comparison(page, base: str, trace: str) -> tuple[str, str]:  # type: ignore[no-untyped-def]
    """From the trace page's holes table to the compare page of its first region; (a, b)."""
    page.goto(base + f"/trace/{trace}")
    page.locator(f"#{ids.TRACE_HOLES} td[data-dash-column='compare']").first.click()
    page.wait_for_url("**/compare?**")
    query = parse_qs(urlparse(page.url).query)
    return query["a"][0], query["b"][0]


def engine_analysis(db: Path, run_a: str, run_b: str, folder: Path) -> dict:
    """The engine's own analysis of the pair, from event logs it records itself."""
    return compare_stored(Store.open(db), run_a, run_b, events_dir=folder)


def check_comparison(page, analysis: dict) -> None:  # type: ignore[no-untyped-def]
    """The page shows the engine's divergence, the failing run's victim and both outcomes."""
    divergence = analysis["divergence"]
    shown = page.locator("#compare-divergence-operator")
    expect(shown).to_have_text(f"{divergence['operator']:,}", timeout=JOB_WAIT_MS)
    failing = analysis["failing"]
    victim = divergence[failing]
    expect(page.locator("#compare-failing-victim")).to_have_text(str(victim["storage"]))
    expect(page.locator("#compare-failing-victim-operator")).to_have_text(f"{victim['operator']:,}")
    for i, side in enumerate("ab"):
        status = analysis["runs"][side]["status"]
        expect(page.locator(f".outcome-{i}-status")).to_have_text(status)
    expect(page.locator(f"#{ids.COMPARE_CHART} .js-plotly-plot")).to_be_visible()


def retain_and_see_outcome(page, db: Path, analysis: dict) -> dict:  # type: ignore[no-untyped-def]
    """Click the first retention what-if; its outcome appears as a third column, no reload."""
    candidate = analysis["retain"][0]
    page.evaluate("window.__sameDocument = true")
    page.get_by_role("button", name=f"Retain storage {candidate['storage']}").click()
    heading = page.locator(".outcomes thead a", has_text=f"retaining {candidate['storage']}")
    expect(heading).to_be_visible(timeout=JOB_WAIT_MS)
    run_id = heading.get_attribute("href").rsplit("/", 1)[-1]  # type: ignore[union-attr]
    stored = Store.open(db).run(run_id)
    assert stored is not None and stored["retained"] == candidate["retain"]
    assert stored["budget"] == candidate["budget"]
    expect(page.locator(".outcome-2-status")).to_have_text(stored["status"])
    assert page.evaluate("window.__sameDocument") is True
    return stored


def test_open_a_hole_compare_and_retain(page, server, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    base, db = server
    run_a, run_b = open_hole_comparison(page, base, TRACE)
    analysis = engine_analysis(db, run_a, run_b, tmp_path / "events")
    check_comparison(page, analysis)
    shot(page, "compare")
    retain_and_see_outcome(page, db, analysis)
    shot(page, "compare-what-if")


def test_compare_page_says_what_is_wrong(page, server) -> None:  # type: ignore[no-untyped-def]
    base, db = server
    run_id = str(Store.open(db).runs(TRACE)["run_id"].iloc[0])
    page.goto(base + f"/compare?a={run_id}&b=no-such-run")
    expect(page.locator(".not-found")).to_contain_text("No run with this id (run b)")
    page.goto(base + f"/compare?a={run_id}&b={run_id}")
    expect(page.locator(".not-found")).to_contain_text("the same run")


def download(page, link) -> bytes:  # type: ignore[no-untyped-def]
    with page.expect_download(timeout=JOB_WAIT_MS) as started:
        link.click()
    path = started.value.path()
    assert path is not None
    return Path(path).read_bytes()


def test_charts_export_as_png_svg_and_pdf(page, server) -> None:  # type: ignore[no-untyped-def]
    """PNG and SVG drawn by Plotly in the page, PDF by the server: every file opens."""
    base, _ = server
    page.goto(base + f"/trace/{TRACE}")
    for kind, fmt in (("strip", "png"), ("scatter", "svg"), ("overhead", "pdf")):
        body = download(page, page.locator(f"#export-{kind} .export-{fmt}"))
        check_file(fmt, body)
        if fmt == "png":  # at the file size of app/figures.py, scale 2
            assert open_png(body) == (KINDS[kind].width * 2, KINDS[kind].height * 2)
    open_hole_comparison(page, base, TRACE)
    expect(page.locator("#compare-divergence-operator")).to_be_visible(timeout=JOB_WAIT_MS)
    for fmt in ("svg", "pdf"):
        check_file(fmt, download(page, page.locator(f"#export-compare .export-{fmt}")))


def test_an_export_clicked_before_the_chart_is_drawn_still_downloads(page, server) -> None:  # type: ignore[no-untyped-def]
    """Plotly is held back until after the click: the page's buttons are already there, the
    chart is not drawn yet (a loaded machine's first seconds). The click is kept and the file
    comes once the chart is drawn, instead of the click being dropped."""
    base, _ = server
    held: list[playwright.Route] = []

    def hold(route: playwright.Route) -> None:
        held.append(route)

    page.route("**/plotly.min.js*", hold)
    page.goto(base + f"/trace/{TRACE}", wait_until="commit")
    button = page.locator("#export-strip .export-png")
    button.wait_for()
    assert page.evaluate("Boolean(window.Plotly)") is False
    with page.expect_download(timeout=WAIT_MS) as started:
        button.click()
        for route in held:
            route.continue_()
        page.unroute("**/plotly.min.js*")
    path = started.value.path()
    assert path is not None
    body = Path(path).read_bytes()
    check_file("png", body)
    assert open_png(body) == (KINDS["strip"].width * 2, KINDS["strip"].height * 2)


@pytest.fixture(scope="module")
def spoilt_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """A served store whose trace pages all wait for their views (as a walked landscape's
    do), for a test that spoils its runs' files for a while."""
    folder = tmp_path_factory.mktemp("served-spoilt")
    db = folder / "landscape.duckdb"
    records = [run_point(TRACE, ratio=0.36 + 0.005 * i) for i in range(17)]
    Store.open(db).add_runs(records, source="engine", cap=60)
    (folder / "no-dtr-traces").mkdir()
    with serving(folder, db, folder / "no-dtr-traces", DTR_LANDSCAPE_DEFER_CARDS_ABOVE="0") as base:
        yield base, db


def test_a_trace_page_whose_views_fail_says_why_then_shows_them(  # type: ignore[no-untyped-def]
    browser, spoilt_server
) -> None:
    """The page's one request for its views meets runs that cannot be read (its parts
    overwritten just before the request goes out): the page says so, and its next request,
    once the files are back, brings the views without a reload."""
    base, db = spoilt_server
    written: dict[Path, bytes] = {}

    def spoil_then_send(route) -> None:  # type: ignore[no-untyped-def]
        if not written and "trace-strip.figure" in (route.request.post_data or ""):
            written.update(spoil_runs(db))
        route.continue_()

    context = browser.new_context(viewport=VIEWPORT)
    tab = context.new_page()
    tab.set_default_timeout(WAIT_MS)
    tab.route(re.compile(r"/_dash-update-component(\?|$)"), spoil_then_send)
    try:
        tab.goto(base + f"/trace/{TRACE}")
        summary = tab.locator(f"#{ids.TRACE_SUMMARY}")
        expect(summary).to_contain_text("Could not read its runs under DTR: ")
        expect(summary).to_contain_text("Trying again in 10 s.")
        assert written and summary.locator(".error").count() == 1
        shot(tab, "trace-unreadable")
        unspoil(written)
        expect(summary).to_contain_text("first success")
        expect(summary).not_to_contain_text("Could not read")
        expect(tab.locator("#trace-strip .js-plotly-plot .scatterlayer .point")).not_to_have_count(
            0
        )
    finally:
        unspoil(written)
        context.close()


@pytest.fixture(scope="module")
def losing_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """A served store whose overview cards and trace pages all wait for what they ask for,
    and ask again 3 s later if no answer has come (DTR_LANDSCAPE_ASK_AGAIN_S)."""
    folder = tmp_path_factory.mktemp("served-losing")
    db = folder / "landscape.duckdb"
    records = [run_point(TRACE, ratio=0.36 + 0.005 * i) for i in range(15)]
    Store.open(db).add_runs(records, source="engine", cap=60)
    (folder / "no-dtr-traces").mkdir()
    settings = {"DTR_LANDSCAPE_DEFER_CARDS_ABOVE": "0", "DTR_LANDSCAPE_ASK_AGAIN_S": "3"}
    with serving(folder, db, folder / "no-dtr-traces", **settings) as base:
        yield base, db


def _losing(browser, marker: str, *, every: bool = False):  # type: ignore[no-untyped-def]
    """A tab whose first callback request carrying `marker` (or every one, `every`) is lost
    (aborted, as when gunicorn kills its worker at the timeout); the others go through.
    Returns the tab and the list of requests that carried the marker ("lost", "sent")."""
    seen: list[str] = []

    def lose(route) -> None:  # type: ignore[no-untyped-def]
        if marker in (route.request.post_data or ""):
            seen.append("sent" if seen and not every else "lost")
            if seen[-1] == "lost":
                route.abort("connectionreset")
                return
        route.continue_()

    context = browser.new_context(viewport=VIEWPORT)
    tab = context.new_page()
    tab.set_default_timeout(WAIT_MS)
    tab.route(re.compile(r"/_dash-update-component(\?|$)"), lose)
    return tab, seen


def test_a_trace_page_whose_request_for_its_views_is_lost_asks_again(  # type: ignore[no-untyped-def]
    browser, losing_server
) -> None:
    """The page's one request for its views gets no answer: the page asks again, and shows
    them without a reload (it said "Reading its ... runs" until reloaded before)."""
    tab, seen = _losing(browser, "trace-strip.figure")
    try:
        tab.goto(losing_server[0] + f"/trace/{TRACE}")
        summary = tab.locator(f"#{ids.TRACE_SUMMARY}")
        expect(summary).to_contain_text("first success")
        expect(tab.locator("#trace-strip .js-plotly-plot .scatterlayer .point")).not_to_have_count(
            0
        )
        assert seen[:2] == ["lost", "sent"], seen
    finally:
        tab.context.close()


def test_a_pending_trace_pages_jobs_list_stays_current(  # type: ignore[no-untyped-def]
    browser, losing_server
) -> None:
    """While a trace page waits for its views (here: every request for them is lost), its jobs
    list still follows a job launched from it to its end (before, the list was refreshed only
    on the views' ticks, which stop while they are pending)."""
    base, db = losing_server
    # a run no view was built with yet, so that the page waits for its views whatever the
    # other tests of this server built before
    Store.open(db).add_runs([run_point(TRACE, ratio=0.47)], source="engine", cap=60)
    tab, lost = _losing(browser, "trace-strip.figure", every=True)
    try:
        tab.goto(base + f"/trace/{TRACE}")
        expect(tab.locator(f"#{ids.TRACE_SUMMARY}")).to_contain_text("Reading its")
        # a job that runs for seconds: the launch's own refresh of the list shows it queued or
        # running, and only the list's ticks show it done
        message = launch(tab, "grid", **{"from": "0.3", "to": "0.8", "step": "0.001"})
        match = re.search(r"job #(\d+)", message)
        assert match, message
        row = tab.locator(f"#job-row-{match.group(1)}")
        expect(row.locator(".status")).to_have_text("done", timeout=60_000)
        expect(tab.locator(f"#{ids.TRACE_SUMMARY}")).to_contain_text("Reading its")
        assert lost and set(lost) == {"lost"}  # the views were asked for, and never came
    finally:
        tab.context.close()


def test_an_overview_card_whose_request_is_lost_asks_again(  # type: ignore[no-untyped-def]
    browser, losing_server
) -> None:
    """An overview card built after the page: its request gets no answer, and the card asks
    again instead of saying "Reading its ... runs" until the page is reloaded."""
    tab, seen = _losing(browser, ids.HOME_CARD_REQUEST)
    try:
        tab.goto(losing_server[0] + "/")
        card = tab.locator(f"#card-{TRACE}")
        expect(card.locator(".js-plotly-plot .scatterlayer .point")).not_to_have_count(0)
        expect(card).not_to_contain_text("Reading its")
        assert seen[:2] == ["lost", "sent"], seen
    finally:
        tab.context.close()


@pytest.fixture(scope="module")
def walked_server(
    tmp_path_factory: pytest.TempPathFactory, traces_dir: Path
) -> Iterator[tuple[str, Path]]:
    """The dashboard over an exact walk of the synthetic trace, 0.2-0.7: 2,236 executions,
    more than the strip draws one by one, and three exact holes."""
    folder = tmp_path_factory.mktemp("served-walk")
    db = folder / "landscape.duckdb"
    ref, program = load(TRACE)
    peak = baseline(program).peak
    walk_landscape(Store.open(db), ref, start=budget_for(0.2, peak), end=budget_for(0.7, peak))
    with serving(folder, db, traces_dir) as base:
        yield base, db


def test_a_walked_landscape_shows_its_exact_holes(page, walked_server) -> None:  # type: ignore[no-untyped-def]
    """The trace page of a walk: the strip says what it drew, the facts and the exact holes
    table give each hole to the byte (the engine's report), and a click opens a hole's first
    failing run."""
    base, db = walked_server
    report = holes_report(Store.open(db), TRACE)
    exact = report["interval_holes"]
    assert len(exact) >= 2 and report["intervals"] > STRIP_BAND_LIMIT
    page.goto(base + f"/trace/{TRACE}")
    expect(page.locator(f"#{ids.TRACE_STRIP} .annotation-text")).to_contain_text(
        f"of {report['runs']:,} runs drawn"
    )
    widest = max(h["width"] for h in exact)
    expect(page.locator(f"#{ids.TRACE_SUMMARY}")).to_contain_text(
        f"{len(exact)}, {sum(h['width'] for h in exact):,} failing bytes; widest {widest:,} B"
    )
    table = page.locator(f"#{ids.TRACE_EXACT_HOLES}")
    for hole in exact:
        expect(table).to_contain_text(f"{hole['first_fail_byte']:,} B")
    shot(page, "trace-walked")
    # zoomed in around the first hole, the strip draws every execution in view
    first = exact[0]
    peak = int(Store.open(db).runs(TRACE)["peak"].iloc[0])
    lo, hi = (first["first_fail_byte"] - 2_000) / peak, (first["last_fail_byte"] + 2_000) / peak
    in_sight = in_view(with_x(Store.open(db).runs(TRACE)), lo, hi)
    page.evaluate(
        "([lo, hi]) => Plotly.relayout(document.querySelector('#trace-strip .js-plotly-plot'),"
        " {'xaxis.range': [lo, hi]})",
        [lo, hi],
    )
    expect(page.locator(f"#{ids.TRACE_STRIP} .annotation-text")).to_have_count(0)
    drawn = page.evaluate(
        "() => document.querySelector('#trace-strip .js-plotly-plot').data"
        ".filter(t => t.type !== 'bar').flatMap(t => Array.from(t.customdata))"
    )
    assert sorted(drawn) == sorted(in_sight["run_id"]) and first["run_ids"]["first_fail"] in drawn
    shot(page, "trace-walked-zoomed")
    table.locator("td[data-dash-column='first_fail']").first.click()
    page.wait_for_url(f"**/run/{exact[0]['run_ids']['first_fail']}")
    page.goto(base + "/")
    expect(page.locator(f"#card-{TRACE}")).to_contain_text(f"{len(exact)}, ")


@pytest.fixture(scope="module")
def dtr_server(
    tmp_path_factory: pytest.TempPathFactory, traces_dir: Path
) -> Iterator[tuple[str, Path]]:
    """The dashboard over InceptionV4's hole of the paper's Section 5: ok at 0.2343, oom at
    0.235 ... (sampled here at 0.235 only), ok at 0.243."""
    folder = tmp_path_factory.mktemp("served-dtr")
    db = folder / "landscape.duckdb"
    records = [run_point("inceptionv4", ratio=r, traces=traces_dir) for r in (0.2343, 0.235, 0.243)]
    Store.open(db).add_runs(records, source="engine", cap=60)
    with serving(folder, db, traces_dir) as base:
        yield base, db


def test_a_walk_started_from_the_command_line_shows_on_its_trace_page(  # type: ignore[no-untyped-def]
    page, tmp_path: Path
) -> None:
    """A walk the dashboard did not start (the command line's, on the store it serves; here
    SIGSTOPped so it stays running) is named on its trace page with its budgets, process and
    last progress note, and on the overview with a link to that page; it is gone from the
    page once the walk is killed."""
    db = tmp_path / "landscape.duckdb"
    (tmp_path / "no-dtr-traces").mkdir()
    walk_env = {"DTR_LANDSCAPE_CACHE": str(tmp_path / "cache"), "DTR_LANDSCAPE_TRACES": ""}
    proc, _ = walk_in_progress(db, walk_env, noted=True)
    try:
        proc.send_signal(signal.SIGSTOP)
        (note,) = [json.loads(p.read_text()) for p in db.parent.glob("*.walking/*.progress")]
        with serving(tmp_path, db, tmp_path / "no-dtr-traces") as base:
            page.goto(base + f"/trace/{TRACE}")
            line = page.locator(".running-walk")
            expect(line).to_contain_text(re.compile(r"^DTREqClass \(cap 60 s\): budgets [0-9,]+"))
            expect(line).to_contain_text(f"process {proc.pid} on ")
            runs = f"{note['runs']:,} run" + ("" if note["runs"] == 1 else "s")
            expect(line).to_contain_text(f"; {runs} so far, ")
            expect(line).to_contain_text(
                f"{100 * note['share']:.2f}% of its range; started outside this dashboard"
            )
            shot(page, "walk-from-the-command-line")
            page.goto(base + "/")  # the overview names it too, linked to its trace's page
            overview = page.locator(".running-walk")
            expect(overview).to_contain_text(f"{TRACE}: DTREqClass (cap 60 s): budgets ")
            shot(page, "overview-walking")
            overview.get_by_role("link", name=TRACE).click()
            expect(page).to_have_url(base + f"/trace/{TRACE}")
            proc.send_signal(signal.SIGKILL)
            proc.communicate()
            expect(page.locator(".running-walk")).to_have_count(0)
            expect(page.locator(".jobs")).to_contain_text("No jobs yet.")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


def test_inceptionv4_the_papers_divergence_in_the_browser(  # type: ignore[no-untyped-def]
    page, dtr_server, tmp_path: Path
) -> None:
    """The failing run (0.235, oom) first evicts a different storage at operator 2,267, as the
    paper says; retaining it turns the failing budget into a success."""
    base, db = dtr_server
    run_a, run_b = open_hole_comparison(page, base, "inceptionv4")
    analysis = engine_analysis(db, run_a, run_b, tmp_path / "events")
    assert (analysis["runs"]["a"]["status"], analysis["runs"]["b"]["status"]) == ("ok", "oom")
    check_comparison(page, analysis)
    expect(page.locator("#compare-failing-victim-operator")).to_have_text("2,267")
    shot(page, "compare-inceptionv4")
    stored = retain_and_see_outcome(page, db, analysis)
    assert stored["status"] == "ok"
    shot(page, "compare-inceptionv4-what-if")


def test_a_published_hole_checked_here_and_explained(  # type: ignore[no-untyped-def]
    page, dtr_server, tmp_path: Path
) -> None:
    """From /published to ResNet-32's page, its published holes' edges run here as a job, then
    a hole's sides compared: from the report's bytes to why the budget fails."""
    base, db = dtr_server
    page.goto(base + "/")
    page.get_by_role("link", name="Published").click()
    page.wait_for_url("**/published")
    expect(page.locator("table.report-summary tbody tr")).to_have_count(8)
    section = page.locator("#published-resnet32")
    expect(section).to_contain_text("1,024,657,200 (0.101843)")  # the paper's hole, exact
    shot(page, "published")
    section.get_by_role("link", name="its page", exact=True).click()
    page.wait_for_url("**/trace/resnet32")
    assert "Queued job" in launch(page, "published")
    page.wait_for_function(
        """() => { const p = document.querySelector('#trace-strip .js-plotly-plot');
                   return !!(p && p.data) && p.data.filter(t => t.type === 'scatter')
                     .reduce((n, t) => n + t.x.length, 0) === 28; }""",
        timeout=JOB_WAIT_MS,
    )
    stored = Store.open(db).runs("resnet32")
    assert len(stored) == 28 and set(stored["stage"]) == {"check"}
    # runs in bytes are no grid samples; their intervals prove the holes whose failing
    # executions they cover (5 of the 7: two have failing executions between their edges)
    rows = page.locator(f"#{ids.TRACE_EXACT_HOLES} td[data-dash-column='compare']")
    expect(rows).to_have_count(5)
    rows.first.click()
    page.wait_for_url("**/compare?**")
    query = parse_qs(urlparse(page.url).query)
    run_a, run_b = query["a"][0], query["b"][0]
    analysis = engine_analysis(db, run_a, run_b, tmp_path / "events")
    assert (analysis["runs"]["a"]["status"], analysis["runs"]["b"]["status"]) == ("ok", "oom")
    check_comparison(page, analysis)
