"""The landscape of a frame of runs (the store's `runs` columns) as the pages show it. Pure.

Which runs are samples, the hole counts and the exact widths are the engine's
(engine/landscape/holes.py `landscape_holes`, the same function `dtr-landscape holes` calls);
this module only adapts its report into the dataclasses the components take, and adds what
is the dashboard's own: the ratio axis, walk coverage and a run's neighbours.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from engine.landscape.holes import age_key, comparable, landscape_holes, missing
from engine.sim.simulate import DEFAULT_CAP


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
    exact_width: int | None  # bytes from the first to the last failing byte, when both are known
    complete: bool = False  # every byte between them classified by stored intervals
    ok_bytes_inside: int = 0  # completing bytes inside: really several holes


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
    cap: float = DEFAULT_CAP
    other_versions: int = 0  # trace versions stored besides the one shown (the newest)


def _sample(point: dict[str, Any]) -> Sample:
    """A sample of the engine's report; its run id is what a click opens."""
    return Sample(str(point["run_id"]), int(point["budget"]), point["ratio"], point["status"])


def _maybe(point: dict[str, Any] | None) -> Sample | None:
    return None if point is None else _sample(point)


def _region(region: dict[str, Any]) -> Region:
    ends, exact = region["points"], region["bytes"]
    return Region(
        last_ok_below=_sample(ends["last_ok_below"]),
        first_fail=_sample(ends["first_fail"]),
        last_fail=_sample(ends["last_fail"]),
        first_ok_above=_sample(ends["first_ok_above"]),
        failing_samples=int(region["failing_samples"]),
        exact_width=exact["width"],
        complete=bool(exact["complete"]),
        ok_bytes_inside=int(exact["ok_bytes_inside"]),
    )


def holes(frame: pd.DataFrame, policy: str, cap: float = DEFAULT_CAP) -> Holes:
    """Sampled holes of one trace under (policy, cap), as `dtr-landscape holes` counts them:
    the samples and exact widths are engine/landscape/holes.py's `landscape_holes`. Here the
    report only becomes dataclasses for the components; of several stored versions of the
    trace, the newest is shown."""
    if frame.empty:
        return Holes(samples=0, timeouts=0, first_success=None, failing_above_first_success=0)
    report = landscape_holes(frame, policy=policy, cap=cap, newest_version=True)
    regions = [_region(r) for r in report["regions"]]
    low, high = report["low_edge"], report["high_edge"]
    return Holes(
        samples=int(report["samples"]),
        timeouts=int(report["timeouts_set_aside"]),
        first_success=_maybe(report["first_success"]),
        failing_above_first_success=len(report["failing_above"]),
        regions=regions,
        low_edge=(_maybe(low["last_fail"]), _maybe(low["first_ok"])),
        high_edge=(_maybe(high["last_ok"]), _maybe(high["first_fail"])),
        stable_from=_maybe(report["stable_from"]),
        cap=cap,
        other_versions=max(0, len(report["trace_versions"]) - 1),
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


def neighbours(frame: pd.DataFrame, record: dict[str, Any]) -> tuple[dict | None, dict | None]:
    """The stored runs at the nearest budgets below and above a run's, in its landscape: the
    runs comparable with it (engine/landscape/holes.py: its policy and cap, no what-ifs, not
    excluded) of its trace version, the newest run per budget."""
    if frame.empty:
        return None, None
    policy = str(record.get("policy"))
    cap = DEFAULT_CAP if missing(record.get("cap")) else float(record["cap"])
    version = record.get("trace_sha256")
    rows = [
        row
        for row in frame.to_dict("records")
        if comparable(row, policy, cap)
        and (missing(version) or row.get("trace_sha256") == version)
        and not missing(row.get("budget"))
    ]
    newest = {int(row["budget"]): row for row in sorted(rows, key=age_key)}
    budget = int(record["budget"])
    below = [b for b in newest if b < budget]
    above = [b for b in newest if b > budget]
    return (
        newest[max(below)] if below else None,
        newest[min(above)] if above else None,
    )
