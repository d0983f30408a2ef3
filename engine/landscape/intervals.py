"""Same-execution intervals: arithmetic over runs' exact intervals [lo, hi], and exact edges.
Pure functions, data in, results out (no store, no simulator).

An interval is a run's same-execution interval [lo, hi] (hi None: every larger budget): every
budget inside gives the run's execution, so where two touch (one's hi + 1 is the next one's
lo) the budget axis is classified byte for byte and a hole's edges are exact
(docs/DOMAIN.md, "Beyond sampling"). The sampled side, hole counts over ratios, is
engine/landscape/holes.py.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from engine.landscape.interval_table import IntervalTable

FAILING = ("oom", "thrashed")
# Unresolved outcomes are set aside before counting: a timeout, or simrd's stack running out
# (`recursion`, only in imported records; our engine has no such failure mode).
UNRESOLVED = frozenset({"timeout", "recursion"})
RESOLVED = ("ok", *FAILING)


def failing(status: str) -> bool:
    return status in FAILING


def missing(value: Any) -> bool:
    """None, or a null as pandas gives it: NaN and NaT (the values unequal to themselves) or
    pd.NA (whose comparisons are NA, which has no truth value)."""
    if value is None:
        return True
    try:
        return bool(value != value)
    except TypeError:
        return True


@dataclass(frozen=True)
class Interval:
    lo: int
    hi: int | None  # None: every larger budget gives the same execution
    status: str
    overhead: float | None = None
    run_id: str | None = None

    def contains(self, budget: int) -> bool:
        return self.lo <= budget and (self.hi is None or budget <= self.hi)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


# -- interval arithmetic -----------------------------------------------------------------
def distinct_intervals(intervals: Iterable[Interval]) -> tuple[list[Interval], int]:
    """One interval per execution, sorted by lo, plus how many overlapping ones were dropped.
    Runs of one execution share their interval exactly and distinct executions never
    overlap, so an overlap means rows from different engines or settings: the first kept
    (lowest lo) wins and the conflict is counted rather than hidden."""
    by_range: dict[tuple[int, int | None], Interval] = {}
    for interval in intervals:
        by_range.setdefault((interval.lo, interval.hi), interval)
    out: list[Interval] = []
    conflicts = 0
    for key in sorted(by_range, key=lambda k: (k[0], _top(k[1]))):
        interval = by_range[key]
        if out and (out[-1].hi is None or interval.lo <= out[-1].hi):
            conflicts += 1
            continue
        out.append(interval)
    return out, conflicts


def _top(hi: int | None) -> float:
    return float("inf") if hi is None else hi


def covering(intervals: Sequence[Interval], budget: int) -> int | None:
    """Index of the interval (of a sorted, disjoint list) that contains budget, if any."""
    lo, hi = 0, len(intervals) - 1
    while lo <= hi:
        mid = (lo + hi) // 2
        if intervals[mid].lo > budget:
            hi = mid - 1
        elif intervals[mid].contains(budget):
            return mid
        else:
            lo = mid + 1
    return None


def certified_bytes(intervals: Iterable[Interval], start: int, end: int) -> int:
    """Bytes of [start, end] that the (disjoint) intervals cover: a walk's first interval can
    begin below the asked start and its last can end above the asked end."""
    return covered_bytes(((i.lo, i.hi) for i in intervals), start, end)


def covered_bytes(spans: Iterable[tuple[int, int | None]], start: int, end: int) -> int:
    """Bytes of [start, end] inside the (disjoint) spans [lo, hi] (hi None: no upper end)."""
    total = 0
    for span_lo, span_hi in spans:
        lo = max(span_lo, start)
        hi = end if span_hi is None else min(span_hi, end)
        if hi >= lo:
            total += hi - lo + 1
    return total


def stretches(intervals: Iterable[Interval]) -> list[tuple[int, int | None]]:
    """The certified byte ranges: maximal runs of touching intervals (sorted, disjoint), where
    every byte's execution is known. The one definition the report, `holes` and the
    dashboard share."""
    table = _as_table(intervals)
    if table is not None:
        return table.stretches()
    out: list[tuple[int, int | None]] = []
    for interval in intervals:
        if out and out[-1][1] is not None and out[-1][1] + 1 == interval.lo:
            out[-1] = (out[-1][0], interval.hi)
        else:
            out.append((interval.lo, interval.hi))
    return out


def touching_runs(intervals: Sequence[Interval]) -> list[tuple[int, int]]:
    """Index ranges [i, j] of maximal stretches of touching intervals (hi + 1 == next lo)
    that are all failing, or all not failing: the exactly classified stretches."""
    table = _as_table(intervals)
    if table is not None:
        return table.touching_runs()
    runs: list[tuple[int, int]] = []
    i = 0
    while i < len(intervals):
        j = i
        while (
            j + 1 < len(intervals)
            and _touch(intervals[j], intervals[j + 1])
            and failing(intervals[j + 1].status) == failing(intervals[i].status)
        ):
            j += 1
        runs.append((i, j))
        i = j + 1
    return runs


def _as_table(intervals: Iterable[Interval]) -> IntervalTable | None:
    """The intervals as an IntervalTable (engine/landscape/interval_table.py: what `select`
    gives for a DataFrame, whose scans read its arrays), else None: a list, the reference."""
    return intervals if hasattr(intervals, "touching_runs") else None  # type: ignore[return-value]


def statuses_in(intervals: Sequence[Interval], start: int, stop: int) -> set[str]:
    """The outcomes of intervals[start:stop] (a table's without making its Intervals: a hole
    of InceptionV4's band holds 200,000 executions and more)."""
    table = _as_table(intervals)
    if table is not None:
        return {str(status) for status in table.status[start:stop]}
    return {interval.status for interval in intervals[start:stop]}


def _touch(below: Interval, above: Interval) -> bool:
    return below.hi is not None and below.hi + 1 == above.lo


def exact_range(region: dict[str, Any], intervals: Sequence[Interval]) -> dict[str, Any]:
    """A sampled failure region's bytes from the intervals (sorted, disjoint). Its first
    failing byte is the lo of a failing interval touched from below by an ok interval,
    between the last ok sample below and the first failing sample (the lowest such edge if
    several); its last failing byte likewise the hi of a failing interval touched from above
    by an ok one, between the last failing sample and the first ok above (the highest).
    Complete only when the stored intervals cover every byte between the two with no gap;
    `ok_bytes_inside` > 0 then says the region is really several holes."""
    budgets = region["budgets"]
    # Only the intervals from the one holding the last ok budget below to the last starting
    # at or below the first ok budget above can be an edge's pair or hold a byte counted
    # (those before end below last_ok_below, those after start above first_ok_above): a
    # walked landscape has 100,000s of intervals, a region a few.
    start = max(0, bisect_right(intervals, budgets["last_ok_below"], key=_lo) - 1)
    end = bisect_right(intervals, budgets["first_ok_above"], key=_lo)
    intervals = intervals[start:end]
    first_byte = last_byte = None
    for below, above in zip(intervals, intervals[1:], strict=False):
        if not _touch(below, above):
            continue
        assert below.hi is not None
        if (
            first_byte is None
            and below.status == "ok"
            and failing(above.status)
            and budgets["last_ok_below"] <= below.hi
            and above.lo <= budgets["first_fail"]
        ):
            first_byte = above.lo
        if (
            failing(below.status)
            and above.status == "ok"
            and budgets["last_fail"] <= below.hi
            and above.lo <= budgets["first_ok_above"]
        ):
            last_byte = below.hi
    # the classified bytes between the edges, or between the failing samples where an edge
    # is not known yet
    lo = budgets["first_fail"] if first_byte is None else first_byte
    hi = budgets["last_fail"] if last_byte is None else last_byte
    failing_bytes = certified_bytes((i for i in intervals if failing(i.status)), lo, hi)
    ok_bytes = certified_bytes((i for i in intervals if i.status == "ok"), lo, hi)
    width = None
    if first_byte is not None and last_byte is not None:
        width = last_byte - first_byte + 1
    return {
        "first_fail_byte": first_byte,
        "last_fail_byte": last_byte,
        "width": width,
        "complete": width is not None and failing_bytes + ok_bytes == width,
        "failing_bytes_known": failing_bytes,
        "ok_bytes_inside": ok_bytes,
    }


def _lo(interval: Interval) -> int:
    return interval.lo


def interval_holes(intervals: Sequence[Interval]) -> list[dict[str, Any]]:
    """Holes seen by the intervals alone (e.g. after a walk): failing stretches with an ok
    interval touching them directly below and above, so both edges and the width are exact."""
    holes = []
    stretches = touching_runs(intervals)
    for k, (i, j) in enumerate(stretches):
        if not failing(intervals[i].status) or k == 0 or k + 1 == len(stretches):
            continue
        below, above = intervals[stretches[k - 1][1]], intervals[stretches[k + 1][0]]
        if (
            below.status == "ok"
            and above.status == "ok"
            and _touch(below, intervals[i])
            and _touch(intervals[j], above)
        ):
            last = intervals[j].hi
            assert last is not None
            holes.append(
                {
                    "first_fail_byte": intervals[i].lo,
                    "last_fail_byte": last,
                    "width": last - intervals[i].lo + 1,
                    "intervals": j - i + 1,
                    # the runs that prove it: the ok run just below, the failing runs at
                    # its two ends, the ok run just above
                    "run_ids": {
                        "ok_below": below.run_id,
                        "first_fail": intervals[i].run_id,
                        "last_fail": intervals[j].run_id,
                        "ok_above": above.run_id,
                    },
                }
            )
    return holes


def interval_edges(intervals: Sequence[Interval]) -> dict[str, Any]:
    """The first success and stable-from (holes.py `count_holes`, on samples) of the intervals
    (sorted, disjoint), to the byte:
    - first success: the lowest byte whose execution completes;
    - stable from: the lowest byte from which every byte up to the highest classified one
      completes, touching intervals with no gap (`to`: that highest byte, None for no upper
      end); None when the highest classified execution fails.
    Each has `failing_from`, the lowest byte of the touching failing intervals directly below
    it: every byte from there up to the edge fails, so the edge is proven to the byte. None
    when the byte just below is not classified (or, below a first success, does not fail):
    the true edge may then lie lower, in the unclassified bytes, and the byte is an upper
    bound only (a trace only sampled has intervals that touch nothing).
    Either is None without a completing interval."""
    table = _as_table(intervals)
    if table is not None:
        first = table.first_ok()
    else:
        first = next((k for k, interval in enumerate(intervals) if interval.status == "ok"), None)
    first_success = None
    if first is not None:
        first_success = {
            "byte": intervals[first].lo,
            "run_id": intervals[first].run_id,
            "failing_from": _failing_from(intervals, first),
        }
    stable_from = None
    if intervals and intervals[-1].status == "ok":
        k = _lowest_touching(intervals, len(intervals) - 1, ok=True)
        stable_from = {
            "byte": intervals[k].lo,
            "run_id": intervals[k].run_id,
            "to": intervals[-1].hi,
            "failing_from": _failing_from(intervals, k),
        }
    return {"first_success": first_success, "stable_from": stable_from}


def _failing_from(intervals: Sequence[Interval], k: int) -> int | None:
    """The lowest byte of the failing intervals touching intervals[k] from below, one after
    another with no gap (None without one)."""
    j = _lowest_touching(intervals, k, ok=False)
    return intervals[j].lo if j < k else None


def _lowest_touching(intervals: Sequence[Interval], k: int, *, ok: bool) -> int:
    """The lowest j <= k such that intervals j..k touch one after another and j..k-1 all
    complete (ok) or all fail (not ok)."""
    table = _as_table(intervals)
    if table is not None:
        return table.lowest_touching(k, table.ok if ok else table.failing)
    j = k
    while (
        j > 0
        and _touch(intervals[j - 1], intervals[j])
        and (intervals[j - 1].status == "ok" if ok else failing(intervals[j - 1].status))
    ):
        j -= 1
    return j


# -- rows ------------------------------------------------------------------------------------
def interval_from_row(row: dict[str, Any]) -> Interval:
    hi: Any = row.get("same_hi")
    overhead: Any = row.get("overhead")
    return Interval(
        lo=int(row["same_lo"]),
        hi=None if missing(hi) else int(hi),
        status=str(row["status"]),
        overhead=None if missing(overhead) else float(overhead),
        run_id=row.get("run_id"),
    )


# -- edges ---------------------------------------------------------------------------------
Probe = Callable[[int], Interval]


def bisect_edge(below: Interval, above: Interval, probe: Probe) -> list[tuple[Interval, Interval]]:
    """Exact edges between two intervals of different statuses, `below` under `above` with a
    gap between them. Probing m in the gap returns m's interval M (inside the gap, since
    executions do not overlap); M replaces the side whose status it shares, so the gap
    shrinks every step. A third status (thrashed between ok and oom) means an edge on each
    side of M: both are pursued. Iterative, so a long chain cannot exhaust the stack."""
    edges: list[tuple[Interval, Interval]] = []
    pending = [(below, above)]
    while pending:
        a, b = pending.pop()
        assert a.hi is not None
        if a.hi + 1 == b.lo:
            if a.status != b.status:
                edges.append((a, b))
            continue
        m = (a.hi + 1 + b.lo - 1) // 2
        found = probe(m)
        if not found.contains(m) or found.lo <= a.hi or found.hi is None or found.hi >= b.lo:
            raise RuntimeError(
                f"budget {m} gave interval [{found.lo}, {found.hi}] outside the gap "
                f"[{a.hi + 1}, {b.lo - 1}]: the intervals are inconsistent"
            )
        if found.status == a.status:
            pending.append((found, b))
        elif found.status == b.status:
            pending.append((a, found))
        else:
            pending.append((found, b))
            pending.append((a, found))
    return sorted(edges, key=lambda e: e[0].lo)


def find_edges(
    intervals: Sequence[Interval], probe: Probe
) -> tuple[list[tuple[Interval, Interval]], int]:
    """Every exact edge between neighbouring known intervals (sorted, disjoint) of different
    statuses: touching pairs as they are, gaps bisected with `probe`. Returns the edges and
    how many gaps were bisected."""
    edges: list[tuple[Interval, Interval]] = []
    bisected = 0
    for a, b in zip(intervals, intervals[1:], strict=False):
        if a.status == b.status:
            continue
        if _touch(a, b):
            edges.append((a, b))
        else:
            bisected += 1
            edges.extend(bisect_edge(a, b, probe))
    return edges, bisected
