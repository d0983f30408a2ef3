"""Sorted, disjoint same-execution intervals held as columns: what `select` gives for a
DataFrame (engine/landscape/frame_selection.py). A walked landscape holds 100,000s of
intervals (InceptionV4's: 483,251), and making one `Interval` each, then scanning them one
by one for the holes, the certified stretches and the edges, took most of the 8 s its
`holes` and its dashboard cards took. The table is a Sequence of Intervals, made only when
one is asked for, and it answers the scans of engine/landscape/intervals.py from its arrays;
those functions call these methods when given a table, and their code over a list of
Intervals is the reference (tests/test_holes.py holds the two equal on random intervals).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, overload

import numpy as np

from engine.landscape.intervals import FAILING, Interval, missing


class IntervalTable(Sequence[Interval]):
    def __init__(
        self,
        lo: np.ndarray,
        hi: np.ndarray,
        open_: np.ndarray,
        status: list[Any],
        overhead: list[Any],
        run_id: list[Any],
    ) -> None:
        """lo, hi (int64; hi of an open interval ignored), open_ (bool: no upper end) and the
        raw status, overhead and run id of each interval, sorted by lo and disjoint."""
        self.lo = np.asarray(lo, dtype=np.int64)
        self.hi = np.asarray(hi, dtype=np.int64)
        self.open = np.asarray(open_, dtype=bool)
        self.status, self.overhead, self.run_id = status, overhead, run_id
        n = len(self.lo)
        statuses = np.asarray(status, dtype=object) if n else np.zeros(0, dtype=object)
        self.failing = np.isin(statuses, FAILING)
        self.ok = statuses == "ok"
        # touch[k]: interval k's hi + 1 is interval k+1's lo (no byte between them)
        self.touch = ~self.open[:-1] & (self.hi[:-1] + 1 == self.lo[1:])

    @classmethod
    def of(cls, intervals: Sequence[Interval]) -> IntervalTable:
        """The table of sorted, disjoint Intervals."""
        return cls(
            np.array([i.lo for i in intervals], dtype=np.int64),
            np.array([0 if i.hi is None else i.hi for i in intervals], dtype=np.int64),
            np.array([i.hi is None for i in intervals], dtype=bool),
            [i.status for i in intervals],
            [i.overhead for i in intervals],
            [i.run_id for i in intervals],
        )

    def __len__(self) -> int:
        return len(self.lo)

    @overload
    def __getitem__(self, k: int) -> Interval: ...

    @overload
    def __getitem__(self, k: slice) -> list[Interval]: ...

    def __getitem__(self, k: int | slice) -> Interval | list[Interval]:
        if isinstance(k, slice):
            return [self._interval(i) for i in range(*k.indices(len(self)))]
        if k < 0:
            k += len(self)
        if not 0 <= k < len(self):
            raise IndexError(k)
        return self._interval(k)

    def _interval(self, k: int) -> Interval:
        overhead = self.overhead[k]
        return Interval(
            lo=int(self.lo[k]),
            hi=None if self.open[k] else int(self.hi[k]),
            status=str(self.status[k]),
            overhead=None if missing(overhead) else float(overhead),
            run_id=self.run_id[k],
        )

    def __eq__(self, other: object) -> bool:
        """Equal to any sequence of the same Intervals (a list, as the row-wise code gives)."""
        if not isinstance(other, Sequence) or isinstance(other, str):
            return NotImplemented
        return len(self) == len(other) and list(self) == list(other)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"IntervalTable({len(self)} intervals)"

    # -- the scans of engine/landscape/intervals.py --------------------------------------
    def _breaks(self, same: np.ndarray) -> np.ndarray:
        """Indices k where a stretch ends: interval k does not touch k+1, or `same` (per k)
        is false. The last interval always ends one (the table is not empty)."""
        return np.append(np.flatnonzero(~(self.touch & same)), len(self) - 1)

    def touching_runs(self) -> list[tuple[int, int]]:
        if not len(self):
            return []
        fail = self.failing
        ends = self._breaks(fail[:-1] == fail[1:]).tolist()
        starts = [0, *(e + 1 for e in ends[:-1])]
        return list(zip(starts, ends, strict=True))

    def stretches(self) -> list[tuple[int, int | None]]:
        if not len(self):
            return []
        ends = self._breaks(np.ones(max(len(self) - 1, 0), dtype=bool)).tolist()
        starts = [0, *(e + 1 for e in ends[:-1])]
        return [
            (int(self.lo[s]), None if self.open[e] else int(self.hi[e]))
            for s, e in zip(starts, ends, strict=True)
        ]

    def first_ok(self) -> int | None:
        found = np.flatnonzero(self.ok)
        return int(found[0]) if len(found) else None

    def lowest_touching(self, k: int, among: np.ndarray) -> int:
        """The lowest j <= k such that intervals j..k touch one after another and every one
        of j..k-1 is in `among` (a bool per interval)."""
        steps = self.touch[:k] & among[:k]
        blocked = np.flatnonzero(~steps)
        return int(blocked[-1]) + 1 if len(blocked) else 0
