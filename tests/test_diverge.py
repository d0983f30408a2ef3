"""`dtr-landscape diverge` and the analysis behind it (engine/landscape/diverge.py), on real
runs: the shipped synthetic trace always, the DTR paper's examples when the traces are here.

The analysis is checked against the event logs themselves (every claim it makes is looked
up in the Parquet rows) and against the paper's published facts, not against numbers it
printed once.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from engine.landscape.diverge import DivergeError, diverge
from engine.landscape.store import Store
from engine.sim.simulate import run_point
from tests.helpers import cli, cli_json

SYNTHETIC = "synthetic-mlp"
OK_RATIO, OOM_RATIO = 0.40, 0.41  # the shipped trace's hole: ok at 0.40, oom at 0.41


def _decisions(events: pd.DataFrame) -> dict[int, list[int]]:
    policy = events[events["kind"] == "evict_policy"]
    return {int(op): [int(s) for s in g["storage"]] for op, g in policy.groupby("operator")}


def _run_with_events(tmp_path: Path, ratio: float, **kwargs: Any) -> tuple[pd.DataFrame, dict]:
    path = tmp_path / f"{ratio}.parquet"
    record = run_point(kwargs.pop("trace", SYNTHETIC), ratio=ratio, events=path, **kwargs)
    return pd.read_parquet(path), record


def _check_against_logs(analysis: dict, events_a: pd.DataFrame, events_b: pd.DataFrame) -> None:
    """Every position the analysis names is where the logs say it is."""
    dec = {"a": _decisions(events_a), "b": _decisions(events_b)}
    common = analysis["operators_in_common"]
    first, div = analysis["first_difference"], analysis["divergence"]
    # before the first difference, operator by operator, the same decisions
    for op in range(1, first["operator"]):
        assert dec["a"].get(op, []) == dec["b"].get(op, []), op
    here = first["index"]
    assert dec["a"].get(first["operator"], [])[:here] == dec["b"].get(first["operator"], [])[:here]
    assert dec["a"].get(first["operator"], []) != dec["b"].get(first["operator"], [])
    # from the divergence on, no aligned decision agrees again
    start = div["operator"]
    for op in range(start, common + 1):
        skip = div["index"] if op == start else 0
        mine, theirs = dec["a"].get(op, [])[skip:], dec["b"].get(op, [])[skip:]
        assert not (mine and theirs and mine[0] == theirs[0]), op
    # each side's victim is its next policy eviction from that position, as logged
    for side, events in (("a", events_a), ("b", events_b)):
        victim = div[side]
        if victim is None:
            continue
        row = events[(events["kind"] == "evict_policy") & (events["seq"] == victim["seq"])]
        assert len(row) == 1
        assert int(row["storage"].iloc[0]) == victim["storage"]
        assert int(row["operator"].iloc[0]) == victim["operator"]
        assert int(row["pool_size"].iloc[0]) == victim["pool_size"]
        assert float(row["score"].iloc[0]) == victim["score"]
        assert victim["operator"] >= div["operator"]


def test_the_synthetic_hole_explained(tmp_path: Path) -> None:
    events_a, record_a = _run_with_events(tmp_path, OK_RATIO)
    events_b, record_b = _run_with_events(tmp_path, OOM_RATIO)
    assert (record_a["status"], record_b["status"]) == ("ok", "oom")
    analysis = diverge(events_a, events_b, record_a, record_b)
    json.dumps(analysis, allow_nan=False)  # plain JSON, for browsers too
    assert analysis["failing"] == "b" and not analysis["same_decisions"]
    _check_against_logs(analysis, events_a, events_b)
    failure = record_b["failure"]
    assert analysis["failure"] == {"a": None, "b": failure}
    assert analysis["divergence"]["operator"] <= failure["operator"]
    assert analysis["in_failure_operator"]["operator"] == failure["operator"]
    # counts after the divergence are the log's rows from there
    counts = analysis["in_failure_operator"]["b"]
    inside = events_b[
        (events_b["kind"] != "operator") & (events_b["operator"] == failure["operator"])
    ]
    assert counts["rematerializations"] == int((inside["kind"] == "remat").sum())
    # series: one value per operator, the log's operator rows
    series = analysis["series"]["b"]
    assert len(series["max_pinned"]) == record_b["operators"]
    ops = events_b[events_b["kind"] == "operator"].sort_values("operator")
    assert series["max_depth"] == [int(x) for x in ops["max_depth"]]
    # what-if candidates: the failing run's divergence victim first
    first = analysis["retain"][0]
    assert first["why"] == "divergence" and first["run"] == "b"
    assert first["storage"] == analysis["divergence"]["b"]["storage"]
    assert first["retain"] == [first["storage"]]


def test_inputs_the_failing_operator_rebuilt(tmp_path: Path) -> None:
    events_a, record_a = _run_with_events(tmp_path, OK_RATIO)
    events_b, record_b = _run_with_events(tmp_path, OOM_RATIO)
    analysis = diverge(events_a, events_b, record_a, record_b)
    failed_in = record_b["failure"]["operator"]
    inside = events_b[(events_b["kind"] == "remat") & (events_b["operator"] == failed_in)]
    wanted = list(dict.fromkeys(int(s) for s in inside[inside["depth"] == 2]["storage"]))
    assert [item["storage"] for item in analysis["failure_inputs"]] == wanted
    for item in analysis["failure_inputs"]:
        assert item["evicted"]["kind"].startswith("evict")
        assert item["evicted"]["operator"] < failed_in


def test_runs_of_different_traces_or_foreign_logs_are_refused(tmp_path: Path) -> None:
    events_a, record_a = _run_with_events(tmp_path, OK_RATIO)
    events_b, record_b = _run_with_events(tmp_path, OOM_RATIO)
    other = {**record_b, "trace": "other", "trace_sha256": "0" * 64}
    with pytest.raises(DivergeError, match="different traces"):
        diverge(events_a, events_b, record_a, other)
    with pytest.raises(DivergeError, match="does not belong to its record"):
        diverge(events_a, events_a, record_a, record_b)
    with pytest.raises(DivergeError, match="not an event log"):
        diverge(events_a, events_b[["kind", "operator"]], record_a, record_b)


def test_identical_executions_make_the_same_decisions(tmp_path: Path) -> None:
    events, record = _run_with_events(tmp_path, OK_RATIO)
    analysis = diverge(events, events, record, record)
    assert analysis["same_decisions"] and analysis["divergence"] is None
    assert analysis["first_difference"] is None and analysis["retain"] == []


def test_cli_json_and_text(tmp_path: Path) -> None:
    analysis = cli_json(
        "diverge", SYNTHETIC, "--ratio", str(OK_RATIO), "--ratio", str(OOM_RATIO), "--json"
    )
    assert analysis["runs"]["a"]["status"] == "ok" and analysis["runs"]["b"]["status"] == "oom"
    # the same analysis from budgets in bytes, and the event logs kept
    budgets = [str(analysis["runs"][s]["budget"]) for s in "ab"]
    keep = tmp_path / "logs"
    again = cli_json(
        "diverge", SYNTHETIC, "--budget", budgets[0], "--budget", budgets[1], "--json",
        "--keep-events", str(keep),
    )  # fmt: skip
    assert again["divergence"] == analysis["divergence"]
    assert len(list(keep.glob("*.parquet"))) == 2
    text = cli("diverge", SYNTHETIC, "--ratio", str(OK_RATIO), "--ratio", str(OOM_RATIO))
    assert text.returncode == 0
    assert f"part for good at operator {analysis['divergence']['operator']:,}" in text.stdout
    assert "diverge: 3/3" in text.stderr  # progress on stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((SYNTHETIC, "--ratio", "0.4"), "exactly two budgets"),
        ((SYNTHETIC, "--ratio", "0.4", "--ratio", "0.4"), "nothing to compare"),
        (("--ratio", "0.4", "--ratio", "0.41"), "give a TRACE"),
        (("--runs", "x", "x"), "the same run"),
        ((SYNTHETIC, "--runs", "x", "y"), "give no TRACE"),
        ((SYNTHETIC, "--ratio", "0.4", "--ratio", "0.41", "--db", "x"), "go with --runs"),
        (("no-such-trace", "--ratio", "0.4", "--ratio", "0.41"), "no-such-trace"),
    ],
)
def test_cli_bad_input(args: tuple[str, ...], message: str) -> None:
    done = cli("diverge", *args)
    assert done.returncode == 2 and message in done.stderr
    assert done.stderr.count("\n") == 1  # one line, no traceback


def test_stored_runs_record_missing_logs_then_reuse_them(tmp_path: Path) -> None:
    db = tmp_path / "landscape.duckdb"
    store = Store.open(db)
    ids = store.add_runs(
        [run_point(SYNTHETIC, ratio=r) for r in (OK_RATIO, OOM_RATIO)], source="engine", cap=60
    )
    out = tmp_path / "compare" / "pair.json"
    done = cli("diverge", "--runs", *ids, "--db", str(db), "--out", str(out), "--json")
    assert done.returncode == 0, done.stderr
    assert "diverge: 0/3 recording the event log of run a" in done.stderr
    analysis = json.loads(done.stdout)
    assert json.loads(out.read_text()) == analysis
    assert [analysis["runs"][s]["run_id"] for s in "ab"] == ids
    logs = tmp_path / "events"
    assert sorted(p.name for p in logs.iterdir()) == sorted(f"{i}.parquet" for i in ids)
    again = cli("diverge", "--runs", *ids, "--db", str(db), "--json")
    assert "recording" not in again.stderr and "diverge: 0/1 analysing" in again.stderr
    assert json.loads(again.stdout)["divergence"] == analysis["divergence"]
    # the same analysis as `diverge TRACE --budget A --budget B`, but for the run ids (and
    # the ratio, which a budget in bytes does not have)
    budgets = [str(analysis["runs"][s]["budget"]) for s in "ab"]
    fresh = cli_json("diverge", SYNTHETIC, "--budget", budgets[0], "--budget", budgets[1], "--json")
    for side in "ab":
        for name in ("run_id", "ratio"):
            fresh["runs"][side][name] = analysis["runs"][side][name]
    for candidate in fresh["retain"]:
        candidate["run_id"] = analysis["runs"][candidate["run"]]["run_id"]
    assert fresh == analysis


def test_stored_runs_bad_input(tmp_path: Path) -> None:
    db = tmp_path / "landscape.duckdb"
    store = Store.open(db)
    record = run_point(SYNTHETIC, ratio=OK_RATIO)
    (mine,) = store.add_runs([record], source="engine", cap=60)
    (other,) = store.add_runs(
        [{**record, "trace": "resnet32", "trace_sha256": "f" * 64}], source="import:x"
    )
    (imported,) = store.add_runs(
        [{**record, "trace": "imported-mlp", "budget": record["budget"] + 1}], source="import:x"
    )
    cases = [
        (("--runs", mine, "nope"), "no run 'nope' (run b) in the store"),
        (("--runs", mine, other), "different traces"),
        (("--runs", mine, imported), "not available here to record one"),
    ]
    for args, message in cases:
        done = cli("diverge", *args, "--db", str(db), env={"DTR_LANDSCAPE_TRACES": ""})
        assert done.returncode == 2 and message in done.stderr, done.stderr


# -- the DTR paper's examples (Section 5) -----------------------------------------------------
def test_inceptionv4_the_papers_divergence(traces_dir: Path, tmp_path: Path) -> None:
    """0.2343 completes, 0.235 fails; the failing run's first different victim is storage
    3131 at operator 2,267, its failure operator 2,270; retaining 3131 completes."""
    kwargs = {"trace": "inceptionv4", "traces": traces_dir}
    events_a, record_a = _run_with_events(tmp_path, 0.2343, **kwargs)
    events_b, record_b = _run_with_events(tmp_path, 0.235, **kwargs)
    analysis = diverge(events_a, events_b, record_a, record_b)
    assert (analysis["runs"]["a"]["status"], analysis["runs"]["b"]["status"]) == ("ok", "oom")
    victim = analysis["divergence"]["b"]
    assert (victim["operator"], victim["storage"]) == (2267, 3131)
    assert victim["runner_up"] == 932  # "the tensor the smaller budget had evicted"
    assert analysis["divergence"]["a"]["storage"] == 932
    assert analysis["in_failure_operator"]["operator"] == 2270
    assert analysis["retain"][0]["storage"] == 3131
    _check_against_logs(analysis, events_a, events_b)
    what_if = run_point("inceptionv4", ratio=0.235, retain=frozenset({3131}), traces=traces_dir)
    assert what_if["status"] == "ok"


def test_resnet32_the_papers_retained_input(traces_dir: Path, tmp_path: Path) -> None:
    """At 0.104 the failing operator needs a storage the run evicted five operators earlier
    and the 0.101 run never evicted; retaining it completes."""
    kwargs = {"trace": "resnet32", "traces": traces_dir}
    events_a, record_a = _run_with_events(tmp_path, 0.101, **kwargs)
    events_b, record_b = _run_with_events(tmp_path, 0.104, **kwargs)
    analysis = diverge(events_a, events_b, record_a, record_b)
    failed_in = record_b["failure"]["operator"]
    never = [i for i in analysis["failure_inputs"] if i["other"] is None]
    assert [i["evicted"]["operator"] for i in never] == [failed_in - 5]
    storage = never[0]["storage"]
    assert storage in [c["storage"] for c in analysis["retain"]]
    what_if = run_point("resnet32", ratio=0.104, retain=frozenset({storage}), traces=traces_dir)
    assert what_if["status"] == "ok"
