"""The C runtime (engine/sim/_native/core.c): the same replay as engine/sim/runtime.py, fast.

`NativeSimulation` has the Python `Simulation`'s interface (`run() -> RunResult`) and gives
the identical record; the tests compare the two on the golden records, the differential
fixtures and random traces. It covers every policy but the two that keep Python-side state
(DTREqClass's union-find, RandomStorage's generator); `supports` says which.

`Walk` runs a budget range execution by execution and resumes each run where it first
differs from the previous one (see _native/trajectory.h): the walk's records equal fresh runs'
records field for field (tests/test_prefix_sharing.py).

When the extension is not compiled, `available()` is False and everything runs in Python:
identical results, 20-100x slower. `backend_description()` says which one runs.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from engine.sim.native_arrays import program_arrays
from engine.sim.runtime import INF, RunResult
from engine.sim.walk_tracking import TrackingChoice, share_taken_over

if TYPE_CHECKING:
    from engine.sim.events import EventLog
    from engine.sim.policies import Policy
    from engine.sim.trace import Program

try:
    from engine.sim._native import core as _core  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - only when the extension was not compiled
    _core = None

NATIVE_POLICIES: frozenset[str] = frozenset(_core.policies()) if _core is not None else frozenset()
STATUS = ("running", "ok", "oom", "thrashed", "timeout")
EVENT_KINDS = ("evict_policy", "evict_eager", "remat")


def available() -> bool:
    return _core is not None


def backend_description() -> str:
    """One line saying which runtime runs, for `traces`, `bench` and the dashboard."""
    if _core is not None:
        return "runtime: native C (engine/sim/_native/core.c)"
    return (
        "runtime: PURE PYTHON - the C extension engine/sim/_native/core.c is not built, so runs "
        "are 20-100x slower (same results); build it with `make setup` (needs gcc)"
    )


def supports(policy: Policy) -> bool:
    return _core is not None and policy.name in NATIVE_POLICIES


def _limit(remat_limit: float) -> int | None:
    """Thrashed when remat_compute > limit; for an integer count that is > floor(limit)."""
    return None if remat_limit == INF else math.floor(remat_limit)


# How the shared searches build their rows (_native/closures.h, shared_pass): chosen per pass by a
# cost estimate, or forced one way (tests prove both ways give the plain searches' rows).
SHARED_ROWS = {"auto": 0, "convert": 1, "closures": 2, "labels": 3}
# a label sweep takes up to 64 * SWEEP_WORDS bases at once (_native/sweeps.h; fewer: a test)
SWEEP_WORDS: int = _core.SWEEP_WORDS if _core is not None else 1
# a walk's run keeps a point at about one computation in POINT_EVERY inside cascades
# (_native/runtime.h, point_here)
POINT_EVERY: int = _core.POINT_EVERY if _core is not None else 1


def _core_for(
    program: Program,
    budget: int | None,
    policy: Policy,
    *,
    remat_limit: float,
    retain: frozenset[int],
    time_limit: float | None = None,
    events: bool = False,
    snapshots: bool = False,
    max_snapshots: int = 64,
    shared_search: bool = True,
    shared_rows: str = "auto",
    merging: bool = True,
    verify_hash: bool = False,
    max_log_bytes: int = 0,
    max_run_log_bytes: int = 0,
    checkpoint_words: int = -1,
    sweep_words: int = SWEEP_WORDS,
    incremental: bool = True,
    point_every: int = POINT_EVERY,
) -> Any:
    if _core is None:
        raise RuntimeError("the C runtime is not built")
    if shared_rows not in SHARED_ROWS:
        ways = ", ".join(SHARED_ROWS)
        raise ValueError(f"shared_rows: expected one of {ways}, got {shared_rows!r}")
    arrays = program_arrays(program)
    return _core.Core(
        arrays.n_tensors,
        arrays.op_compute,
        arrays.op_first,
        arrays.op_nout,
        arrays.op_args_off,
        arrays.op_args,
        arrays.op_total,
        arrays.tensor_size,
        arrays.tensor_storage,
        arrays.tensor_op,
        arrays.storage_size,
        arrays.step_kind,
        arrays.step_arg,
        policy.name,
        budget,
        _limit(remat_limit),
        retain=sorted(retain),
        nbhd_b=float(policy.params.get("b", 0.25)),
        twophase_k=int(policy.params.get("k", 8)),
        time_limit=time_limit,
        events=events,
        snapshots=snapshots,
        max_snapshots=max_snapshots,
        shared_search=shared_search,
        shared_rows=SHARED_ROWS[shared_rows],
        merging=merging,
        verify_hash=verify_hash,
        max_log_bytes=max_log_bytes,
        max_run_log_bytes=max_run_log_bytes,
        checkpoint_words=checkpoint_words,
        sweep_words=sweep_words,
        incremental=incremental,
        point_every=point_every,
    )


def _result(status: str, raw: dict[str, Any], budget: int | None, wall: float) -> RunResult:
    return RunResult(
        status=status,
        budget=budget,
        clock=raw["clock"],
        model_compute=raw["model_compute"],
        remat_compute=raw["remat_compute"],
        evictions=raw["evictions"],
        policy_evictions=raw["policy_evictions"],
        rematerializations=raw["rematerializations"],
        operators=raw["operators"],
        max_memory=raw["max_memory"],
        peak_pinned=raw["peak_pinned"],
        depth_at_peak_pinned=raw["depth_at_peak_pinned"],
        max_nesting_depth=raw["max_nesting_depth"],
        failure=raw["failure"],
        same_execution={"lo": raw["lo"], "hi": raw["hi"]},
        heuristic_evals=raw["heuristic_evals"],
        wall_s=wall,
    )


class NativeSimulation:
    """One replay in C; the interface of engine.sim.runtime.Simulation."""

    def __init__(
        self,
        program: Program,
        budget: int | None,
        policy: Policy,
        *,
        remat_limit: float = INF,
        retain: frozenset[int] = frozenset(),
        time_limit: float | None = None,
        events: EventLog | None = None,
        shared_search: bool = True,
        shared_rows: str = "auto",
        sweep_words: int = SWEEP_WORDS,
        incremental: bool = True,
    ) -> None:
        self.budget = budget
        self.events = events
        self.core = _core_for(
            program,
            budget,
            policy,
            remat_limit=remat_limit,
            retain=retain,
            time_limit=time_limit,
            events=events is not None,
            shared_search=shared_search,
            shared_rows=shared_rows,
            sweep_words=sweep_words,
            incremental=incremental,
        )

    def run(self) -> RunResult:
        start = time.monotonic()
        status = self.core.run()
        wall = time.monotonic() - start
        if self.events is not None:
            self.events.load_native(self.core.events())
        return _result(status, self.core.result(), self.budget, wall)

    def stats(self) -> dict[str, int]:
        return dict(self.core.stats())


@dataclass
class WalkStep:
    """One distinct execution of a walk: `resumed_operator` is where its replay started (0: from
    the start), `merged_operator` where it fell back into the previous run's state and took
    that run's rest over (None: it ran to its end)."""

    result: RunResult
    resumed_operator: int
    merged_operator: int | None = None


