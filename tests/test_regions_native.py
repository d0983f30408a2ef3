"""The C neighbourhood store and the Python reference make identical decisions."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.regions import native_available
from engine.simulate import run_point
from traces.random_traces import generate

POLICIES = ["DTR", "MSPS", "NbhdPenalty@b=0.25", "HEStar", "CostStale", "TwoPhase@k=8"]


def _same(trace: str, ratio: float, policy: str, **kwargs: object) -> None:
    native = run_point(trace, ratio=ratio, policy=policy, native=True, **kwargs)  # type: ignore[arg-type]
    python = run_point(trace, ratio=ratio, policy=policy, native=False, **kwargs)  # type: ignore[arg-type]
    native.pop("wall_s")
    python.pop("wall_s")
    assert native == python


def test_extension_is_built() -> None:
    # `make setup` compiles engine/_native/regions.c; without it runs are slower, not different.
    assert native_available()


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("ratio", [0.35, 0.45, 0.6])
def test_synthetic(policy: str, ratio: float) -> None:
    _same("synthetic-mlp", ratio, policy)


@pytest.mark.parametrize("seed", range(40))
def test_random_traces(tmp_path: Path, seed: int) -> None:
    path = tmp_path / f"rand-{seed}.log"
    path.write_text(generate(1000 + seed))
    for ratio in (0.3, 0.5, 0.7):
        for policy in ("DTR", "NbhdPenalty@b=0.25", "MSPS"):
            _same(str(path), ratio, policy)


@pytest.mark.parametrize("ratio", [0.101, 0.104])
def test_resnet32(traces_dir: Path, ratio: float) -> None:
    _same("resnet32", ratio, "DTR", traces=traces_dir)


def test_division_rounds_like_python() -> None:
    """The C scan's quotient is Python's correctly rounded int / int, ties included."""
    import random

    from engine._native.regions import true_divide

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
