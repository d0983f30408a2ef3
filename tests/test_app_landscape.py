"""Sampled holes (docs/DOMAIN.md, "Counting holes"), exact widths, coverage, neighbours."""

from __future__ import annotations

import pandas as pd

from app.landscape import coverage, holes, neighbours, sampled
from tests.test_components import frame


def test_published_resnet32_shape() -> None:
    # ResNet-32: ok at 0.101, OOM at 0.102 ... 0.106, ok at 0.107 (budgets in per-mille here)
    runs = frame(
        [(100, "oom"), (101, "ok")] + [(b, "oom") for b in range(102, 107)] + [(107, "ok")]
    )
    found = holes(runs)
    assert found.first_success is not None and found.first_success.budget == 101
    assert found.failing_above_first_success == 5
    (region,) = found.regions
    assert (region.last_ok_below.budget, region.first_fail.budget) == (101, 102)
    assert (region.last_fail.budget, region.first_ok_above.budget) == (106, 107)
    assert region.failing_samples == 5
    assert found.low_edge[0] is not None and found.low_edge[0].budget == 100
    assert found.stable_from is not None and found.stable_from.budget == 107


def test_timeouts_are_set_aside_and_never_split_a_region() -> None:
    runs = frame([(1, "ok"), (2, "oom"), (3, "timeout"), (4, "thrashed"), (5, "ok")])
    found = holes(runs)
    assert found.timeouts == 1
    (region,) = found.regions
    assert region.failing_samples == 2 and region.last_fail.status == "thrashed"


def test_failing_top_has_no_stable_from_and_a_high_edge() -> None:
    found = holes(frame([(1, "ok"), (2, "ok"), (3, "oom")]))
    assert found.stable_from is None and found.regions == []
    assert found.high_edge[0] is not None and found.high_edge[0].budget == 2
    assert found.high_edge[1] is not None and found.high_edge[1].budget == 3


def test_exact_width_needs_chained_intervals() -> None:
    chained = frame(
        [(10, "ok"), (20, "oom"), (30, "oom"), (40, "ok")],
        same_lo=[5, 15, 25, 36],
        same_hi=[14, 24, 35, 50],
    )
    (region,) = holes(chained).regions
    assert region.exact_width == 21  # bytes 15..35
    gap = frame(
        [(10, "ok"), (20, "oom"), (30, "oom"), (40, "ok")],
        same_lo=[5, 15, 27, 36],
        same_hi=[14, 24, 35, 50],
    )
    assert holes(gap).regions[0].exact_width is None


def test_sampled_keeps_one_run_per_budget_and_drops_what_ifs() -> None:
    runs = frame([(1, "ok"), (1, "ok"), (2, "oom")], retained=["", "", "3131"])
    assert list(sampled(runs)["budget"]) == [1]


def test_coverage_merges_walks() -> None:
    walks = pd.DataFrame(
        {"from_budget": [10, 15, 40], "reached": [20, 30, 45], "complete": [True, False, True]}
    )
    cov = coverage(walks)
    assert cov.intervals == [(10, 30), (40, 45)] and cov.bytes == 27 and cov.complete == 2


def test_neighbours() -> None:
    runs = frame([(1, "ok"), (5, "oom"), (9, "ok")])
    below, above = neighbours(runs, 5)
    assert below is not None and below["budget"] == 1
    assert above is not None and above["budget"] == 9
    assert neighbours(runs, 1)[0] is None


def test_agrees_with_the_engines_holes_command(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Our pure function and `dtr-landscape holes` read the same store the same way."""
    import json

    from app.landscape import with_x
    from engine.landscape.store import Store
    from engine.sim.simulate import run_point
    from tests.helpers import cli

    db = tmp_path / "landscape.duckdb"
    store = Store.open(db)
    ratios = [0.36, 0.38, 0.40, 0.41, 0.415, 0.42, 0.43, 0.45, 0.5]
    store.add_runs([run_point("synthetic-mlp", ratio=r) for r in ratios], source="engine", cap=60)
    done = cli("holes", "synthetic-mlp", "--policy", "DTR", "--db", str(db), "--json")
    assert done.returncode == 0, done.stderr
    theirs = json.loads(done.stdout)
    ours = holes(with_x(store.runs("synthetic-mlp", "DTR")))
    assert ours.first_success is not None
    assert ours.first_success.budget == theirs["first_success"]["budget"]
    assert ours.failing_above_first_success == len(theirs["failing_above"])
    assert [
        (r.last_ok_below.budget, r.first_fail.budget, r.last_fail.budget, r.first_ok_above.budget)
        for r in ours.regions
    ] == [
        tuple(
            r["budgets"][k] for k in ("last_ok_below", "first_fail", "last_fail", "first_ok_above")
        )
        for r in theirs["regions"]
    ]
