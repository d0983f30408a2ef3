"""Counting holes and finding exact edges: the pure functions on small synthetic tables, then
`holes` and `edges` end to end on ResNet-32 against the paper's published hole."""

from __future__ import annotations

import json
import random
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from engine.landscape.holes import SAME_SETTINGS, Sample, comparable, count_holes
from engine.landscape.intervals import (
    Interval,
    bisect_edge,
    certified_bytes,
    covering,
    distinct_intervals,
    exact_range,
    find_edges,
    interval_edges,
    interval_holes,
)
from engine.landscape.report import markdown_table, summary_rows
from engine.landscape.report_check import inconsistencies, read_report
from engine.landscape.store import Store
from engine.landscape.walk import walk_landscape
from engine.sim.simulate import run_point
from tests.helpers import REPO, cli, cli_json


def _samples(table: str) -> list[Sample]:
    """'0.1 oom, 0.2 ok' -> samples (the budget is the ratio in thousandths)."""
    out = []
    for item in table.split(","):
        ratio, status = item.split()
        out.append(Sample(float(ratio), round(float(ratio) * 1000), status))
    return out


def _ratios(points: list[dict]) -> list[float]:
    return [p["ratio"] for p in points]


# -- count_holes -----------------------------------------------------------------------------
def test_regions_first_success_and_stable_from() -> None:
    report = count_holes(
        _samples(
            "0.1 oom, 0.2 thrashed, 0.3 ok, 0.4 oom, 0.5 oom, 0.6 ok, 0.7 ok, "
            "0.8 thrashed, 0.9 ok, 1.0 ok"
        )
    )
    assert report["first_success"]["ratio"] == 0.3
    assert _ratios(report["failing_above"]) == [0.4, 0.5, 0.8]
    assert [
        (r["last_ok_below"], r["first_fail"], r["last_fail"], r["first_ok_above"])
        for r in report["regions"]
    ] == [(0.3, 0.4, 0.5, 0.6), (0.7, 0.8, 0.8, 0.9)]
    assert report["regions"][0]["edge_brackets"] == [
        {"last_ok": 0.3, "first_fail": 0.4},
        {"last_fail": 0.5, "first_ok": 0.6},
    ]
    assert report["regions"][1]["budgets"] == {
        "last_ok_below": 700,
        "first_fail": 800,
        "last_fail": 800,
        "first_ok_above": 900,
    }
    assert report["stable_from"]["ratio"] == 0.9


def test_timeouts_are_set_aside_first() -> None:
    # the timeout at 0.5 neither splits the region nor closes it
    report = count_holes(_samples("0.3 ok, 0.4 oom, 0.5 timeout, 0.6 oom, 0.7 ok, 0.8 timeout"))
    assert report["timeouts_set_aside"] == 2 and report["samples"] == 4
    assert len(report["regions"]) == 1
    assert report["regions"][0]["first_fail"] == 0.4 and report["regions"][0]["last_fail"] == 0.6
    assert report["stable_from"]["ratio"] == 0.7


def test_failures_at_the_top_are_no_region_and_nothing_is_stable() -> None:
    report = count_holes(_samples("0.3 ok, 0.4 oom, 0.5 ok, 0.6 oom, 0.7 thrashed"))
    assert len(report["regions"]) == 1 and report["regions"][0]["first_ok_above"] == 0.5
    assert _ratios(report["failing_above"]) == [0.4, 0.6, 0.7]
    assert report["stable_from"] is None


def test_no_success_at_all() -> None:
    report = count_holes(_samples("0.1 oom, 0.2 oom"))
    assert report["first_success"] is None and report["failing_above"] == []
    assert report["regions"] == [] and report["stable_from"] is None
    assert count_holes([])["samples"] == 0


def test_a_repeated_ratio_counts_once() -> None:
    report = count_holes(_samples("0.3 ok, 0.4 oom, 0.4 oom, 0.5 ok"))
    assert report["samples"] == 3 and len(report["regions"]) == 1


# -- intervals -------------------------------------------------------------------------------
def _intervals(table: str) -> list[Interval]:
    """'0-9 ok, 10-19 oom, 30- ok' -> intervals (an open end: hi None)."""
    out = []
    for item in table.split(","):
        span, status = item.split()
        lo, _, hi = span.partition("-")
        out.append(Interval(int(lo), int(hi) if hi else None, status, run_id=span))
    return out


REGION = {"budgets": {"last_ok_below": 5, "first_fail": 12, "last_fail": 25, "first_ok_above": 35}}


def test_exact_range_of_a_fully_walked_hole() -> None:
    intervals = _intervals("0-9 ok, 10-19 oom, 20-29 thrashed, 30-39 ok, 40- ok")
    assert exact_range(REGION, intervals) == {
        "first_fail_byte": 10,
        "last_fail_byte": 29,
        "width": 20,
        "complete": True,
        "failing_bytes_known": 20,
        "ok_bytes_inside": 0,
    }


def test_exact_edges_with_a_gap_between_are_not_complete() -> None:
    intervals = _intervals("0-9 ok, 10-14 oom, 20-29 oom, 30-39 ok")
    exact = exact_range(REGION, intervals)
    assert (exact["first_fail_byte"], exact["last_fail_byte"], exact["width"]) == (10, 29, 20)
    assert not exact["complete"] and exact["failing_bytes_known"] == 15