# Kept states of a walk (snapshots) are copies of the whole runtime state, which grows with the
# square of the trace's tensor count (its neighbourhood bitsets): 0.3 MB for ResNet-32, 35 MB
# for the LSTM. The walk keeps as many as fit in this many bytes (at least two).
SNAPSHOT_BYTES = 768 << 20
# A walk's trajectory log keeps at most MAX_LOG_BYTES in all (its changed words, encoded at
# ~6 bytes a word, and its points' frame stacks), and a resumed run's own words take at most
# MAX_RUN_LOG_BYTES. A run that thrashes changes 48M-87M words (TreeLSTM near 0.106,
# InceptionV4 near 0.20: 490 MB encoded, and 170 MB of frame stacks); the TreeLSTM's resumed
# runs never rejoin their predecessor, so each logs as much again, and a worker reached 4 GB
# before the limits. Past a limit the segments keep their points (merges go on) but not their
# words, so a jump over them is replayed instead (_native/trajectory.h, jump_allowed). 300
# executions of InceptionV4 from 0.20 (all thrashing), one process: 0.59 s each, max RSS 1.65 GB
# (docs/WALKS.md, "A run that thrashes up to the cap").
MAX_LOG_BYTES = 1280 << 20
MAX_RUN_LOG_BYTES = 640 << 20
# The snapshots and the log share one budget: the log keeps at most what the snapshots may
# take leaves of it (and never more than MAX_LOG_BYTES). Each alone kept a walk under 2 GB,
# both together did not: an LSTM walk from 0.1955 (35 MB states, 21 snapshots, 735 MB) reached
# 1.96 GB max RSS with 1.25 GB of log; with 1 GB, 1.66 GB, and as many executions in 900 s
# (179 against 181: those runs never rejoin, the log's rest is not what they use).
WALK_MEMORY_BYTES = 1792 << 20


