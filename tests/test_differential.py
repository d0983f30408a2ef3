"""Differential testing beyond the eight traces: small random traces (forward and backward
passes, multi-output operators, aliases, mutations, copies, releases) replayed at many
budgets; unmodified simrd's records are fixtures (tests/tools/make_differential_fixtures.py),
so this runs without simrd."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.sim.record import EXACT_FIELDS
from engine.sim.simulate import run_point

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "differential"
RECORDS = [
    json.loads(line)
    for line in (FIXTURES / "expected.jsonl").read_text().splitlines()
    if line.strip()
]
COMPARED = (*EXACT_FIELDS, "policy_evictions", "overhead", "retained", "trace_sha256")


def test_fixture_set_is_broad() -> None:
    statuses = {r["status"] for r in RECORDS}
    assert statuses == {"ok", "oom", "thrashed"}
    assert len({r["args"]["trace"] for r in RECORDS}) >= 200
    assert len(RECORDS) >= 1000
    assert sum(r["rematerializations"] > 0 for r in RECORDS) >= 500
    assert sum(bool(r["retained"]) for r in RECORDS) >= 20
    assert len({r["policy"] for r in RECORDS}) >= 6


def _chunks(size: int) -> list[list[dict]]:
    return [RECORDS[i : i + size] for i in range(0, len(RECORDS), size)]


@pytest.mark.parametrize("chunk", _chunks(100), ids=lambda c: c[0]["args"]["trace"])
def test_engine_matches_simrd(chunk: list[dict]) -> None:
    mismatches = []
    for expected in chunk:
        args = expected["args"]
        ours = run_point(
            str(FIXTURES / args["trace"]),
            budget=args["budget"],
            ratio=args["ratio"],
            policy=args["policy"],
            cap=args["cap"],
            retain=frozenset(args["retain"]),
        )
        diff = {k: (ours[k], expected[k]) for k in COMPARED if ours[k] != expected[k]}
        if diff:
            mismatches.append((args, diff))
    assert not mismatches, mismatches[:3]
