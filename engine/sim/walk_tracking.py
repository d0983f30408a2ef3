"""Whether a walk's next run keeps a trajectory (engine/sim/_native/trajectory.h).

A run that keeps one marks every word it changes, and logs and hashes them at its points, so
that the next run can merge into it or jump along it. Where runs rejoin their predecessor
(InceptionV4's band, the Unrolled GAN near 0.22: 83-93% of the runs) that pays many times
over; where they rarely do (the TreeLSTM below 0.1, the LSTM at 0.22), it is cost: a run that
kept a trajectory took 1.71x the time of one that did not on the TreeLSTM from 0.075, 1.43x on
the LSTM from 0.22, when a point was taken after every computation of a cascade; with points
spaced (2026-12-06) walks that keep every trajectory took 1.09x and 1.01x the time of walks
that keep none there. So a walk measures what its trajectories save and keeps them only
while that pays. The records are the same either way: only the work differs.
"""

from __future__ import annotations

from dataclasses import dataclass

MODES = ("auto", "always", "never")

# Keeping trajectories pays while merges and jumps take over more than 1 - 1/r of what the
# runs that could merge would have computed (their compute from where they resumed to their
# end), r being what a run keeping one costs against one that does not: 1.4-1.75 when a point
# was taken after every computation of a cascade (a threshold of 0.3), some 1.1-1.33 with
# points spaced (0.1-0.25). On average over runs of a walk: InceptionV4 from 0.20 0.98, the
# Unrolled GAN from 0.22 0.93, the LSTM from 0.22 0.41, the TreeLSTM from 0.075 0.23 (this
# module's own share). At 0.15 instead of 0.3 (2026-12-06, one process, the same records):
# the TreeLSTM, 60 executions from 0.06, 36.4-37.3 s -> 33.7 s (keeping every one: 33.9 s), 20 from
# 0.075 22.9 s -> 21.2 s; the LSTM, 16 from 0.22, 17.3 s -> 15.9 s; ResNet-32 0.095-0.110
# 0.5 s -> 0.4 s; InceptionV4 and the Unrolled GAN unchanged (they keep them all). The losses
# are not symmetric: where runs rejoin, a run that keeps no trajectory for the next to merge
# into costs 20-100 times a merged run (a replay to the end against milliseconds), so
# trajectories are given up only below the lower end, and the average moves slowly: the
# Unrolled GAN from 0.22 has five runs in a row that take nothing over (an average that gave
# the newest run a weight of 0.2 gave trajectories up there, and the walk took 1.9x the time).
PAYS_FROM = 0.15
WEIGHT = 0.1  # of the newest run in the running average
START = 0.25  # a walk starts with them, and a few runs that take nothing over end them
# Without trajectories, a walk tries again (two runs that keep one: the first has nothing to
# merge into) after this many runs, twice as many after each try that did not pay.
FIRST_RETRY = 8
LAST_RETRY = 16


@dataclass
class TrackingChoice:
    """Decides run by run (`track_next`), from what the runs that could merge took over
    (`observe`). `mode`: "auto", or "always" / "never" (tests and `bench`)."""

    mode: str = "auto"
    taken_over: float = START  # running average of the share of a run's compute taken over
    retry_in: int = 0  # runs without trajectories left before the next try
    retry_every: int = FIRST_RETRY
    trying: int = 0  # runs of the current try left

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"tracking: expected one of {', '.join(MODES)}, got {self.mode!r}")

    def track_next(self) -> bool:
        if self.mode != "auto":
            return self.mode == "always"
        if self.trying or self.taken_over >= PAYS_FROM:
            return True
        if self.retry_in > 0:
            self.retry_in -= 1
            return False
        self.trying = 2
        return True

    def observe(self, tracked: bool, compared: bool, share_taken_over: float) -> None:
        """One run's outcome: whether it kept a trajectory, whether it had one to merge into,
        and the share of its compute (from where it resumed) a merge or jumps took over."""
        if self.mode != "auto" or not tracked:
            return
        if self.trying:
            self.trying -= 1
        if not compared:
            return
        trial = self.trying == 0 and self.taken_over < PAYS_FROM  # the try's second run
        self.taken_over += WEIGHT * (share_taken_over - self.taken_over)
        if trial and share_taken_over >= 0.5:
            # a try that merged: runs may rejoin again here (a walk of ResNet-32 gave up
            # stretches where they did, one try merging in two)
            self.taken_over = max(self.taken_over, START)
        if self.taken_over >= PAYS_FROM:
            self.retry_every = FIRST_RETRY
            self.trying = 0
        elif not self.trying:
            self.retry_in = self.retry_every
            self.retry_every = min(2 * self.retry_every, LAST_RETRY)


def share_taken_over(raw: dict[str, int]) -> float:
    """The share of a run's compute, from where it resumed to its end, that a merge or jumps
    took over (core.c's result)."""
    span = raw["clock"] - raw["resumed_clock"]
    return min(1.0, raw["skipped_clock"] / span) if span > 0 else 0.0
