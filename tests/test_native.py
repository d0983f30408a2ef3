"""The C runtime (engine/sim/_native/core.c) and the Python reference runtime make identical
runs: the same record field for field, the same event log row for row."""

from __future__ import annotations

import math
import random
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from engine.sim import native
from engine.sim.native import NativeSimulation
from engine.sim.policies import POLICIES as ALL_POLICIES
from engine.sim.policies import make_policy
from engine.sim.simulate import baseline, budget_for, load, run_point
from traces.random_traces import generate

C_POLICIES = [
    "DTR",
    "DTRLocal",
    "MSPS",
    "LRU",
    "LargestStorage",
    "NbhdPenalty@b=0.25",
    "HEStar",
    "CostStale",
    "TwoPhase@k=8",
]


def _same(trace: str, ratio: float, policy: str, **kwargs: object) -> None:
    c = run_point(trace, ratio=ratio, policy=policy, native=True, **kwargs)  # type: ignore[arg-type]
    python = run_point(trace, ratio=ratio, policy=policy, native=False, **kwargs)  # type: ignore[arg-type]
    c.pop("wall_s")
    python.pop("wall_s")
    assert c == python


def test_extension_is_built() -> None:
    # `make setup` compiles engine/sim/_native/core.c; without it runs are slower, not different.
    assert native.available()
    assert "native C" in native.backend_description()


def test_c_covers_every_policy_but_the_stateful_two() -> None:
    assert set(ALL_POLICIES) - native.NATIVE_POLICIES == {"DTREqClass", "RandomStorage"}
    assert {p.split("@")[0] for p in C_POLICIES} == native.NATIVE_POLICIES


@pytest.mark.parametrize("policy", C_POLICIES)
@pytest.mark.parametrize("ratio", [0.35, 0.45, 0.6])
def test_synthetic(policy: str, ratio: float) -> None:
    _same("synthetic-mlp", ratio, policy)


@pytest.mark.parametrize("seed", range(40))
def test_random_traces(tmp_path: Path, seed: int) -> None:
    path = tmp_path / f"rand-{seed}.log"
    path.write_text(generate(1000 + seed))
    rng = random.Random(seed)
    for ratio in (0.3, 0.5, 0.7):
        for policy in rng.sample(C_POLICIES, 3):
            _same(str(path), ratio, policy)


def test_retain_and_time_limit(tmp_path: Path) -> None:
    path = tmp_path / "rand.log"
    path.write_text(generate(77))
    _same(str(path), 0.4, "DTR", retain=frozenset({0, 3}))
    _same(str(path), 0.4, "DTR", time_limit=600.0)


@pytest.mark.parametrize("ratio", [0.101, 0.104])
def test_resnet32(traces_dir: Path, ratio: float) -> None:
    _same("resnet32", ratio, "DTR", traces=traces_dir)


def test_shared_searches_equal_plain_ones(traces_dir: Path) -> None:
    """The shared neighbourhood searches (one walk of the evicted region per after_compute)
    find exactly what one search per storage finds, whichever way they build their rows:
    converting local unions bit by bit, from the region's global closures, or choosing per
    pass (the default)."""
    ways = (
        {"shared_search": False},
        {"shared_rows": "auto"},
        {"shared_rows": "convert"},
        {"shared_rows": "closures"},
    )
    for name, ratio in (("resnet32", 0.101), ("unet", 0.433), ("densenet121", 0.2)):
        _, program = load(name, traces_dir)
        base = baseline(program)
        runs = [
            NativeSimulation(
                program,
                budget_for(ratio, base.peak),
                make_policy("DTR"),
                remat_limit=base.model_compute * 59,
                **way,  # type: ignore[arg-type]
            )
            for way in ways
        ]
        results = [sim.run() for sim in runs]
        for result in results:
            result.wall_s = 0.0
        assert results[1:] == results[:1] * 3, name
        stats = [sim.stats() for sim in runs]
        assert len({s["searches"] for s in stats}) == 1, name
        plain, auto, convert, closures = stats
        assert plain["shared_passes"] == 0 and convert["shared_passes_closure_rows"] == 0
        assert closures["shared_passes_closure_rows"] == closures["shared_passes"] > 0, name
        # the default picks per pass, and on each of these traces both ways are picked
        assert 0 < auto["shared_passes_closure_rows"] < auto["shared_passes"], name
    with pytest.raises(ValueError, match="shared_rows: expected one of auto, convert, closures"):
        NativeSimulation(program, 1, make_policy("DTR"), shared_rows="sideways")


@pytest.mark.parametrize("policy", ["DTR", "TwoPhase@k=8", "LRU"])
def test_event_logs_are_identical(tmp_path: Path, policy: str) -> None:
    tables = []
    for use_c in (True, False):
        target = tmp_path / f"events-{use_c}.parquet"
        run_point("synthetic-mlp", ratio=0.45, policy=policy, events=target, native=use_c)
        tables.append(pq.read_table(target).to_pylist())
    c_rows, python_rows = tables
    assert len(c_rows) == len(python_rows) > 0
    for ours, theirs in zip(c_rows, python_rows, strict=True):
        for key in ours:
            a, b = ours[key], theirs[key]
            if isinstance(a, float) and isinstance(b, float) and math.isnan(a):
                assert math.isnan(b)
            else:
                assert a == b, (key, ours, theirs)
    assert any(r["runner_up"] is not None for r in c_rows if r["kind"] == "evict_policy")


def test_division_rounds_like_python() -> None:
    """The C scan's quotient is Python's correctly rounded int / int, ties included."""
    from engine.sim._native.core import true_divide

    rng = random.Random(7)
    pairs = [
        (rng.randrange(0, 1 << rng.choice([10, 40, 53, 54, 60])), rng.randrange(1, 1 << bits))
        for bits in (10, 53, 54, 64, 90, 120)
        for _ in range(20000)
    ]
    # exact ties and near-ties between two doubles
    pairs += [
        ((1 << k) + delta, d)
        for k in range(53, 62)
        for delta in range(-3, 4)
        for d in (2, 3, 4, 6, (1 << 64) + 1)
    ]
    assert all(true_divide(n, d) == n / d for n, d in pairs)
