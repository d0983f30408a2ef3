"""Walked intervals against unmodified simrd (SIMRD_DIR): every interval's ends and middle
give simrd the same interval, status and overhead."""

from __future__ import annotations

from pathlib import Path

from engine.landscape.store import Store
from engine.landscape.walk import walk_landscape
from engine.sim.catalog import resolve
from engine.sim.reference import run_reference
from engine.sim.simulate import run_point

SYNTHETIC = "synthetic-mlp"


def test_walked_intervals_agree_with_simrd(simrd_dir: Path, tmp_path: Path) -> None:
    peak = run_point(SYNTHETIC, ratio=0.5)["peak"]
    # synthetic-mlp turns from ok to oom at about 0.4034 of its peak: the walk crosses it
    start = int(0.4033 * peak)
    store = Store.open(tmp_path / "landscape.duckdb")
    walk = walk_landscape(store, SYNTHETIC, start=start, end=start + 10**6, max_runs=8)
    assert {i["status"] for i in walk["intervals"]} == {"ok", "oom"}
    path = str(resolve(SYNTHETIC).path)
    for interval in walk["intervals"]:
        lo, hi = interval["lo"], interval["hi"]
        for budget in sorted({lo, (lo + hi) // 2, hi}):
            theirs = run_reference(path, name=SYNTHETIC, budget=budget, simrd_dir=str(simrd_dir))
            assert theirs["same_execution"] == {"lo": lo, "hi": hi}, budget
            assert theirs["status"] == interval["status"], budget
            assert theirs["overhead"] == interval["overhead"], budget
