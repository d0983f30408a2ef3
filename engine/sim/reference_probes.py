"""Observing unmodified simrd without changing it: the budget probe and the runtime
subclass that engine/sim/reference.py runs simrd with.

Both only count and sample, then hand control back to simrd unchanged; no decision of the
simulator depends on anything defined here (the only deliberate changes are the what-if
``retain`` set and the wall-clock deadline, both opt-in).

Counting rules (each checked against every golden record that simrd finishes in < 10 s):

* ``rematerializations`` counts rebuilds *started*: every materialization that is not a
  model operator's first computation (nested parents, and outputs rebuilt to be pinned at
  the end). Collateral siblings computed by the same rebuild are not counted again, and in
  an OOM run the rebuilds still in progress at the failure are counted.
* ``depth_at_peak_pinned`` is the nesting depth at the *first* sample that reached the peak
  (a later sample with an equal value does not move it).
* ``same_execution``: ``lo`` is the largest compared value that fit the budget, or 0 when
  none did (the run failed before anything fit); ``hi`` is one less than the smallest
  compared value that did not fit, or null when every comparison fit.
* ``failure`` is taken where the eviction loop finds the pool empty: ``operator`` is the
  number of model operators started (constants included), ``request`` the size being
  allocated, ``pinned`` the resident bytes outside the pool, ``depth`` the nesting depth.
"""

from __future__ import annotations

import time
from typing import Any


class TimeLimitReached(Exception):
    """Raised from inside a hook when the wall-clock limit has passed."""


# --------------------------------------------------------------------------- the budget probe


class RecordingBudget:
    """Stands in for the integer budget and remembers what it is compared with.

    simrd only ever uses its budget as the right operand of ``used + request > budget``
    (the allocation check and the eviction loop) and ``... <= budget`` (an assertion).
    Neither ``int`` nor ``float`` knows this type, so Python falls back to the reflected
    method here, which answers exactly as the integer would and keeps, of all compared
    values, the largest one that fits and the smallest one that does not.
    """

    __slots__ = ("value", "fits_max", "exceeds_min", "comparisons")

    def __init__(self, value: int) -> None:
        self.value = int(value)
        self.fits_max: int | None = None  # largest compared v with v <= value
        self.exceeds_min: int | None = None  # smallest compared v with v > value
        self.comparisons = 0

    def _see(self, v) -> None:
        self.comparisons += 1
        if v <= self.value:
            if self.fits_max is None or v > self.fits_max:
                self.fits_max = v
        elif self.exceeds_min is None or v < self.exceeds_min:
            self.exceeds_min = v

    # reflected forms: `v > budget` calls budget.__lt__(v), and so on.
    def __lt__(self, v):
        self._see(v)
        return self.value < v

    def __le__(self, v):
        self._see(v)
        return self.value <= v

    def __gt__(self, v):
        self._see(v)
        return self.value > v

    def __ge__(self, v):
        self._see(v)
        return self.value >= v

    def __eq__(self, v):
        return self.value == v

    def __ne__(self, v):
        return self.value != v

    __hash__ = None  # type: ignore[assignment]

    def __int__(self) -> int:
        return self.value

    __index__ = __int__

    def __repr__(self) -> str:
        return f"RecordingBudget({self.value})"

    def interval(self) -> dict[str, int | None]:
        lo = self.fits_max if self.fits_max is not None else 0
        hi = None if self.exceeds_min is None else self.exceeds_min - 1
        return {"lo": int(lo), "hi": None if hi is None else int(hi)}


# --------------------------------------------------------------------------- the observer


def observed_runtime_class(simrd):
    """A subclass of simrd's RuntimeV2EagerOptimized that only counts and samples."""
    base: Any = simrd.runtime.RuntimeV2EagerOptimized

    class ObservedRuntime(base):
        def __init__(self, budget, heuristic, *, retain=frozenset(), deadline=None, **kwargs):
            super().__init__(budget, heuristic, **kwargs)
            self.obs_retain = frozenset(retain)
            self.obs_deadline = deadline
            self.obs_pool_bytes = 0
            self.obs_operators = 0
            self.obs_depth = 0
            self.obs_max_depth = 0
            self.obs_remat_calls = 0  # rebuilds started (the record's rematerializations)
            self.obs_remat_tensors = 0  # tensors defined by rebuilds, collateral included
            self.obs_evictions = 0
            self.obs_policy_evictions = 0
            self.obs_in_free = False
            self.obs_peak_pinned = None
            self.obs_depth_first_peak = None
            self.obs_depth_last_peak = None
            self.obs_failure = None

        # -- pool bookkeeping (pinned bytes = resident bytes outside the pool)
        def _make_evictable(self, s):
            if s.root_id in self.obs_retain:
                return True  # what-if: never offered to the policy
            added = super()._make_evictable(s)
            if added:
                self.obs_pool_bytes += s.size
            return added

        def _make_unevictable(self, s):
            if s.root_id in self.obs_retain and s not in self.storage_pool:
                return True
            removed = super()._make_unevictable(s)
            if removed:
                self.obs_pool_bytes -= s.size
            return removed

        def obs_pinned(self):
            return self.memory_usage - self.obs_pool_bytes

        def obs_sample(self):
            pinned = self.obs_pinned()
            if self.obs_peak_pinned is None or pinned > self.obs_peak_pinned:
                self.obs_peak_pinned = pinned
                self.obs_depth_first_peak = self.obs_depth
                self.obs_depth_last_peak = self.obs_depth
            elif pinned == self.obs_peak_pinned:
                self.obs_depth_last_peak = self.obs_depth
            return pinned

        def obs_check_clock(self):
            if self.obs_deadline is not None and time.perf_counter() > self.obs_deadline:
                raise TimeLimitReached()

        # -- counters
        def compute(self, inputs, op, ids=None, names=None):
            self.obs_operators += 1
            return super().compute(inputs, op, ids=ids, names=names)

        def _materialize(self, t, rematerialize=True):
            self.obs_depth += 1
            if self.obs_depth > self.obs_max_depth:
                self.obs_max_depth = self.obs_depth
            if rematerialize:
                self.obs_remat_calls += 1
            try:
                return super()._materialize(t, rematerialize=rematerialize)
            finally:
                self.obs_depth -= 1

        def _T_compute(self, t, rematerialize, direct):
            if rematerialize:
                self.obs_remat_tensors += 1
            return super()._T_compute(t, rematerialize=rematerialize, direct=direct)

        def _T_pressure(self, t):
            self.obs_check_clock()
            self.obs_sample()
            return super()._T_pressure(t)

        def _evict(self, s):
            self.obs_evictions += 1
            if self.obs_in_free:
                self.obs_policy_evictions += 1
            super()._evict(s)
            self.obs_check_clock()

        def _free(self, size):
            self.obs_in_free = True
            try:
                return super()._free(size)
            except MemoryError:
                pinned = self.obs_sample()
                self.obs_failure = {
                    "operator": self.obs_operators,
                    "request": size,
                    "pinned": pinned,
                    "depth": self.obs_depth,
                    "over_by": self.memory_usage + size - int(self.budget),
                }
                raise
            finally:
                self.obs_in_free = False

    return ObservedRuntime
