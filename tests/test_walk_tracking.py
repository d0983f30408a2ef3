"""Walks that choose run by run whether to keep a trajectory (engine/sim/walk_tracking.py):
the records are fresh runs' whatever they choose, and the choice follows what the
trajectories take over."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from engine.sim import native
from engine.sim.policies import make_policy
from engine.sim.simulate import baseline, limit_for, load
from engine.sim.walk_tracking import (
    FIRST_RETRY,
    LAST_RETRY,
    PAYS_FROM,
    TrackingChoice,
    share_taken_over,
)
from tests.test_prefix_sharing import _equal_fresh_runs, _exact, _walk
from traces.random_traces import generate


class Scripted(TrackingChoice):
    """Keeps a trajectory in the runs a random script says (every switch between the two)."""

    def __init__(self, seed: int) -> None:
        super().__init__("always")
        self.script = random.Random(seed)

    def track_next(self) -> bool:
        return self.script.random() < 0.5


@pytest.mark.parametrize("point_every", [1, 3])
@pytest.mark.parametrize("seed", range(8))
def test_runs_with_and_without_trajectories_equal_fresh_runs(
    tmp_path: Path, seed: int, point_every: int
) -> None:
    """Random traces walked with trajectories kept by a random script: a run without one ends
    the trajectory's epoch, and the next run that keeps one starts a new epoch from a state the
    hash never followed (it is recomputed, and with verify_hash checked at every point). Every
    record equals a fresh run's and the walk's that keeps every trajectory, and runs still merge
    into trajectories of new epochs. (Points inside cascades after every computation and after
    about one in three: the random traces' cascades are too short for the default's spacing to
    leave many points inside them.)"""
    path = tmp_path / f"rand-{seed}.log"
    path.write_text(generate(7000 + seed, n_ops=60 + seed * 10))
    policy = ("DTR", "MSPS", "NbhdPenalty@b=0.25", "CostStale")[seed % 4]
    ref, program = load(str(path))
    peak = baseline(program).peak
    untracked = epochs = merges = 0
    for ratio in (0.3, 0.45, 0.6):
        start = int(ratio * peak)
        kept, _ = _walk(str(path), start, policy, steps=30, point_every=point_every)
        chosen, stats = _walk(
            str(path), start, policy, steps=30, tracking=Scripted(seed), point_every=point_every
        )
        assert [_exact(r) for r in chosen] == [_exact(r) for r in kept]
        _equal_fresh_runs(str(path), policy, chosen)
        untracked += stats["untracked_runs"]
        epochs += stats["epochs_started"]
        merges += stats["merges"]
    # (merges in the new epochs: with a point after every computation; spaced, some of these
    # traces have too few points inside cascades to meet at)
    assert untracked > 0 and epochs > 0 and (merges > 0 or point_every > 1)


# Random traces (by seed) and a ratio of the peak from which most of their runs do not rejoin
# their predecessor. Such budgets were many more while a storage out of the pool kept its
# links, which the state hash read (tests/test_prefix_sharing.py).
SELDOM_REJOINING = [(0, 0.4), (1, 0.15), (3, 0.3), (7, 0.4)]


@pytest.mark.parametrize(("seed", "seldom"), SELDOM_REJOINING)
def test_walks_choosing_trajectories_equal_fresh_runs(
    tmp_path: Path, seed: int, seldom: float
) -> None:
    """The default choice, on random traces from a budget where their runs mostly do not
    rejoin and from 0.6 of the peak: it gives trajectories up and tries them again, and every
    record equals a fresh run's."""
    path = tmp_path / f"rand-{seed}.log"
    path.write_text(generate(5000 + seed, n_ops=60 + seed * 10))
    ref, program = load(str(path))
    peak = baseline(program).peak
    untracked = tried = 0
    for ratio in (seldom, 0.6):
        records, stats = _walk(str(path), int(ratio * peak), "DTR", steps=60, tracking="auto")
        _equal_fresh_runs(str(path), "DTR", records)
        untracked += stats["untracked_runs"]
        tried += stats["epochs_started"]
    assert untracked > 0 and tried > 0


