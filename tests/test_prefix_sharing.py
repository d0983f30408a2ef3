"""Prefix sharing: a run resumed from the state where it first differs from the previous
budget's run gives the same record as a fresh run, field for field.

Checked against unmodified simrd's records (the golden set and the differential fixtures:
the walk starts one byte below a recorded interval, so the recorded execution is reached by
resuming) and against fresh runs of the C runtime along longer walks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.sim import native
from engine.sim.policies import make_policy
from engine.sim.record import EXACT_FIELDS
from engine.sim.simulate import baseline, limit_for, load, make_record, run_point
from tests.test_golden import RECORDS as GOLDEN

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "differential"
DIFFERENTIAL = [
    json.loads(line)
    for line in (FIXTURES / "expected.jsonl").read_text().splitlines()
    if line.strip()
]
COMPARED = tuple(f for f in EXACT_FIELDS if f != "budget")


def _walk(
    trace: str,
    start: int,
    policy: str,
    *,
    traces: Path | None = None,
    cap: float = 60,
    retain: frozenset[int] = frozenset(),
    steps: int = 2,
) -> tuple[list[dict], dict]:
    """The records of the first `steps` executions from `start` up, and the walk's counters."""
    ref, program = load(trace, traces)
    base = baseline(program)
    the_policy = make_policy(policy)
    walk = native.Walk(program, start, the_policy, remat_limit=limit_for(base, cap), retain=retain)
    records = []
    for step in walk:
        record = make_record(ref, program, base, step.result, the_policy.spec, None, retain)
        record["resumed_operator"] = step.resumed_operator
        records.append(record)
        if len(records) == steps or step.result.same_execution["hi"] is None:
            break
    return records, walk.stats()


def _resumed_equals(expected: dict, record: dict) -> None:
    assert record["budget"] == expected["same_execution"]["lo"]
    for name in COMPARED:
        want = expected[name]
        got = record[name]
        if name == "failure" and got is not None:
            # bytes over the budget: the same allocation, measured against another budget
            if "over_by" in want:
                assert got["over_by"] + record["budget"] == want["over_by"] + expected["budget"]
            got = {k: v for k, v in got.items() if k != "over_by"}
            want = {k: v for k, v in want.items() if k != "over_by"}
        assert got == want, name
    assert record["overhead"] == expected["overhead"]


@pytest.mark.parametrize(
    "golden",
    [g for g in GOLDEN if g["policy"] in native.NATIVE_POLICIES and g["same_execution"]["lo"] > 0],
    ids=lambda g: f"{g['trace']}-{g['policy']}-{g['ratio']}",
)
def test_resumed_runs_reproduce_the_golden_records(golden: dict, traces_dir: Path) -> None:
    lo = golden["same_execution"]["lo"]
    records, stats = _walk(golden["trace"], lo - 1, golden["policy"], traces=traces_dir)
    assert records[0]["same_execution"]["hi"] == lo - 1  # intervals tile the budgets
    assert stats["resumed_runs"] == 1 and stats["fresh_runs"] == 1
    _resumed_equals(golden, records[1])


def _chunks(size: int) -> list[list[dict]]:
    usable = [
        r
        for r in DIFFERENTIAL
        if r["policy"] in native.NATIVE_POLICIES and r["same_execution"]["lo"] > 0
    ]
    return [usable[i : i + size] for i in range(0, len(usable), size)]


@pytest.mark.parametrize("chunk", _chunks(150), ids=lambda c: c[0]["args"]["trace"])
def test_resumed_runs_reproduce_the_differential_fixtures(chunk: list[dict]) -> None:
    for expected in chunk:
        args = expected["args"]
        lo = expected["same_execution"]["lo"]
        records, stats = _walk(
            str(FIXTURES / args["trace"]),
            lo - 1,
            args["policy"],
            cap=args["cap"],
            retain=frozenset(args["retain"]),
        )
        assert stats["resumed_runs"] == 1, args
        _resumed_equals(expected, records[1])


@pytest.mark.parametrize("policy", ["DTR", "MSPS", "NbhdPenalty@b=0.25", "LRU", "HEStar"])
def test_long_walks_equal_fresh_runs(policy: str) -> None:
    """Forty executions in a row, each resumed from its predecessor's state, against fresh
    runs at the same budgets: every field but the wall time."""
    peak = run_point("synthetic-mlp", ratio=0.5)["peak"]
    records, stats = _walk("synthetic-mlp", int(0.38 * peak), policy, steps=40)
    assert stats["resumed_runs"] == len(records) - 1 >= 20
    assert any(r["resumed_operator"] > 0 for r in records[1:])
    for record in records:
        fresh = run_point("synthetic-mlp", budget=record["budget"], policy=policy)
        for name in fresh:
            if name not in ("wall_s",):
                assert record[name] == fresh[name], (name, record["budget"])


def test_dropping_old_states_only_costs_replays() -> None:
    """With room for one kept state, a walk replays from the start when it needs an older
    one, and still gives the same records."""
    ref, program = load("synthetic-mlp")
    base = baseline(program)
    start = int(0.38 * base.peak)
    outs = []
    for keep in (1, 64):
        walk = native.Walk(
            program, start, make_policy("DTR"), remat_limit=limit_for(base, 60), max_snapshots=keep
        )
        results = []
        for step in walk:
            step.result.wall_s = 0.0
            results.append(step.result)
            if len(results) == 30:
                break
        outs.append((results, walk.stats()))
    assert outs[0][0] == outs[1][0]
    assert outs[0][1]["fresh_runs"] >= outs[1][1]["fresh_runs"]