def test_an_ok_stretch_inside_is_reported() -> None:
    intervals = _intervals("0-9 ok, 10-14 oom, 15-16 ok, 17-29 oom, 30-39 ok")
    exact = exact_range(REGION, intervals)
    assert exact["complete"] and exact["width"] == 20 and exact["ok_bytes_inside"] == 2


def test_an_edge_not_found_yet_is_null() -> None:
    # nothing touches the failing interval from below: the lower edge is somewhere in 6..9
    intervals = _intervals("0-5 ok, 10-29 oom, 30-39 ok")
    exact = exact_range(REGION, intervals)
    assert exact["first_fail_byte"] is None and exact["last_fail_byte"] == 29
    assert exact["width"] is None and not exact["complete"]


def test_interval_holes_need_touching_ok_on_both_sides() -> None:
    intervals = _intervals("0-9 oom, 10-19 ok, 20-24 oom, 25-29 oom, 30-39 ok, 41-50 oom, 51- ok")
    (hole,) = interval_holes(intervals)
    assert {k: hole[k] for k in ("first_fail_byte", "last_fail_byte", "width", "intervals")} == {
        "first_fail_byte": 20,
        "last_fail_byte": 29,
        "width": 10,
        "intervals": 2,
    }
    by_lo = {i.lo: i.run_id for i in intervals}
    assert hole["run_ids"] == {
        "ok_below": by_lo[10],
        "first_fail": by_lo[20],
        "last_fail": by_lo[25],
        "ok_above": by_lo[30],
    }


def test_distinct_intervals_covering_and_clipping() -> None:
    raw = _intervals("20-29 oom, 0-9 ok, 0-9 ok, 25-34 ok, 40- ok")
    intervals, conflicts = distinct_intervals(raw)
    assert [(i.lo, i.hi) for i in intervals] == [(0, 9), (20, 29), (40, None)]
    assert conflicts == 1  # 25-34 overlaps 20-29: counted, not merged
    assert covering(intervals, 0) == 0 and covering(intervals, 29) == 1
    assert covering(intervals, 10**15) == 2 and covering(intervals, 15) is None
    assert certified_bytes(intervals, 5, 44) == 5 + 10 + 5


# -- edges -----------------------------------------------------------------------------------
def _landscape(statuses: str, width: int = 7) -> list[Interval]:
    """A budget axis cut into intervals of `width` bytes, one status letter each."""
    names = {"k": "ok", "o": "oom", "t": "thrashed"}
    return [
        Interval(i * width, i * width + width - 1, names[c], run_id=str(i))
        for i, c in enumerate(statuses)
    ]


def _probe(axis: list[Interval], probed: list[int]) -> Callable[[int], Interval]:
    """The landscape's own answer for a budget (what a run would report), recording it."""

    def probe(budget: int) -> Interval:
        probed.append(budget)
        at = covering(axis, budget)
        assert at is not None
        return axis[at]

    return probe


@pytest.mark.parametrize(
    "statuses",
    ["ooooooooooooookkkkkkkk", "kkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkko", "kkkkttoooo"],
)
def test_bisection_finds_each_change_of_status(statuses: str) -> None:
    axis = _landscape(statuses)
    probed: list[int] = []
    edges = bisect_edge(axis[0], axis[-1], _probe(axis, probed))
    changes = [(a, b) for a, b in zip(axis, axis[1:], strict=False) if a.status != b.status]
    assert edges == changes
    for below, above in edges:
        assert below.hi is not None and below.hi + 1 == above.lo
    assert len(probed) <= 2 * len(statuses).bit_length() + 2  # logarithmic, not a scan


def test_find_edges_keeps_touching_pairs_and_skips_equal_neighbours() -> None:
    axis = _landscape("ookkkkkkkoooooookkkk")
    known = [axis[0], axis[1], axis[2], axis[12], axis[19]]  # touching ok|oom at 1|2
    probed: list[int] = []
    edges, bisected = find_edges(known, _probe(axis, probed))
    assert [(a.run_id, b.run_id) for a, b in edges] == [("1", "2"), ("8", "9"), ("15", "16")]
    assert bisected == 2
    assert not any(axis[0].lo <= b <= axis[1].hi for b in probed)


# -- ResNet-32: the paper's hole, sampled and then exact ----------------------------------------
RATIOS = [round(0.095 + i * 0.001, 3) for i in range(16)]  # 0.095 .. 0.110


