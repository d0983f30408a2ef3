"""The pure builders: data in, figures and layouts out (no server, no store)."""

from __future__ import annotations

import dataclasses

import pandas as pd
import pytest

from app.components.charts import operator_chart, overhead_curve, pinned_vs_depth
from app.components.jobs_panel import jobs_panel
from app.components.outcomes import COLORS, OUTCOMES, SYMBOLS
from app.components.running_walks import running_walks_note
from app.components.strip import BAND_PREFIX, outcome_strip
from app.components.summary import facts, hole_rows
from app.jobs import Job
from app.landscape import ExactEdges, coverage, holes, with_x
from engine.landscape.walk_claims import new_claim

PEAK = 1000


def frame(rows: list[tuple[int, str]], **columns: list) -> pd.DataFrame:
    """Runs at (budget, status) given by ratio (budget / PEAK), DTR at cap 60, started in row
    order; same-execution intervals of one byte unless given."""
    data = {
        "run_id": [f"r{b}" for b, _ in rows],
        "trace_sha256": ["sha-1"] * len(rows),
        "policy": ["DTR"] * len(rows),
        "cap": [60.0] * len(rows),
        "stage": [None] * len(rows),
        "started_at": pd.date_range("2026-01-01", periods=len(rows), freq="s"),
        "budget": [b for b, _ in rows],
        "ratio": [b / PEAK for b, _ in rows],
        "peak": [PEAK] * len(rows),
        "status": [s for _, s in rows],
        "overhead": [1.5 if s == "ok" else None for _, s in rows],
        "source": ["engine"] * len(rows),
        "same_lo": [b for b, _ in rows],
        "same_hi": [b for b, _ in rows],
        "retained": [""] * len(rows),
        "peak_pinned": [100 + b for b, _ in rows],
        "depth_at_peak_pinned": [3] * len(rows),
        "max_nesting_depth": [7] * len(rows),
    }
    data.update(columns)
    return with_x(pd.DataFrame(data))


def scatters(fig) -> dict:
    return {t.name: t for t in fig.data if t.type == "scatter"}


def test_strip_has_one_scatter_per_outcome_with_run_ids_and_shapes() -> None:
    runs = frame(
        [(300, "oom"), (400, "ok"), (500, "thrashed"), (600, "timeout"), (700, "ok")],
        source=["engine", "engine", "engine", "engine", "import:simrd"],
    )
    fig = outcome_strip(runs)
    by_name = scatters(fig)
    assert list(by_name) == list(OUTCOMES)
    ok = by_name["ok"]
    assert list(ok.customdata) == ["r400", "r700"]
    assert list(ok.marker.symbol) == [SYMBOLS["ok"], SYMBOLS["ok"] + "-open"]  # imported: open
    assert ok.marker.color == COLORS["ok"]
    assert list(by_name["oom"].x) == [0.3]
    assert len({t.marker.color for t in by_name.values()}) == 4
    assert len({SYMBOLS[s] for s in OUTCOMES}) == 4
    assert fig.layout.uirevision == "strip"


def test_strip_draws_known_intervals_as_bands_in_ratio() -> None:
    runs = frame([(400, "ok"), (500, "oom")], same_lo=[350, 500], same_hi=[None, 549])
    bands = {t.name: t for t in outcome_strip(runs).data if t.type == "bar"}
    assert set(bands) == {BAND_PREFIX + "ok", BAND_PREFIX + "oom"}
    assert bands[BAND_PREFIX + "oom"].base[0] == pytest.approx(0.5)
    assert bands[BAND_PREFIX + "oom"].x[0] == pytest.approx(0.05)  # 500..549 inclusive
    assert list(bands[BAND_PREFIX + "ok"].customdata) == ["r400"]
    # an open-ended interval (hi null: every larger budget) runs to the right edge
    assert bands[BAND_PREFIX + "ok"].base[0] + bands[BAND_PREFIX + "ok"].x[0] > 0.5


def test_empty_strip_still_has_every_outcome() -> None:
    fig = outcome_strip(with_x(pd.DataFrame(columns=["run_id", "budget", "peak", "status"])))
    assert [t.name for t in fig.data] == list(OUTCOMES)