# Walk.stats() counters that are levels (the last runtime's), not sums over the runtimes
LEVELS = (
    "snapshots",
    "state_bytes",
    "log_bytes",
    "log_live_bytes",
    "frame_bytes",
    "checkpoint_bytes",
    "run_bytes",
)
# ... and the ones that are the most any runtime reached
MAXIMA = ("sweep_widest_chunk",)


def _add_counters(into: dict[str, int], stats: dict[str, int], *, levels: bool) -> None:
    """Adds one runtime's counters to a walk's: sums, maxima, and (if `levels`) its levels."""
    for name, value in stats.items():
        if name in MAXIMA:
            into[name] = max(into.get(name, 0), value)
        elif name not in LEVELS:
            into[name] = into.get(name, 0) + value
        elif levels:
            into[name] = value


def state_bytes(program: Program) -> int:
    """About the size of one copy of the C runtime's state for this program."""
    n = max(program.n_tensors, 1)
    words = (n + 63) // 64 + 1
    return n * (4 + 8 * 4 + 4 * 8) + 4 * n * words * 8


def walk_log_bytes(program: Program, max_snapshots: int) -> int:
    """The trajectory log's limit for a walk keeping up to `max_snapshots` states of `program`:
    what they leave of WALK_MEMORY_BYTES, at most MAX_LOG_BYTES, and at least 64 MB (a state
    larger than the whole budget still walks, with a small log)."""
    left = WALK_MEMORY_BYTES - max_snapshots * state_bytes(program)
    return max(64 << 20, min(MAX_LOG_BYTES, left))