def test_resnet32_hole_sampled_then_exact(traces_dir: Path, tmp_path: Path) -> None:
    db = tmp_path / "landscape.duckdb"
    env = {"DTR_LANDSCAPE_TRACES": str(traces_dir)}
    records = [run_point("resnet32", ratio=r, traces=traces_dir) for r in RATIOS]
    Store.open(db).add_runs(records, source="engine", cap=60)

    holes = cli_json("holes", "resnet32", "--db", str(db), "--json", env=env)
    assert [
        {k: r[k] for k in ("last_ok_below", "first_fail", "last_fail", "first_ok_above")}
        for r in holes["regions"]
    ] == [
        {"last_ok_below": 0.101, "first_fail": 0.102, "last_fail": 0.106, "first_ok_above": 0.107}
    ]
    assert holes["stable_from"]["ratio"] == 0.107 and holes["samples"] == 16

    found = cli_json("edges", "resnet32", "--db", str(db), "--json", env=env)
    edges = found["edges"]
    budgets = holes["regions"][0]["budgets"]
    assert found["runs_executed"] > 0
    for edge in edges:
        below, above = edge["below"], edge["above"]
        assert below["hi"] + 1 == above["lo"] and below["status"] != above["status"]
        for budget, side in ((below["hi"], below), (above["lo"], above)):
            again = run_point("resnet32", budget=budget, traces=traces_dir)
            assert again["status"] == side["status"]
            assert again["same_execution"] == {"lo": side["lo"], "hi": side["hi"]}
    into = [
        e for e in edges if budgets["last_ok_below"] <= e["below"]["hi"] < budgets["first_fail"]
    ]
    out = [e for e in edges if budgets["last_fail"] <= e["below"]["hi"] < budgets["first_ok_above"]]
    assert [(e["below"]["status"], e["above"]["status"]) for e in into] == [("ok", "oom")]
    assert [(e["below"]["status"], e["above"]["status"]) for e in out] == [("oom", "ok")]
    store = Store.open(db)
    stages = store.query("SELECT stage, count(*) AS n FROM runs GROUP BY stage ORDER BY stage")
    assert dict(zip(stages["stage"].fillna("-"), stages["n"], strict=True)) == {
        "-": 16,
        "edge": found["runs_executed"],
    }
    walk = store.query("SELECT * FROM walks WHERE walk_id = ?", [found["walk_id"]]).iloc[0]
    assert walk["kind"] == "edges" and bool(walk["complete"])

    # With the edges stored, the hole's bytes are exact (a walk between them would complete
    # it: 262 runs over mostly tiny intervals, so that is checked on synthetic-mlp below).
    exact = cli_json("holes", "resnet32", "--db", str(db), "--json", env=env)["regions"][0]["bytes"]
    first, last = into[0]["above"]["lo"], out[0]["below"]["hi"]
    assert (exact["first_fail_byte"], exact["last_fail_byte"]) == (first, last)
    assert exact["width"] == last - first + 1 and not exact["complete"]


# -- synthetic-mlp: holes made complete by a walk ----------------------------------------------
def test_synthetic_hole_becomes_complete(tmp_path: Path) -> None:
    db = tmp_path / "landscape.duckdb"
    env = {"DTR_LANDSCAPE_CACHE": str(tmp_path / "cache"), "DTR_LANDSCAPE_TRACES": ""}
    ratios = [round(0.398 + i * 0.001, 3) for i in range(28)]  # 0.398 .. 0.425
    store = Store.open(db)
    store.add_runs([run_point("synthetic-mlp", ratio=r) for r in ratios], source="engine", cap=60)
    holes = cli_json("holes", "synthetic-mlp", "--db", str(db), "--json", env=env)
    assert [
        (r["last_ok_below"], r["first_fail"], r["last_fail"], r["first_ok_above"])
        for r in holes["regions"]
    ] == [(0.403, 0.404, 0.405, 0.406), (0.406, 0.407, 0.42, 0.421)]
    assert holes["first_success"]["ratio"] == 0.4 and holes["stable_from"]["ratio"] == 0.421
    assert all(r["bytes"]["first_fail_byte"] is None for r in holes["regions"])

    cli_json("edges", "synthetic-mlp", "--db", str(db), "--json", env=env)
    region = cli_json("holes", "synthetic-mlp", "--db", str(db), "--json", env=env)["regions"][0]
    first, last = region["bytes"]["first_fail_byte"], region["bytes"]["last_fail_byte"]
    assert first is not None and last is not None and not region["bytes"]["complete"]

    walk = walk_landscape(store, "synthetic-mlp", start=first, end=last)
    assert walk["complete"] and {i["status"] for i in walk["intervals"]} == {"oom"}
    final = cli_json("holes", "synthetic-mlp", "--db", str(db), "--json", env=env)
    assert final["regions"][0]["bytes"] == {
        "first_fail_byte": first,
        "last_fail_byte": last,
        "width": last - first + 1,
        "complete": True,
        "failing_bytes_known": last - first + 1,
        "ok_bytes_inside": 0,
    }
    assert {"first_fail_byte": first, "last_fail_byte": last, "width": last - first + 1} in [
        {k: h[k] for k in ("first_fail_byte", "last_fail_byte", "width")}
        for h in final["interval_holes"]
    ]