def test_pinned_scatter_toggles_depth_column() -> None:
    runs = frame([(300, "oom"), (400, "ok")])
    at_peak = scatters(pinned_vs_depth(runs, "depth_at_peak_pinned"))
    deepest = scatters(pinned_vs_depth(runs, "max_nesting_depth"))
    assert list(at_peak) == list(OUTCOMES)
    assert list(at_peak["ok"].x) == [3] and list(deepest["ok"].x) == [7]
    assert list(at_peak["oom"].customdata) == ["r300"]
    assert "budget 300 B" in at_peak["oom"].text[0]
    with pytest.raises(ValueError):
        pinned_vs_depth(runs, "depth")


def test_overhead_curve_is_the_completing_runs_in_budget_order() -> None:
    runs = frame([(700, "ok"), (300, "oom"), (400, "ok")])
    (curve,) = overhead_curve(runs).data
    assert list(curve.customdata) == ["r400", "r700"]
    assert list(curve.x) == [0.4, 0.7]


def test_operator_chart_plots_pinned_and_depth() -> None:
    events = pd.DataFrame(
        {
            "kind": ["operator", "remat", "operator"],
            "operator": [2, 1, 1],
            "max_pinned": [20, None, 10],
            "max_depth": [2, None, 1],
        }
    )
    pinned, depth = operator_chart(events).data
    assert list(pinned.x) == [1, 2] and list(pinned.y) == [10, 20]
    assert depth.yaxis == "y2"


def test_holes_facts_and_rows() -> None:
    runs = frame([(300, "oom"), (400, "ok"), (450, "oom"), (460, "oom"), (500, "ok")])
    found = holes(runs, "DTR")
    rows = hole_rows(found)
    assert len(rows) == 1 and rows[0]["failing_samples"] == 2
    assert rows[0]["first_fail_id"] == "r450"
    text = dict(facts(found, 5, coverage(found, pd.DataFrame()), PEAK))
    assert text["first success"].startswith("0.4000")
    assert text["stable from"].startswith("0.5000")
    # their intervals (one byte each here) touch nothing: no failing bytes known below, so
    # the intervals bound the edges from above and prove neither (not "exact")
    assert found.edges == ExactEdges(first_success=400, stable_from=500, stable_to=500)
    assert text["first success"].endswith(
        "; at most 400 B (0.400000) (the bytes just below it are not classified)"
    )
    assert text["stable from"].endswith(
        "; at most 500 B (0.500000) (the bytes just below it are not classified), "
        "every byte up to 500 B (0.500000) completes"
    )


def test_facts_say_the_walked_first_success_and_stable_from() -> None:
    """After a walk, the facts add the first success and stable-from the intervals prove, in
    bytes and ratios, with the failing bytes below and the top they hold to."""
    runs = [(300, 349, "oom"), (350, 399, "thrashed"), (400, 449, "ok"), (450, 469, "oom")]
    runs += [(470, 599, "ok"), (600, None, "ok")]
    walked = frame(
        [(lo, status) for lo, _, status in runs],
        same_hi=[hi for _, hi, _ in runs],
        ratio=[None] * len(runs),  # given in bytes: a walk's runs are no samples
    )
    found = holes(walked, "DTR")
    assert found.samples == 0 and found.first_success is None
    assert found.edges == ExactEdges(
        first_success=400,
        failing_from=300,
        stable_from=470,
        stable_to=None,
        stable_failing_from=450,
    )
    text = dict(facts(found, len(runs), coverage(found, pd.DataFrame()), PEAK))
    assert text["first success"] == (
        "\u2014; exact 400 B (0.400000), every walked byte below it from 300 B (0.300000) fails"
    )
    assert text["stable from"] == (
        "\u2014; exact 470 B (0.470000), every walked byte below it from 450 B (0.450000) fails, "
        "every larger budget completes"
    )
    bounded = holes(walked.iloc[:-1], "DTR")
    assert bounded.edges.stable_to == 599
    assert dict(facts(bounded, 5, coverage(bounded, pd.DataFrame()), PEAK))["stable from"].endswith(
        "every byte up to 599 B (0.599000) completes"
    )


def _job(job_id: int, status: str, **extra: object) -> Job:
    values: dict = {
        "id": job_id,
        "kind": "run",
        "trace": "t",
        "policy": "DTR",
        "label": f"job {job_id}",
        "spec": {},
        "status": status,
        "cancel_requested": False,
        "pid": None,
        "done": 0,
        "total": 1,
        "current": None,
        "created_at": 0.0,
        "started_at": None,
        "ended_at": None,
        "exit_code": None,
        "error": None,
        "log_tail": None,
    }
    values.update(extra)
    return Job(**values)