def test_a_dtr_walk_keeps_trajectories_where_runs_rejoin(traces_dir: Path) -> None:
    """The Unrolled GAN from 0.22: most runs rejoin their predecessor (a few in a row do not),
    and a run without a trajectory would cost a replay to the end for itself and the next run:
    the walk keeps every trajectory, with as many merges as a walk told to keep them all."""
    ref, program = load("unrolled_gan", traces_dir)
    base = baseline(program)
    merges = {}
    for mode in ("auto", "always"):
        walk = native.Walk(
            program,
            int(0.22 * base.peak),
            make_policy("DTR"),
            remat_limit=limit_for(base, 60),
            tracking=mode,
        )
        for count, _ in enumerate(walk, 1):
            if count == 300:
                break
        stats = walk.stats()
        assert stats["untracked_runs"] == stats["epochs_started"] == 0
        merges[mode] = stats["merges"]
    assert merges["auto"] == merges["always"] > 200


def _outcomes(choice: TrackingChoice, shares: list[float]) -> str:
    """What the choice does over runs whose trajectories would take `shares` over: T a run
    that keeps one and could merge, t one that keeps one with nothing to merge into (the first
    of a try), . a run that keeps none."""
    out = []
    previous_tracked = True
    for share in shares:
        tracked = choice.track_next()
        compared = tracked and previous_tracked
        choice.observe(tracked, compared, share if compared else 0.0)
        out.append("T" if compared else "t" if tracked else ".")
        previous_tracked = tracked
    return "".join(out)


def test_trajectories_are_given_up_where_runs_take_nothing_over_and_tried_again() -> None:
    choice = TrackingChoice()
    seen = _outcomes(choice, [0.0] * 80)
    given_up = seen.index(".")
    assert seen[:given_up] == "T" * given_up and 2 <= given_up <= 8
    rest = seen[given_up:].split("tT")
    # tries after FIRST_RETRY runs, then twice as many each time, up to LAST_RETRY
    assert [len(r) for r in rest[:4]] == [8, 16, 16, 16]
    assert FIRST_RETRY == 8 and LAST_RETRY == 16


def test_a_try_that_pays_keeps_trajectories_again() -> None:
    choice = TrackingChoice()
    _outcomes(choice, [0.0] * 20)
    assert not choice.track_next()
    while not choice.track_next():  # the runs until the next try
        choice.observe(False, False, 0.0)
    choice.observe(True, False, 0.0)  # the try's first run: nothing to merge into
    assert choice.track_next()
    choice.observe(True, True, 1.0)  # it merged: runs may rejoin here again
    assert choice.taken_over >= PAYS_FROM
    assert _outcomes(choice, [0.0, 1.0] * 10) == "T" * 20


def test_a_few_runs_in_a_row_that_take_nothing_over_do_not_end_trajectories() -> None:
    """Where runs rejoin (the Unrolled GAN from 0.22 has up to six in a row that do not)."""
    choice = TrackingChoice()
    shares = ([1.0] * 20 + [0.0] * 6) * 4
    assert _outcomes(choice, shares) == "T" * len(shares)


def test_modes() -> None:
    assert _outcomes(TrackingChoice("always"), [0.0] * 30) == "T" * 30
    assert _outcomes(TrackingChoice("never"), [1.0] * 30) == "." * 30
    with pytest.raises(ValueError, match="tracking: expected one of auto, always, never"):
        TrackingChoice("sometimes")


def test_the_share_taken_over_is_of_the_compute_from_where_the_run_resumed() -> None:
    assert share_taken_over({"clock": 1000, "resumed_clock": 600, "skipped_clock": 300}) == 0.75
    assert share_taken_over({"clock": 600, "resumed_clock": 600, "skipped_clock": 0}) == 0.0