# -- holes --all: the report over every stored trace ---------------------------------------------
def test_all_holes_report_walked_landscape(tmp_path: Path) -> None:
    """After an exact walk, `holes --all` lists the trace's executions, the stretch the walk
    certified, and each hole with its exact bytes and the runs on both sides of it."""
    db = tmp_path / "landscape.duckdb"
    env = {"DTR_LANDSCAPE_CACHE": str(tmp_path / "cache"), "DTR_LANDSCAPE_TRACES": ""}
    peak = run_point("synthetic-mlp", ratio=1.0)["peak"]
    start, end = int(0.398 * peak), int(0.425 * peak)
    walk = walk_landscape(Store.open(db), "synthetic-mlp", start=start, end=end)
    assert walk["complete"]
    report = cli_json("holes", "--all", "--db", str(db), "--json", env=env)
    (trace,) = report["traces"]
    assert trace["trace"] == "synthetic-mlp" and trace["executions"] == walk["runs_executed"]
    (stretch,) = trace["certified"]  # one walk, every interval touching the next
    assert stretch["from_budget"] <= start and (stretch["to_budget"] or end) >= end
    holes = trace["holes"]
    assert len(holes) >= 2 and "published" not in trace  # not a trace of the paper's table
    runs = {
        r["run_id"]: r
        for r in Store.open(db)
        .query("SELECT run_id, status, same_lo, same_hi FROM runs")
        .to_dict("records")
    }
    for hole in holes:
        ids = hole["run_ids"]
        below, above = runs[ids["ok_below"]], runs[ids["ok_above"]]
        assert below["status"] == above["status"] == "ok"
        assert below["same_hi"] + 1 == hole["first_fail_byte"] == runs[ids["first_fail"]]["same_lo"]
        assert above["same_lo"] - 1 == hole["last_fail_byte"] == runs[ids["last_fail"]]["same_hi"]
        assert hole["width"] == hole["last_fail_byte"] - hole["first_fail_byte"] + 1
    # what the walk cost: its runs' own seconds, summed (each is stored with the run)
    seconds = Store.open(db).query("SELECT sum(wall_s) AS s FROM runs")["s"][0]
    assert trace["runs_stored"] == walk["runs_executed"]
    # to the ms: half a ms off at most, and a sum ending in exactly half a ms (0.0325 rounded
    # to 0.033 in a CI run) is that far off give or take the floats' last bit
    assert trace["run_seconds"] == pytest.approx(seconds, abs=5e-4 + 1e-9) and seconds > 0
    table = cli("holes", "--all", "--markdown", "--db", str(db), env=env).stdout
    assert "| synthetic-mlp |" in table and f"| {len(holes):,} |" in table
    assert table.splitlines()[2].endswith(" s |")  # the run time, in seconds
    # the one trace's text report says what the walk found, not only its (absent) samples
    text = cli("holes", "synthetic-mlp", "--db", str(db), env=env).stdout.splitlines()
    assert text[0].startswith("synthetic-mlp DTR: 0 samples")
    # and where the walked bytes first complete and stay complete, to the byte
    ordered = sorted(runs.values(), key=lambda r: r["same_lo"])
    first_ok = next(k for k, r in enumerate(ordered) if r["status"] == "ok")
    assert first_ok > 0 and ordered[0]["status"] != "ok"  # the walk starts below it, failing
    last_fail = max(k for k, r in enumerate(ordered) if r["status"] != "ok")
    fails_from = last_fail  # the failing executions right below the stable stretch
    while fails_from > 0 and ordered[fails_from - 1]["status"] != "ok":
        fails_from -= 1
    one = cli_json("holes", "synthetic-mlp", "--db", str(db), "--json", env=env)
    assert one["exact_first_success"] == {
        "byte": ordered[first_ok]["same_lo"],
        "run_id": ordered[first_ok]["run_id"],
        "failing_from": ordered[0]["same_lo"],
    }
    stable = ordered[last_fail + 1]
    assert one["exact_stable_from"] == {
        "byte": stable["same_lo"],
        "run_id": stable["run_id"],
        "to": ordered[-1]["same_hi"],
        "failing_from": ordered[fails_from]["same_lo"],  # the walk's intervals all touch
    }
    top = "no upper end" if ordered[-1]["same_hi"] is None else f"{ordered[-1]['same_hi']:,}"
    assert text[1] == (
        f"synthetic-mlp DTR: {walk['runs_executed']:,} distinct executions (intervals), "
        f"{len(holes)} exact holes; first success {ordered[first_ok]['same_lo']:,} (every "
        f"byte from {ordered[0]['same_lo']:,} below it fails); stable from "
        f"{stable['same_lo']:,} (every byte from {ordered[fails_from]['same_lo']:,} below it "
        f"fails), every byte to {top} completes"
    )
    assert text[2:] == [
        f"  fail [{h['first_fail_byte']:,}, {h['last_fail_byte']:,}] {h['width']:,} bytes "
        f"({h['intervals']:,} execution{'s' if h['intervals'] != 1 else ''}) | ok below "
        f"{h['run_ids']['ok_below']}, "
        f"ok above {h['run_ids']['ok_above']}"
        for h in holes
    ]