def _find(component, predicate) -> list:
    found = [component] if predicate(component) else []
    children = getattr(component, "children", None)
    if children is None:
        return found
    for child in children if isinstance(children, list | tuple) else [children]:
        found += _find(child, predicate)
    return found


def test_jobs_panel_offers_cancel_only_for_active_jobs() -> None:
    jobs = [
        _job(3, "running", pid=42, done=5, total=10, started_at=100.0, current="ratio 0.5"),
        _job(2, "queued"),
        _job(1, "done", done=1, started_at=10.0, ended_at=12.0),
    ]
    panel = jobs_panel(jobs, now=110.0, runner_alive=True, cancel_type="x-cancel")
    buttons = _find(panel, lambda c: isinstance(getattr(c, "id", None), dict))
    assert sorted(b.id["job"] for b in buttons) == [2, 3]
    assert all(b.id["type"] == "x-cancel" for b in buttons)
    text = str(panel)
    assert "5/10" in text and "ratio 0.5" in text and "10s" in text  # progress, now at, ETA


def test_jobs_panel_says_when_no_runner_is_there() -> None:
    panel = jobs_panel([_job(1, "queued")], now=0.0, runner_alive=False, cancel_type="x")
    assert "No job runner" in str(panel)


def test_running_walks_note_names_each_walk_and_whose_it_is() -> None:
    ours = new_claim("a" * 32, "t", "sha", "DTR", 60, [(250, 300), (400, 449)])
    theirs = new_claim("b" * 32, "t", "sha", "LRU", 30, [(500, 500)])
    theirs = dataclasses.replace(theirs, pid=ours.pid + 1, host="elsewhere")
    progress = {ours.walk_id: {"runs": 1234, "share": 0.5, "elapsed_s": 100.0}}
    note = running_walks_note(
        [ours, theirs], job_by_pid={ours.pid: 7}, peaks={"t": 1000}, progress=progress
    )
    items = [str(item.children) for item in _find(note, lambda c: type(c).__name__ == "Li")]
    assert len(items) == 2
    assert "DTR (cap 60 s): budgets 250..449 (ratios 0.2500-0.4490)" in items[0]
    assert "101 bytes in 2 gaps" in items[0] and items[0].endswith(
        "; 1,234 runs so far, 12.3 a second, 50.00% of its range; job #7"
    )
    assert "LRU (cap 30 s)" in items[1] and "1 byte in 1 gap;" in items[1]
    assert f"process {ours.pid + 1} on elsewhere" in items[1]
    assert items[1].endswith("; no progress note yet; started outside this dashboard")
    assert running_walks_note([], job_by_pid={}, peaks={}) is None
    assert "cannot be read just now" in str(running_walks_note(None, job_by_pid={}, peaks={}))
    linked = running_walks_note([theirs], job_by_pid={}, peaks={}, link_traces=True)
    (link,) = _find(linked, lambda c: type(c).__name__ == "Link")
    assert (link.children, link.href) == ("t", "/trace/t")


def test_large_strip_uses_webgl_and_one_band_per_execution() -> None:
    from app.components.strip import WEBGL_ABOVE

    n = WEBGL_ABOVE + 10
    runs = frame(
        [(100 + i % 20, "ok" if i % 2 else "oom") for i in range(n)],
        run_id=[f"r{i}" for i in range(n)],
        same_lo=[100 + i % 20 for i in range(n)],
        same_hi=[100 + i % 20 for i in range(n)],
    )
    fig = outcome_strip(runs)
    kinds = {t.type for t in fig.data if not t.name.startswith(BAND_PREFIX)}
    assert kinds == {"scattergl"}
    assert sum(len(t.customdata) for t in fig.data if t.type == "scattergl") == n
    assert sum(len(t.x) for t in fig.data if t.type == "bar") == 20  # distinct intervals


def walked(n: int, holes: list[tuple[int, int]]) -> pd.DataFrame:
    """A walked landscape of n executions, one per byte-wide interval at budgets 1000..:
    ok everywhere but oom in the [first, last] index ranges of `holes`. Ratios are of a
    peak of 10 x n, so every execution is a distinct point on the strip."""
    status = ["ok"] * n
    for first, last in holes:
        status[first : last + 1] = ["oom"] * (last - first + 1)
    budgets = [1000 + i for i in range(n)]
    runs = frame(
        list(zip(budgets, status, strict=True)),
        peak=[10 * n] * n,
        ratio=[None] * n,
        stage=["walk"] * n,
        peak_pinned=[100 + i % 7 for i in range(n)],
        depth_at_peak_pinned=[i % 3 for i in range(n)],
        overhead=[1.0 + (i % 50) / 10 if s == "ok" else None for i, s in enumerate(status)],
    )
    return runs


