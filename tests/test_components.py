"""The pure builders: data in, figures and layouts out (no server, no store)."""

from __future__ import annotations

import pandas as pd
import pytest

from app.components.charts import operator_chart, overhead_curve, pinned_vs_depth
from app.components.jobs_panel import jobs_panel
from app.components.outcomes import COLORS, OUTCOMES, SYMBOLS
from app.components.strip import BAND_PREFIX, outcome_strip
from app.components.summary import facts, hole_rows
from app.jobs import Job
from app.landscape import coverage, holes, with_x

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
    text = dict(facts(found, 5, coverage(pd.DataFrame()), PEAK))
    assert text["first success"].startswith("0.4000")
    assert text["stable from"].startswith("0.5000")


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