def test_update_puts_a_stores_traces_into_a_report(tmp_path: Path) -> None:
    """`holes --all --update REPORT`: a walk's store put into a copy of the published report,
    its trace added, then replaced after a longer walk; every other entry as it was; the file
    is a report `check-report` reads; a refused update leaves it byte for byte as it was."""
    db = tmp_path / "landscape.duckdb"
    env = {"DTR_LANDSCAPE_CACHE": str(tmp_path / "cache"), "DTR_LANDSCAPE_TRACES": ""}
    report = tmp_path / "landscapes.json"
    shutil.copy(REPO / "docs" / "landscapes.json", report)
    published = json.loads(report.read_text(encoding="utf-8"))
    peak = run_point("synthetic-mlp", ratio=1.0)["peak"]
    walk_landscape(Store.open(db), "synthetic-mlp", start=int(0.398 * peak), end=int(0.41 * peak))
    (stored,) = cli_json("holes", "--all", "--db", str(db), "--json", env=env)["traces"]

    def update(*args: str) -> tuple[str, str]:
        done = cli("holes", "--all", "--update", str(report), "--db", str(db), *args, env=env)
        assert done.returncode == 0, done.stderr
        return done.stdout, done.stderr

    out, said = update("--json")
    merged = json.loads(report.read_text(encoding="utf-8"))
    assert json.loads(out) == merged
    names = sorted([t["trace"] for t in published["traces"]] + ["synthetic-mlp"])
    assert [t["trace"] for t in merged["traces"]] == names
    assert [t for t in merged["traces"] if t["trace"] != "synthetic-mlp"] == published["traces"]
    assert merged["traces"][names.index("synthetic-mlp")] == stored
    share = summary_rows({"traces": [stored]})[0]["certified_share"]
    assert 0 < share < 0.1 and said == (
        f"{report}: synthetic-mlp: added; {stored['executions']:,} executions, certified "
        f"{share:.4f}, {len(stored['holes'])} hole{'' if len(stored['holes']) == 1 else 's'}\n"
    )
    again = read_report(report)
    assert (again.policy, again.cap, len(again.traces)) == ("DTR", 60, 9)
    assert all(inconsistencies(t) == [] for t in again.traces)

    # a longer walk into the same store: the entry is replaced, and the table is the new one's
    walk_landscape(Store.open(db), "synthetic-mlp", start=int(0.398 * peak), end=int(0.425 * peak))
    (longer,) = cli_json("holes", "--all", "--db", str(db), "--json", env=env)["traces"]
    assert longer["executions"] > stored["executions"]
    out, said = update("--markdown")
    merged = json.loads(report.read_text(encoding="utf-8"))
    assert merged["traces"][names.index("synthetic-mlp")] == longer
    assert [t for t in merged["traces"] if t["trace"] != "synthetic-mlp"] == published["traces"]
    assert out.rstrip("\n") == markdown_table(merged) and out.count("| synthetic-mlp |") == 1
    assert (
        said.startswith(
            f"{report}: synthetic-mlp: replaced; was {stored['executions']:,} executions"
        )
        and f"now {longer['executions']:,} executions" in said
    )

    # refused, each with its reason in one line, the report untouched
    before = report.read_bytes()
    other_version = json.loads(before)
    other_version["traces"][names.index("synthetic-mlp")]["trace_sha256"] = "ab" * 32
    twice = json.loads(before)
    twice["traces"].append(twice["traces"][names.index("synthetic-mlp")])
    Store.open(tmp_path / "empty.duckdb")
    refusals = [
        (
            ["--policy", "LRU"],
            None,
            f"{report}: its runs are policy DTR, cap 60; the runs asked of the store are "
            "policy LRU, cap 60 (--policy, --cap)",
        ),
        (
            ["--cap", "30"],
            None,
            f"{report}: its runs are policy DTR, cap 60; the runs asked of the store are "
            "policy DTR, cap 30 (--policy, --cap)",
        ),
        (
            [],
            other_version,
            f"{report}: traces[{names.index('synthetic-mlp')}] (synthetic-mlp) was made from the "
            f"trace of SHA-256 {'ab' * 32}; the store's runs are of {longer['trace_sha256']}",
        ),
        (
            [],
            twice,
            f"{report}: traces[{names.index('synthetic-mlp')}] and traces[9] are both "
            "synthetic-mlp: which one to replace?",
        ),
        ([], "{", f"{report}: not JSON"),
        (
            ["--db", str(tmp_path / "empty.duckdb")],
            None,
            f"the store holds no runs of policy DTR, cap 60: nothing to put in {report}",
        ),
    ]
    for args, content, message in refusals:
        if content is not None:
            report.write_text(
                content if isinstance(content, str) else json.dumps(content), encoding="utf-8"
            )
        kept = report.read_bytes()
        done = cli("holes", "--all", "--update", str(report), "--db", str(db), *args, env=env)
        assert done.returncode == 2 and message in done.stderr, (args, done.stderr)
        assert done.stderr.count("\n") == 1 and done.stdout == ""
        assert report.read_bytes() == kept
        report.write_bytes(before)
    done = cli("holes", "synthetic-mlp", "--update", str(report), "--db", str(db), env=env)
    assert done.returncode == 2 and "--update goes with --all" in done.stderr
    assert report.read_bytes() == before and not list(tmp_path.glob(".*.tmp"))


def test_all_holes_compares_with_the_paper(tmp_path: Path, traces_dir: Path) -> None:
    """ResNet-32 walked over 0.095-0.110: the paper's samples (ok 0.101, oom 0.102 and 0.106,
    ok 0.107) each fall in an interval of their published status, the paper's region holds
    the exact 44,998,960-byte hole, and the holes its samples do not reach are listed apart."""
    db = tmp_path / "landscape.duckdb"
    env = {"DTR_LANDSCAPE_CACHE": str(tmp_path / "cache"), "DTR_LANDSCAPE_TRACES": str(traces_dir)}
    cli_json(
        "landscape",
        "resnet32",
        "--from",
        "0.095",
        "--to",
        "0.110",
        "--db",
        str(db),
        "--json",
        env=env,
    )
    (trace,) = cli_json("holes", "--all", "--db", str(db), "--json", env=env)["traces"]
    (region,) = trace["published"]["regions"]
    assert region["agrees"] and all(s["agrees"] for s in region["samples"])
    assert [s["exact_status"] for s in region["samples"]] == ["ok", "oom", "oom", "ok"]
    # between the paper's brackets: its hole, and four of 128 bytes just above its last
    # failing sample (0.106) that no sample separates from it
    widths = [h["width"] for h in region["exact_holes"]]
    assert widths[0] == 44_998_960 and widths[1:] == [128] * 4
    unseen = trace["published"]["holes_not_in_paper"]
    assert len(unseen) == len(trace["holes"]) - 1 and all(h["width"] < 10**5 for h in unseen)