def test_a_walked_landscape_draws_stretches_and_thinned_markers() -> None:
    """30,000 executions: one band per stretch of one outcome (its hover counts them), at
    most MARKER_LIMIT markers with every run at a change of outcome among them, and a note
    saying what was drawn."""
    from app.components.strip import MARKER_LIMIT

    n = 30_000
    runs = walked(n, [(5_000, 5_009), (20_000, 26_000)])
    fig = outcome_strip(runs)
    bars = [t for t in fig.data if t.type == "bar"]
    assert sum(len(t.x) for t in bars) == 5  # ok, oom, ok, oom, ok
    oom = next(t for t in bars if t.name == BAND_PREFIX + "oom")
    assert sorted(oom.customdata) == ["r21000", "r6000"]  # each stretch's lowest execution
    assert any("10 executions" in text for text in oom.text)
    markers = [t for t in fig.data if t.type == "scattergl"]
    drawn = {run_id for t in markers for run_id in t.customdata}
    assert len(drawn) <= MARKER_LIMIT
    edges = {f"r{1000 + i}" for i in (4_999, 5_000, 5_009, 5_010, 19_999, 20_000, 26_000, 26_001)}
    assert edges <= drawn and {"r1000", f"r{1000 + n - 1}"} <= drawn
    (note,) = fig.layout.annotations
    assert f"of {n:,} runs drawn" in note.text and f"5 bands for {n:,} executions" in note.text


def test_a_few_intervals_stay_one_band_each() -> None:
    runs = walked(50, [(10, 12)])
    fig = outcome_strip(runs)
    assert sum(len(t.x) for t in fig.data if t.type == "bar") == 50
    assert not fig.layout.annotations


def test_scatter_draws_each_distinct_point_once_and_counts_its_runs() -> None:
    runs = walked(3_000, [(100, 199)])
    ok = scatters(pinned_vs_depth(runs, "depth_at_peak_pinned"))["ok"]
    points = set(zip(ok.x, ok.y, strict=True))
    assert len(ok.x) == len(points) == 21  # 3 depths x 7 pinned values
    assert any("more runs" in text for text in ok.text)


def test_a_long_overhead_curve_keeps_each_slice_lowest_and_highest() -> None:
    from app.components.charts import CURVE_LIMIT

    runs = walked(20_000, [])
    (curve,) = overhead_curve(runs).data
    assert len(curve.x) <= CURVE_LIMIT
    assert min(curve.y) == 1.0 and max(curve.y) == 5.9
    assert list(curve.x) == sorted(curve.x)


def test_exact_holes_in_the_facts_and_their_table() -> None:
    from app.components.summary import exact_hole_rows

    runs = walked(1_000, [(100, 109), (500, 699)])
    found = holes(runs, "DTR")
    assert [(h.first_fail_byte, h.last_fail_byte, h.width) for h in found.exact] == [
        (1100, 1109, 10),
        (1500, 1699, 200),
    ]
    walks = pd.DataFrame({"from_budget": [1000], "reached": [1999], "complete": [True]})
    text = dict(facts(found, len(runs), coverage(found, walks), 10_000))
    assert text["exact holes"] == "2, 210 failing bytes; widest 200 B at 0.150000..0.169900"
    # budgets 1000..1999 touch: one stretch, 1,000 of the useful range's 5,501 bytes
    assert text["exact coverage"] == (
        "0.1818 of 0.05..0.6 in 1 certified stretch; left: 0.0500..0.0999, 0.2000..0.6000; "
        "1 walk(s), 1 complete"
    )
    rows = exact_hole_rows(found.exact, 10_000)
    assert rows[1]["first_fail_id"] == "r1500"
    assert rows[1]["compare_href"] == "/compare?a=r1499&b=r1500"
    assert rows[1]["executions"] == 200
    found = holes(walked(10, []), "DTR")
    assert dict(facts(found, 10, coverage(found, walks), 100))["exact holes"] == (
        "none in the walked budgets"
    )
