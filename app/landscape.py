"""Landscape arithmetic over a frame of runs (the store's `runs` columns). Pure functions.

Sampled holes follow DOMAIN.md's definitions ("Counting holes"): timeouts set aside first;
a completing sample is `ok`, a failing one `oom` or `thrashed`. A region's exact width in
bytes is known only when the same-execution intervals of its failing samples chain without
a gap from just above the last completing sample's interval to just below the next one's.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from engine.landscape.holes import FAILING, UNRESOLVED, count_holes
from engine.landscape.holes import Sample as HoleSample


def with_x(frame: pd.DataFrame) -> pd.DataFrame:
    """The frame plus `x`, the budget as a ratio of the trace's peak (budget / peak)."""
    out = frame.copy()
    if out.empty:
        out["x"] = pd.Series(dtype=float)
        return out
    peak = pd.to_numeric(out["peak"], errors="coerce")
    out["x"] = pd.to_numeric(out["budget"], errors="coerce") / peak.where(peak > 0)
    return out


def is_imported(source: Any) -> bool:
    return isinstance(source, str) and source.startswith("import:")


def sampled(frame: pd.DataFrame) -> pd.DataFrame:
    """One run per budget (the newest), what-if runs (retained storages) left out, by budget."""
    if frame.empty:
        return frame
    plain = frame[frame["retained"].fillna("") == ""]
    order = ["budget", "started_at"] if "started_at" in plain else ["budget"]
    plain = plain.sort_values(order, na_position="first", kind="stable")
    return plain.drop_duplicates("budget", keep="last").reset_index(drop=True)


@dataclass(frozen=True)
class Sample:
    run_id: str
    budget: int
    ratio: float | None
    status: str


@dataclass(frozen=True)
class Region:
    """A maximal run of failing samples with a completing sample just below and above."""

    last_ok_below: Sample
    first_fail: Sample
    last_fail: Sample
    first_ok_above: Sample
    failing_samples: int
    exact_width: int | None  # bytes, when the failing intervals are known to chain


@dataclass(frozen=True)
class Holes:
    samples: int
    timeouts: int
    first_success: Sample | None
    failing_above_first_success: int
    regions: list[Region] = field(default_factory=list)
    low_edge: tuple[Sample | None, Sample | None] = (None, None)  # last fail, first ok
    high_edge: tuple[Sample | None, Sample | None] = (None, None)  # last ok, first fail above
    stable_from: Sample | None = None


def _sample(row: Any) -> Sample:
    peak = row.get("peak")
    ratio = row["budget"] / peak if peak and peak == peak and peak > 0 else None
    return Sample(str(row["run_id"]), int(row["budget"]), ratio, str(row["status"]))


def _exact_width(ok_below: Any, fails: list[Any], ok_above: Any) -> int | None:
    hi_below, lo_above = ok_below.get("same_hi"), ok_above.get("same_lo")
    if pd.isna(hi_below) or pd.isna(lo_above):
        return None
    covered = int(hi_below) + 1  # the first byte not known to complete
    for row in fails:
        lo, hi = row.get("same_lo"), row.get("same_hi")
        if pd.isna(lo) or pd.isna(hi) or int(lo) > covered:
            return None  # an unclassified gap
        covered = max(covered, int(hi) + 1)
    if covered < int(lo_above):
        return None
    return int(lo_above) - int(hi_below) - 1


def holes(frame: pd.DataFrame) -> Holes:
    """Sampled holes of one trace under one policy. The counting is engine/landscape/holes.py's
    (one definition for the CLI and the dashboard); here samples are ordered by budget (runs of
    one trace share its peak), and each region keeps its runs so the table can open them."""
    runs = sampled(frame)
    if runs.empty:
        return Holes(samples=0, timeouts=0, first_success=None, failing_above_first_success=0)
    rows = runs.to_dict("records")
    by_budget = {int(row["budget"]): row for row in rows}
    counted = count_holes(
        HoleSample(ratio=float(row["budget"]), budget=int(row["budget"]), status=str(row["status"]))
        for row in rows
    )

    def sample(point: dict[str, Any] | None) -> Sample | None:
        return _sample(by_budget[int(point["budget"])]) if point else None

    regions = []
    for region in counted["regions"]:
        budgets = region["budgets"]
        ok_below, ok_above = (
            by_budget[budgets["last_ok_below"]],
            by_budget[budgets["first_ok_above"]],
        )
        streak = [
            row
            for row in rows
            if budgets["first_fail"] <= row["budget"] <= budgets["last_fail"]
            and row["status"] in FAILING
        ]
        regions.append(
            Region(
                _sample(ok_below),
                _sample(by_budget[budgets["first_fail"]]),
                _sample(by_budget[budgets["last_fail"]]),
                _sample(ok_above),
                len(streak),
                _exact_width(ok_below, streak, ok_above),
            )
        )
    resolved = [row for row in rows if row["status"] not in UNRESOLVED]
    first = sample(counted["first_success"])
    low_fail = [
        r for r in resolved if first and r["budget"] < first.budget and r["status"] in FAILING
    ]
    ok_rows = [r for r in resolved if r["status"] == "ok"]
    last_ok = ok_rows[-1] if ok_rows else None
    high_fail = [r for r in resolved if last_ok is not None and r["budget"] > last_ok["budget"]]
    return Holes(
        samples=len(rows),
        timeouts=int(counted["timeouts_set_aside"]),
        first_success=first,
        failing_above_first_success=len(counted["failing_above"]),
        regions=regions,
        low_edge=(_sample(low_fail[-1]) if low_fail else None, first),
        high_edge=(
            _sample(last_ok) if last_ok is not None else None,
            _sample(high_fail[0]) if high_fail else None,
        ),
        stable_from=sample(counted["stable_from"]),
    )


@dataclass(frozen=True)
class Coverage:
    """Budgets certified by exact walks: merged [lo, hi] byte intervals."""

    intervals: list[tuple[int, int]]
    walks: int
    complete: int

    @property
    def bytes(self) -> int:
        return sum(hi - lo + 1 for lo, hi in self.intervals)


def coverage(walks: pd.DataFrame) -> Coverage:
    """Merge the walks' certified ranges [from_budget, reached]."""
    if walks.empty:
        return Coverage([], 0, 0)
    spans = sorted(
        (int(r["from_budget"]), int(r["reached"]))
        for _, r in walks.iterrows()
        if pd.notna(r["from_budget"])
        and pd.notna(r["reached"])
        and r["reached"] >= r["from_budget"]
    )
    merged: list[tuple[int, int]] = []
    for lo, hi in spans:
        if merged and lo <= merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], max(merged[-1][1], hi))
        else:
            merged.append((lo, hi))
    complete = int(walks["complete"].fillna(False).astype(bool).sum())
    return Coverage(merged, len(walks), complete)


def neighbours(frame: pd.DataFrame, budget: int) -> tuple[dict | None, dict | None]:
    """The stored runs at the nearest budgets below and above `budget` (sampled runs)."""
    runs = sampled(frame)
    if runs.empty:
        return None, None
    below = runs[runs["budget"] < budget]
    above = runs[runs["budget"] > budget]
    return (
        below.iloc[-1].to_dict() if not below.empty else None,
        above.iloc[0].to_dict() if not above.empty else None,
    )