def test_all_holes_bad_arguments(tmp_path: Path) -> None:
    for args in (["holes"], ["holes", "resnet32", "--all"], ["holes", "x", "--markdown"]):
        done = cli(*args, "--db", str(tmp_path / "x.duckdb"))
        assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr


def test_same_settings_sql_and_comparable_choose_the_same_rows(tmp_path: Path) -> None:
    """The walks read stored intervals with the SQL, the samples are chosen in Python."""
    store = Store.open(tmp_path / "landscape.duckdb")
    variants = [
        {"policy": "DTR", "cap": 60.0},
        {"policy": "LRU", "cap": 60.0},
        {"policy": "DTR", "cap": 10.0},
        {"policy": "DTR", "cap": None},
        {"policy": "DTR", "cap": 60.0, "retained": "3131"},
        {"policy": "DTR", "cap": 60.0, "retained": None},
        {"policy": "DTR", "cap": 60.0, "stage": "excluded:host sleep"},
        {"policy": "DTR", "cap": 60.0, "stage": "walk"},
    ]
    store.add_rows("runs", [{"run_id": f"r{i}", **v} for i, v in enumerate(variants)])
    by_sql = store.query(f"SELECT run_id FROM runs WHERE {SAME_SETTINGS}", ["DTR", 60.0])
    rows = store.query("SELECT * FROM runs").to_dict("records")
    assert sorted(by_sql["run_id"]) == sorted(r["run_id"] for r in rows if comparable(r, "DTR", 60))
    assert sorted(by_sql["run_id"]) == ["r0", "r5", "r7"]


# -- select over a DataFrame (column-wise) equals select over its rows ------------------------
def _random_runs(seed: int, n: int = 300, walked: bool = False) -> list[dict]:
    import random

    import pandas as pd

    rng = random.Random(seed)
    rows = []
    for _ in range(n):
        dated = rng.random() < 0.8
        lo = rng.randrange(0, 2_000) if rng.random() < 0.9 else None
        hi = None if lo is None or rng.random() < 0.1 else lo + rng.randrange(50)
        if walked and lo is not None:  # a walk's executions: disjoint, repeats share theirs
            slot = lo % 20
            lo, hi = 100 * slot, None if slot == 19 else 100 * slot + 60 + slot % 7
        rows.append(
            {
                # dated runs always have an id (the store's do); undated ones may not
                "run_id": f"r{rng.randrange(n // 2)}" if dated or rng.random() < 0.7 else None,
                "trace_sha256": rng.choice(["sha-a", "sha-a", "sha-b", None]),
                "policy": rng.choice(["DTR", "DTR", "DTR", "MSPS"]),
                "cap": rng.choice([60.0, 60.0, 10.0, float("nan")]),
                "retained": rng.choice(["", "", None, "3131"]),
                "stage": rng.choice([None, "walk", "sweep", "excluded:by hand"]),
                # few distinct times: ties, broken by run id, then by row order
                "started_at": pd.Timestamp("2026-01-01") + pd.Timedelta(seconds=rng.randrange(40))
                if dated
                else pd.NaT,
                "ratio": rng.choice([None, round(rng.random(), 3)]),
                "budget": rng.choice([None, rng.randrange(10**6)]),
                "status": rng.choice(["ok", "ok", "oom", "thrashed", "timeout", "recursion"]),
                "overhead": rng.choice([None, 1.0 + rng.random()]),
                "same_lo": lo,
                "same_hi": hi,
            }
        )
    return rows


@pytest.mark.parametrize("seed", range(12))
def test_select_over_a_frame_equals_select_over_its_rows(seed: int) -> None:
    import pandas as pd

    from engine.landscape.holes import TraceVersionsError, select

    # odd seeds: a walked landscape's disjoint intervals; even ones overlap (conflicts)
    frame = pd.DataFrame(_random_runs(seed, walked=seed % 2 == 1))
    rows = frame.to_dict("records")  # the row-wise code, on the values the frame holds
    compared = conflicts = tables = 0
    for policy, cap in (("DTR", 60.0), ("DTR", 10.0), ("MSPS", 60.0)):
        for kwargs in ({"newest_version": True}, {"trace_sha256": "sha-b"}, {}):
            try:
                by_rows = select(rows, policy=policy, cap=cap, **kwargs)  # type: ignore[arg-type]
            except TraceVersionsError as exc:
                with pytest.raises(TraceVersionsError) as raised:
                    select(frame, policy=policy, cap=cap, **kwargs)  # type: ignore[arg-type]
                assert raised.value.versions == exc.versions
                continue
            by_columns = select(frame, policy=policy, cap=cap, **kwargs)  # type: ignore[arg-type]
            assert by_columns == by_rows
            # a walk's disjoint intervals stay columns (engine/landscape/interval_table.py)
            tables += type(by_columns.intervals).__name__ == "IntervalTable"
            compared += bool(by_rows.intervals and by_rows.samples)
            conflicts += by_rows.conflicting_intervals
    assert compared >= 3  # cases that select something (others raise TraceVersionsError)
    assert (conflicts == 0) == (seed % 2 == 1)  # both ways of `frame_intervals` are taken
    assert tables > 0 or seed % 2 == 0


