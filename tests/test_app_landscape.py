"""Sampled holes (docs/DOMAIN.md, "Counting holes"), exact widths, coverage, neighbours."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path

import pandas as pd
import pytest

from app.components.charts import CHART_COLUMNS, DEPTH_COLUMNS, overhead_curve, pinned_vs_depth
from app.components.strip import STRIP_COLUMNS, outcome_strip
from app.landscape import HOLES_COLUMNS, coverage, holes, neighbours, with_x
from engine.landscape.store import Store
from engine.sim.simulate import run_point
from tests.helpers import cli
from tests.test_components import frame


def test_published_resnet32_shape() -> None:
    # ResNet-32: ok at 0.101, OOM at 0.102 ... 0.106, ok at 0.107 (budgets in per-mille here)
    runs = frame(
        [(100, "oom"), (101, "ok")] + [(b, "oom") for b in range(102, 107)] + [(107, "ok")]
    )
    found = holes(runs, "DTR")
    assert found.first_success is not None and found.first_success.budget == 101
    assert found.first_success.run_id == "r101"  # what a click opens
    assert found.failing_above_first_success == 5
    (region,) = found.regions
    assert (region.last_ok_below.budget, region.first_fail.budget) == (101, 102)
    assert (region.last_fail.budget, region.first_ok_above.budget) == (106, 107)
    assert region.failing_samples == 5 and region.first_fail.status == "oom"
    assert found.low_edge[0] is not None and found.low_edge[0].budget == 100
    assert found.stable_from is not None and found.stable_from.budget == 107


def test_timeouts_are_set_aside_and_never_split_a_region() -> None:
    runs = frame([(1, "ok"), (2, "oom"), (3, "timeout"), (4, "thrashed"), (5, "ok")])
    found = holes(runs, "DTR")
    assert found.timeouts == 1
    (region,) = found.regions
    assert region.failing_samples == 2 and region.last_fail.status == "thrashed"


def test_failing_top_has_no_stable_from_and_a_high_edge() -> None:
    found = holes(frame([(1, "ok"), (2, "ok"), (3, "oom")]), "DTR")
    assert found.stable_from is None and found.regions == []
    assert found.high_edge[0] is not None and found.high_edge[0].budget == 2
    assert found.high_edge[1] is not None and found.high_edge[1].budget == 3


def test_exact_width_from_the_intervals() -> None:
    chained = frame(
        [(10, "ok"), (20, "oom"), (30, "oom"), (40, "ok")],
        same_lo=[5, 15, 25, 36],
        same_hi=[14, 24, 35, 50],
    )
    (region,) = holes(chained, "DTR").regions
    assert region.exact_width == 21 and region.complete  # bytes 15..35, all classified
    gap = frame(
        [(10, "ok"), (20, "oom"), (30, "oom"), (40, "ok")],
        same_lo=[5, 15, 27, 36],
        same_hi=[14, 24, 35, 50],
    )
    (region,) = holes(gap, "DTR").regions
    assert region.exact_width == 21 and not region.complete  # both edges exact, 25..26 not
    loose = frame(
        [(10, "ok"), (20, "oom"), (30, "oom"), (40, "ok")],
        same_lo=[5, 16, 25, 36],
        same_hi=[14, 24, 35, 50],
    )
    assert holes(loose, "DTR").regions[0].exact_width is None  # the lower edge is not known


def test_only_comparable_ratio_given_runs_of_one_version_are_samples() -> None:
    base = [(1, "ok"), (2, "oom"), (3, "ok")]
    extra = [(2, "ok"), (2, "ok"), (2, "ok"), (2, "ok"), (2, "timeout"), (2, "ok")]
    runs = frame(
        base + extra,
        run_id=["r1", "r2", "r3", "cap", "retained", "excluded", "bytes", "timeout", "old"],
        cap=[60.0] * 3 + [10.0] + [60.0] * 5,
        retained=[""] * 4 + ["3131"] + [""] * 4,
        stage=[None] * 5 + ["excluded:host sleep"] + [None] * 3,
        ratio=[0.001, 0.002, 0.003, 0.002, 0.002, 0.002, None, 0.002, 0.002],
        trace_sha256=["sha-1"] * 8 + ["sha-0"],
        started_at=pd.to_datetime(
            [f"2026-01-01 00:00:0{i}" for i in range(8)] + ["2025-01-01 00:00:00"]
        ),
    )
    found = holes(runs, "DTR")
    # the oom at 2 stands: a newer timeout is set aside, and the ok rows at 2 are another cap,
    # a what-if, an excluded row, a run given in bytes and a run of an older trace version
    (region,) = found.regions
    assert region.first_fail.run_id == "r2" and found.timeouts == 1
    assert found.samples == 3 and found.other_versions == 1


def test_coverage_is_the_intervals_certified_stretches() -> None:
    """The dashboard's coverage is what `holes` and the report certify: touching intervals,
    whatever the walks table says (an interrupted or resumed walk "reached" less than its
    chunks certified: InceptionV4's card said 166 MB where the report said 0.94 of the range)."""
    runs = frame(
        [(10, "ok"), (21, "oom"), (40, "ok"), (50, "ok")],
        same_lo=[10, 21, 40, 50],
        same_hi=[20, 30, 45, None],
    )
    walks = pd.DataFrame({"from_budget": [10], "reached": [12], "complete": [False]})
    cov = coverage(holes(runs, "DTR"), walks)
    assert cov.stretches == [(10, 30), (40, 45), (50, None)]
    assert cov.walks == 1 and cov.complete == 0
    assert cov.gaps(0, 100) == [(0, 9), (31, 39), (46, 49)]
    assert cov.gaps(12, 47) == [(31, 39), (46, 47)] and cov.gaps(50, 60) == []
    # of 0.05..0.60 x 100 (bytes 5..60): 21 + 6 + 11 of 56
    assert cov.share(100) == pytest.approx(38 / 56)


def test_neighbours_are_in_the_runs_own_landscape() -> None:
    runs = frame(
        [(1, "ok"), (3, "ok"), (5, "oom"), (7, "ok"), (9, "ok")],
        cap=[60.0, 10.0, 60.0, 60.0, 60.0],
        retained=["", "", "", "3131", ""],
    )
    record = runs.iloc[2].to_dict()
    below, above = neighbours(runs, record)
    assert below is not None and below["budget"] == 1  # not the other cap's run at 3
    assert above is not None and above["budget"] == 9  # nor the what-if at 7
    assert neighbours(runs, runs.iloc[0].to_dict())[0] is None


def test_neighbours_take_the_newest_comparable_run_at_the_nearest_budget() -> None:
    """Budget 3 has an older and a newer run and one of another cap; the newest of the two
    comparable ones is the neighbour, even after the other cap's (newer still)."""
    runs = frame(
        [(1, "ok"), (3, "ok"), (3, "oom"), (3, "thrashed"), (5, "oom"), (8, "ok"), (9, "ok")],
        run_id=["a", "b", "c", "d", "e", "f", "g"],
        cap=[60.0, 60.0, 60.0, 10.0, 60.0, 10.0, 60.0],
    )
    below, above = neighbours(runs, runs.iloc[4].to_dict())
    assert below is not None and below["run_id"] == "c"
    assert above is not None and above["run_id"] == "g"


# -- agreement with `dtr-landscape holes` --------------------------------------------------------
GRID = [round(0.398 + i * 0.001, 3) for i in range(28)]  # 0.398 .. 0.425: two holes
ENV = {"DTR_LANDSCAPE_TRACES": ""}


def _add(store: Store, records: list[dict], at: datetime, **extra: object) -> list[str]:
    return store.add_runs(records, source="engine", started_at=at, **extra)


def _seed_mixed(db: Path) -> Store:
    """synthetic-mlp at cap 60, plus rows neither side may count as samples."""
    store = Store.open(db)
    t0 = datetime(2026, 1, 1)
    records = {r: run_point("synthetic-mlp", ratio=r) for r in GRID}
    _add(store, list(records.values()), t0, cap=60)
    # another cap: a thrash cap of 2 fails where 60 completes
    _add(store, [run_point("synthetic-mlp", ratio=r, cap=2) for r in GRID[::3]], t0, cap=2)
    later = t0 + timedelta(hours=1)
    inside = records[0.41]
    assert inside["status"] == "oom"
    # a newer timeout at a failing ratio, a what-if and an excluded row that complete there
    _add(store, [{**inside, "status": "timeout", "same_execution": None}], later, cap=60)
    _add(store, [{**inside, "status": "ok", "retained": [3]}], later, cap=60)
    _add(store, [{**inside, "status": "ok"}], later, cap=60, stage="excluded:killed")
    # runs given in bytes inside the first hole: not samples, but their intervals count
    lo, hi = records[0.403]["budget"], records[0.404]["budget"]
    _add(store, [run_point("synthetic-mlp", budget=b) for b in (lo + 1, hi - 1)], later, cap=60)
    return store


def _agree(db: Path) -> dict:
    done = cli("holes", "synthetic-mlp", "--policy", "DTR", "--db", str(db), "--json", env=ENV)
    assert done.returncode == 0, done.stderr
    theirs = json.loads(done.stdout)
    ours = holes(with_x(Store.open(db).runs("synthetic-mlp", "DTR")), "DTR")
    assert ours.samples == theirs["samples"] and ours.timeouts == theirs["timeouts_set_aside"]
    assert ours.first_success is not None
    assert ours.first_success.run_id == theirs["first_success"]["run_id"]
    assert ours.failing_above_first_success == len(theirs["failing_above"])
    assert ours.stable_from is not None
    assert ours.stable_from.run_id == theirs["stable_from"]["run_id"]
    keys = ("last_ok_below", "first_fail", "last_fail", "first_ok_above")
    assert [
        (
            tuple(getattr(r, k).run_id for k in keys),
            r.failing_samples,
            r.exact_width,
            r.complete,
        )
        for r in ours.regions
    ] == [
        (
            tuple(r["points"][k]["run_id"] for k in keys),
            r["failing_samples"],
            r["bytes"]["width"],
            r["bytes"]["complete"],
        )
        for r in theirs["regions"]
    ]
    return theirs


def test_agrees_with_the_holes_command_on_mixed_rows(tmp_path: Path) -> None:
    db = tmp_path / "landscape.duckdb"
    _seed_mixed(db)
    theirs = _agree(db)
    assert theirs["timeouts_set_aside"] == 1 and theirs["samples"] == len(GRID)
    assert [(r["first_fail"], r["last_fail"]) for r in theirs["regions"]] == [
        (0.404, 0.405),
        (0.407, 0.42),
    ]
    # the edges found exactly (runs given in bytes) give both regions exact widths
    done = cli("edges", "synthetic-mlp", "--db", str(db), "--json", env=ENV)
    assert done.returncode == 0, done.stderr
    theirs = _agree(db)
    assert all(r["bytes"]["width"] is not None for r in theirs["regions"])
    assert theirs["samples"] == len(GRID)  # the edge runs are not samples


def test_several_trace_versions(tmp_path: Path) -> None:
    """The command asks for a version; the dashboard shows the newest and says so."""
    db = tmp_path / "landscape.duckdb"
    store = _seed_mixed(db)
    newer = [{**run_point("synthetic-mlp", ratio=r), "trace_sha256": "f" * 64} for r in (0.3, 0.5)]
    _add(store, newer, datetime(2027, 1, 1), cap=60)
    done = cli("holes", "synthetic-mlp", "--db", str(db), "--json", env=ENV)
    assert done.returncode == 2 and "2 versions of synthetic-mlp" in done.stderr
    ours = holes(with_x(store.runs("synthetic-mlp", "DTR")), "DTR")
    assert ours.samples == 2 and ours.other_versions == 1 and ours.regions == []


def test_the_run_page_reads_only_the_neighbouring_budgets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`runs_beside` (what the run page reads) gives `neighbours` the answer the whole trace
    gives, for every stored run of a landscape mixing caps, what-ifs, exclusions, repeats and
    runs given in bytes."""
    from app import data

    db = tmp_path / "mixed.duckdb"
    store = _seed_mixed(db)
    monkeypatch.setenv("DTR_LANDSCAPE_DB", str(db))
    everything = with_x(store.runs("synthetic-mlp", "DTR"))
    checked = 0
    for record in everything.to_dict("records"):
        whole = neighbours(everything, record)
        beside = neighbours(data.runs_beside(record), record)
        assert [r and r["run_id"] for r in beside] == [r and r["run_id"] for r in whole]
        checked += whole[0] is not None and whole[1] is not None
    assert checked > 20


def test_a_card_from_its_columns_is_the_card_from_every_column(tmp_path: Path) -> None:
    """The overview reads only the columns its cards use (HOLES_COLUMNS, STRIP_COLUMNS), the
    trace page those and CHART_COLUMNS: the holes, the strip and the charts come out the
    same as from every column, on rows of every kind (other caps, a timeout, a what-if, an
    excluded row, runs given in bytes, exact edges and a walk)."""
    db = tmp_path / "landscape.duckdb"
    _seed_mixed(db)
    done = cli("edges", "synthetic-mlp", "--db", str(db), "--json", env=ENV)
    assert done.returncode == 0, done.stderr
    walk = ("landscape", "synthetic-mlp", "--from", "0.403", "--to", "0.406", "--db", str(db))
    done = cli(*walk, env=ENV)
    assert done.returncode == 0, done.stderr
    store = Store.open(db)
    columns = list(dict.fromkeys([*HOLES_COLUMNS, *STRIP_COLUMNS]))
    full = with_x(store.runs("synthetic-mlp", "DTR"))
    some = with_x(store.runs("synthetic-mlp", "DTR", columns))
    assert len(some.columns) < len(full.columns) - 20 and len(some) == len(full)
    assert holes(some, "DTR") == holes(full, "DTR")
    assert holes(some, "DTR").exact  # the walk gave exact holes to compare
    for markers in (1000, 5):  # every marker, and thinned
        figure = outcome_strip(some, markers=markers).to_json()
        assert figure == outcome_strip(full, markers=markers).to_json()
    # the trace page's views read the charts' columns too
    some = with_x(store.runs("synthetic-mlp", "DTR", [*columns, *CHART_COLUMNS]))
    for depth in DEPTH_COLUMNS:
        assert pinned_vs_depth(some, depth).to_json() == pinned_vs_depth(full, depth).to_json()
    assert overhead_curve(some).to_json() == overhead_curve(full).to_json()
    assert len(overhead_curve(full).data[0].x) > 10  # completing runs drawn


def test_imported_sources_by_column_equal_one_by_one() -> None:
    """`imported` reads a text column at once and anything else one value at a time; both
    answer as `is_imported` does for each value."""
    from app.landscape import imported, is_imported

    values = ["import:simrd", "engine", None, "walk", "import:", "IMPORT:x", float("nan")]
    as_text = pd.Series(values, dtype="str")
    as_objects = pd.Series([*values, 3, b"import:bytes"], dtype=object)
    assert pd.api.types.is_string_dtype(as_text.dtype)
    assert imported(as_text) == [is_imported(v) for v in as_text]
    assert imported(as_text) == [True, False, False, False, True, False, False]
    assert imported(as_objects) == [is_imported(v) for v in as_objects]
    assert imported(pd.Series([], dtype="str")) == []