class Walk:
    """Every distinct execution from budget `start` upward, in budget order.

    Each run resumes from the state where it first differs from the previous one (prefix
    sharing), and when it falls back into the previous run's exact state it takes that run's
    rest over instead of replaying it, or, where a later comparison of that rest would decide
    otherwise at the new budget, skips ahead to just before it (see _native/trajectory.h).
    The records equal fresh runs' records field for field (tests/test_prefix_sharing.py).

    Iterating yields one WalkStep per execution; the caller stops when it has gone far
    enough. A budget-reading policy (TwoPhase) compares inside its scan, where no state is
    kept, so its walk replays every run from the start (same records, no sharing).
    `merging=False` keeps prefix sharing only; `verify_hash=True` recomputes the state hash at
    every boundary (slow: for tests). `checkpoint_words` spaces the copies of the state a jump
    starts from (-1: the runtime's default, one state's worth of changed words; 0: none, a
    jump applies every changed word from where it starts). `sweep_words` caps the bases of one
    label sweep at 64 * sweep_words (1: the 64 of earlier runtimes, for `bench`).
    `incremental=False` searches every neighbourhood from scratch (_native/incremental.h
    updates the reverse ones only the computation's new storages changed, and regions.h
    derives a new storage's forward ones from a parent's; for tests and `bench`).
    `tracking` says which runs keep a trajectory: "auto" (while merges and jumps pay for it,
    engine/sim/walk_tracking.py), "always", "never" (prefix sharing only), or a
    TrackingChoice that decides.
    """

    def __init__(
        self,
        program: Program,
        start: int,
        policy: Policy,
        *,
        remat_limit: float = INF,
        retain: frozenset[int] = frozenset(),
        max_snapshots: int = 64,
        merging: bool = True,
        verify_hash: bool = False,
        max_log_bytes: int | None = None,
        max_run_log_bytes: int = MAX_RUN_LOG_BYTES,
        checkpoint_words: int = -1,
        sweep_words: int = SWEEP_WORDS,
        incremental: bool = True,
        tracking: str | TrackingChoice = "auto",
        point_every: int = POINT_EVERY,
    ) -> None:
        self.program = program
        self.start = start
        self.tracking = (
            tracking if isinstance(tracking, TrackingChoice) else TrackingChoice(tracking)
        )
        self.policy = policy
        self.remat_limit = remat_limit
        self.retain = retain
        self.max_snapshots = max(1, min(max_snapshots, SNAPSHOT_BYTES // state_bytes(program)))
        self.merging = merging
        self.verify_hash = verify_hash
        # None: the share of WALK_MEMORY_BYTES the snapshots leave; 0: unlimited
        self.max_log_bytes = (
            walk_log_bytes(program, self.max_snapshots) if max_log_bytes is None else max_log_bytes
        )
        self.max_run_log_bytes = max_run_log_bytes
        self.checkpoint_words = checkpoint_words
        self.sweep_words = sweep_words
        self.incremental = incremental
        self.point_every = point_every
        self.core: Any = None
        self.fresh_runs = 0
        self.resumed_runs = 0
        self._retired: dict[str, int] = {}  # work counters of the cores replaced by fresh runs

    def _fresh(self, budget: int) -> WalkStep:
        if self.core is not None:
            _add_counters(self._retired, self.core.stats(), levels=False)
        self.core = _core_for(
            self.program,
            budget,
            self.policy,
            remat_limit=self.remat_limit,
            retain=self.retain,
            snapshots=True,
            max_snapshots=self.max_snapshots,
            merging=self.merging,
            verify_hash=self.verify_hash,
            max_log_bytes=self.max_log_bytes,
            max_run_log_bytes=self.max_run_log_bytes,
            checkpoint_words=self.checkpoint_words,
            sweep_words=self.sweep_words,
            incremental=self.incremental,
            point_every=self.point_every,
        )
        began = time.monotonic()
        status = self.core.run(track=self.tracking.track_next())
        self.fresh_runs += 1
        raw = self._observed()
        return WalkStep(_result(status, raw, budget, time.monotonic() - began), 0)

    def _observed(self) -> dict[str, Any]:
        """The last run's result, after telling the tracking choice what it took over."""
        raw = self.core.result()
        self.tracking.observe(raw["tracked"], raw["compared"], share_taken_over(raw))
        return raw

    def __iter__(self) -> Iterator[WalkStep]:
        step = self._fresh(self.start)
        while True:
            yield step
            hi = step.result.same_execution["hi"]
            if hi is None:
                return
            budget = hi + 1
            if self.core.next_budget() == budget:
                began = time.monotonic()
                status = self.core.resume(track=self.tracking.track_next())
                raw = self._observed()
                self.resumed_runs += 1
                wall = time.monotonic() - began
                merged = raw["merged_operator"]
                step = WalkStep(
                    _result(status, raw, budget, wall),
                    raw["resumed_operator"],
                    merged if merged >= 0 else None,
                )
            else:  # no state kept for that point (TwoPhase, or dropped): replay it
                step = self._fresh(budget)

    def stats(self) -> dict[str, int]:
        """Work counters over the whole walk (core.c's over the runtimes it used: summed, the
        levels the live runtime's, the maxima the largest)."""
        out = dict(self._retired)
        if self.core is not None:
            _add_counters(out, self.core.stats(), levels=True)
        out.update(fresh_runs=self.fresh_runs, resumed_runs=self.resumed_runs)
        return out