def _exact_range_by_bytes(region: dict, intervals: list[Interval]) -> dict:
    """exact_range's definition written another way: edges as the lowest and highest of all
    qualifying touching pairs, and the bytes counted one by one."""
    b = region["budgets"]
    pairs = [
        (x, y)
        for x, y in zip(intervals, intervals[1:], strict=False)
        if x.hi is not None and x.hi + 1 == y.lo
    ]
    firsts = [
        y.lo
        for x, y in pairs
        if x.status == "ok"
        and y.status != "ok"
        and b["last_ok_below"] <= x.hi
        and y.lo <= b["first_fail"]
    ]
    lasts = [
        x.hi
        for x, y in pairs
        if x.status != "ok"
        and y.status == "ok"
        and b["last_fail"] <= x.hi
        and y.lo <= b["first_ok_above"]
    ]
    first, last = (min(firsts) if firsts else None), (max(lasts) if lasts else None)
    lo = b["first_fail"] if first is None else first
    hi = b["last_fail"] if last is None else last
    status = {}
    for i in intervals:
        for byte in range(max(i.lo, lo), (hi if i.hi is None else min(i.hi, hi)) + 1):
            status[byte] = i.status
    failing_bytes = sum(1 for s in status.values() if s != "ok")
    ok_bytes = sum(1 for s in status.values() if s == "ok")
    width = None if first is None or last is None else last - first + 1
    return {
        "first_fail_byte": first,
        "last_fail_byte": last,
        "width": width,
        "complete": width is not None and failing_bytes + ok_bytes == width,
        "failing_bytes_known": failing_bytes,
        "ok_bytes_inside": ok_bytes,
    }


def _random_region(rng: random.Random, top: int) -> dict:
    """A sampled failure region's four budgets, drawn below `top`, in order."""
    below, fail, last, above = sorted(rng.sample(range(0, top), 4))
    return {
        "budgets": {
            "last_ok_below": below,
            "first_fail": fail,
            "last_fail": last,
            "first_ok_above": above,
        }
    }


@pytest.mark.parametrize("seed", range(20))
def test_exact_range_equals_its_definition_by_bytes(seed: int) -> None:
    import random

    rng = random.Random(seed)
    intervals, at = [], 0
    while at < 1500:
        at += rng.choice([0, 0, 0, 1, 7])  # mostly touching, sometimes a gap
        width = rng.randrange(1, 40)
        status = rng.choice(["ok", "ok", "oom", "thrashed"])
        intervals.append(Interval(lo=at, hi=at + width - 1, status=status))
        at += width
    if rng.random() < 0.5:
        intervals.append(Interval(lo=at, hi=None, status="ok"))
    for _ in range(30):
        region = _random_region(rng, 1600)
        assert exact_range(region, intervals) == _exact_range_by_bytes(region, intervals)


def test_interval_edges_first_success_and_stable_from() -> None:
    """The walked first success and stable-from (with the top it holds to), each with the
    failing bytes right below it that prove it to the byte; a gap or a timeout ends a stretch,
    and the edge is then an upper bound only."""
    runs = [(0, 9, "oom"), (10, 19, "thrashed"), (20, 29, "ok"), (30, 39, "oom"), (40, 49, "ok")]
    intervals = [Interval(lo, hi, status, run_id=f"r{lo}") for lo, hi, status in runs]
    assert interval_edges(intervals) == {
        "first_success": {"byte": 20, "run_id": "r20", "failing_from": 0},
        "stable_from": {"byte": 40, "run_id": "r40", "to": 49, "failing_from": 30},
    }
    above = [*intervals, Interval(50, None, "ok", run_id="r50")]  # every larger budget
    assert interval_edges(above)["stable_from"] == {
        "byte": 40,
        "run_id": "r40",
        "to": None,
        "failing_from": 30,
    }
    gapped = [Interval(0, 9, "oom"), Interval(11, 19, "ok"), Interval(21, 30, "ok")]
    assert interval_edges(gapped) == {
        "first_success": {"byte": 11, "run_id": None, "failing_from": None},  # 10 unknown
        "stable_from": {"byte": 21, "run_id": None, "to": 30, "failing_from": None},  # 20 too
    }
    timed_out = [Interval(0, 9, "oom"), Interval(10, 19, "timeout"), Interval(20, 29, "ok")]
    assert interval_edges(timed_out) == {  # a timeout says nothing of its bytes
        "first_success": {"byte": 20, "run_id": None, "failing_from": None},
        "stable_from": {"byte": 20, "run_id": None, "to": 29, "failing_from": None},
    }
    assert interval_edges([*intervals, Interval(50, 59, "oom")])["stable_from"] is None
    assert interval_edges([Interval(0, 9, "oom")]) == {"first_success": None, "stable_from": None}
    assert interval_edges([]) == {"first_success": None, "stable_from": None}


