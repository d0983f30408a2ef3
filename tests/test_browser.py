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

import pytest
from playwright import sync_api as playwright

from app.browser_bench import CHROMIUM, CHROMIUM_ARGS, free_port
from app.jobs import JobStore
from engine.landscape.store import Store
from engine.sim.simulate import run_point
from tests.helpers import REPO

expect = playwright.expect

ARTIFACTS = REPO / "tests" / "artifacts"
VIEWPORT = {"width": 1440, "height": 900}
WAIT_MS = 60_000  # upper bound for a state to appear, never an assertion about speed
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
def serving(folder: Path, **settings: str) -> Iterator[tuple[str, Path]]:
    """(base URL, store path) of a real `dtr-landscape serve` over a seeded store in
    `folder`, with these extra environment settings."""
    db = folder / "landscape.duckdb"
    _seed(db)
    (folder / "no-dtr-traces").mkdir()
    port = free_port()
    env = {
        **os.environ,
        "DTR_LANDSCAPE_DB": str(db),
        "DTR_LANDSCAPE_TRACES": str(folder / "no-dtr-traces"),
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
        yield base, db
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
    with serving(tmp_path_factory.mktemp("served")) as served:
        yield served


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


def points(page, graph: str) -> int:  # type: ignore[no-untyped-def]
    """How many points the scatter traces of a graph hold (Plotly's own data)."""
    page.wait_for_function(
        "sel => { const p = document.querySelector(sel + ' .js-plotly-plot'); "
        "return !!(p && p.data); }",
        arg=graph,
    )
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


def test_controls_are_reachable_by_tab(page, server) -> None:  # type: ignore[no-untyped-def]
    base, _ = server
    page.goto(base + f"/trace/{TRACE}")
    page.locator("#trace-launch-button").wait_for()
    wanted = {
        "policy": "#trace-policy",
        "mode": "#trace-launch-mode",
        "budget": "#trace-launch-value",
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
    settings = {
        "DTR_LANDSCAPE_TOKEN": TOKEN,
        "DTR_LANDSCAPE_MAX_QUEUED": "1",
        "DTR_LANDSCAPE_MAX_JOBS": "1",
    }
    with serving(folder, **settings) as served:
        yield served


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