def _edges_by_bytes(intervals: list[Interval], beyond: int) -> dict:
    """interval_edges' definition byte by byte (an unbounded interval counted up to `beyond`)."""
    status = {
        b: i.status for i in intervals for b in range(i.lo, beyond if i.hi is None else i.hi + 1)
    }
    ok = [b for b in sorted(status) if status[b] == "ok"]

    def failing_from(edge: int) -> int | None:
        below = edge
        while below - 1 in status and status[below - 1] in ("oom", "thrashed"):
            below -= 1
        return below if below < edge else None

    first = None
    if ok:
        first = {"byte": ok[0], "failing_from": failing_from(ok[0])}
    stable = None
    top = max(status, default=None)
    if top is not None and status[top] == "ok":
        start = top
        while start - 1 in status and status[start - 1] == "ok":
            start -= 1
        unbounded = intervals[-1].hi is None
        stable = {
            "byte": start,
            "to": None if unbounded else top,
            "failing_from": failing_from(start),
        }
    return {"first_success": first, "stable_from": stable}


@pytest.mark.parametrize("seed", range(20))
def test_interval_edges_equal_their_definition_by_bytes(seed: int) -> None:
    import random

    rng = random.Random(seed)
    intervals, at = [], rng.choice([0, 5])
    while at < 600:
        at += rng.choice([0, 0, 0, 1, 7])  # mostly touching, sometimes a gap
        width = rng.randrange(1, 30)
        low, high = ["ok", "oom", "oom", "thrashed", "timeout"], ["ok", "ok", "oom", "timeout"]
        status = rng.choice(low if at < 300 else high)
        intervals.append(Interval(lo=at, hi=at + width - 1, status=status))
        at += width
    if rng.random() < 0.5:
        intervals.append(Interval(lo=at, hi=None, status=rng.choice(["ok", "oom"])))
    found = interval_edges(intervals)
    for edge in found.values():
        if edge is not None:
            assert edge.pop("run_id") is None
    assert found == _edges_by_bytes(intervals, beyond=at + 40)


def _random_intervals(seed: int, n: int) -> list[Interval]:
    """Sorted, disjoint intervals: mostly touching, some gaps, every status, runs of one
    class long and short, sometimes an open last one (what a walk stores)."""
    import random

    rng = random.Random(seed)
    statuses = ["ok", "oom", "thrashed", "timeout"]
    intervals, at, status = [], rng.choice([0, 3]), "oom"
    for k in range(n):
        at += rng.choice([0, 0, 0, 0, 1, 9])
        if rng.random() < 0.3:
            status = rng.choice(statuses)
        width = rng.randrange(1, 20)
        overhead = rng.choice([None, 1.0 + rng.random()]) if status == "ok" else None
        intervals.append(Interval(at, at + width - 1, status, overhead, f"r{k}"))
        at += width
    if n and rng.random() < 0.5:
        last = intervals.pop()
        intervals.append(Interval(last.lo, None, last.status, last.overhead, last.run_id))
    return intervals


@pytest.mark.parametrize("seed", range(30))
def test_interval_table_scans_equal_the_lists(seed: int) -> None:
    """What `select` gives for a DataFrame (an IntervalTable) answers every scan of the
    hole report from its columns exactly as the list of the same Intervals does."""
    import random

    from engine.landscape.interval_table import IntervalTable
    from engine.landscape.intervals import statuses_in, stretches, touching_runs

    intervals = _random_intervals(seed, n=[0, 1, 2, 5, 40, 300][seed % 6])
    table = IntervalTable.of(intervals)
    assert len(table) == len(intervals)
    assert table == intervals and intervals == table and list(table) == intervals
    assert table[-1:] == intervals[-1:] and table[3:9] == intervals[3:9]
    if intervals:
        assert table[-1] == intervals[-1] and table[0] == intervals[0]
        with pytest.raises(IndexError):
            table[len(intervals)]
    assert touching_runs(table) == touching_runs(intervals)
    assert stretches(table) == stretches(intervals)
    assert interval_edges(table) == interval_edges(intervals)
    assert interval_holes(table) == interval_holes(intervals)
    for start, stop in ((0, len(intervals)), (2, 7), (5, 5), (len(intervals) - 3, len(intervals))):
        assert statuses_in(table, start, stop) == statuses_in(intervals, start, stop)
    top = intervals[-1].lo + 30 if intervals else 50
    rng = random.Random(seed)
    for _ in range(20):
        region = _random_region(rng, top + 1)
        assert exact_range(region, table) == exact_range(region, intervals)
    # a table of other intervals is not equal
    if intervals:
        assert table != intervals[:-1]
        assert table != [*intervals[:-1], Interval(0, 0, "ok")]


@pytest.mark.parametrize("seed", range(4))
def test_select_over_a_frame_with_start_times_as_text(seed: int) -> None:
    """Start times that are not datetime64 (text, as an imported table may hold them) are
    ordered by pandas' sort, as the row-wise code orders them."""
    import pandas as pd

    from engine.landscape.holes import select

    rows = _random_runs(seed, walked=True)
    for row in rows:
        started = row["started_at"]
        row["started_at"] = None if pd.isna(started) else started.isoformat()
    frame = pd.DataFrame(rows)
    assert not pd.api.types.is_datetime64_dtype(frame["started_at"])
    by_rows = select(frame.to_dict("records"), policy="DTR", cap=60.0, newest_version=True)
    by_columns = select(frame, policy="DTR", cap=60.0, newest_version=True)
    assert by_columns == by_rows and by_rows.intervals
