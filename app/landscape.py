"""The landscape of a frame of runs (the store's `runs` columns) as the pages show it. Pure.

Which runs are samples, the hole counts and the exact widths are the engine's
(engine/landscape/holes.py `landscape_holes`, the same function `dtr-landscape holes` calls);
this module only adapts its report into the dataclasses the components take, and adds what
is the dashboard's own: the ratio axis, walk coverage, a run's neighbours, and what a chart
of a whole walked landscape (100,000 runs and more) can draw: its intervals merged into
stretches of one outcome, and its runs thinned with every change of outcome kept.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from engine.landscape.holes import (
    SELECTED_COLUMNS,
    age_key,
    comparable,
    landscape_holes,
    missing,
)
from engine.landscape.report import budget_range, certified_share
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


def imported(sources: pd.Series) -> list[bool]:
    """`is_imported` of each run's source, by column where the sources are text (a walked
    landscape's 483,255 runs: 1.5 s one by one, from pandas' string column)."""
    if pd.api.types.is_string_dtype(sources.dtype) and not pd.api.types.is_object_dtype(
        sources.dtype
    ):
        return sources.str.startswith("import:").fillna(False).astype(bool).tolist()
    return [is_imported(s) for s in sources]


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
class ExactHole:
    """A hole the stored intervals alone prove (engine/landscape/intervals.py
    `interval_holes`): every byte of it fails, and ok intervals touch it below and above."""

    first_fail_byte: int
    last_fail_byte: int
    width: int
    intervals: int
    ok_below: str
    first_fail: str
    last_fail: str
    ok_above: str


@dataclass(frozen=True)
class ExactEdges:
    """The first success and stable-from of the stored intervals (engine/landscape/intervals.py
    `interval_edges`): to the byte when failing bytes touch them from below, upper bounds
    otherwise."""

    first_success: int | None = None
    failing_from: int | None = None  # every byte from here up to the first success fails
    stable_from: int | None = None
    stable_to: int | None = None  # every byte from stable_from up to here completes (None: all)
    stable_failing_from: int | None = None  # every byte from here up to stable_from fails


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
    exact: list[ExactHole] = field(default_factory=list)
    # the byte ranges the stored intervals classify, [lo, hi] (hi None: no upper end)
    certified: list[tuple[int, int | None]] = field(default_factory=list)
    edges: ExactEdges = ExactEdges()


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


# the stored columns `holes` reads (a frame of only these gives the same report)
HOLES_COLUMNS = SELECTED_COLUMNS


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
        exact=[_exact(h) for h in report["interval_holes"]],
        certified=[(int(lo), None if hi is None else int(hi)) for lo, hi in report["certified"]],
        edges=_edges(report["exact_first_success"], report["exact_stable_from"]),
    )


def _edges(first: dict[str, Any] | None, stable: dict[str, Any] | None) -> ExactEdges:
    return ExactEdges(
        first_success=None if first is None else int(first["byte"]),
        failing_from=_failing_from(first),
        stable_from=None if stable is None else int(stable["byte"]),
        stable_to=None if stable is None or stable["to"] is None else int(stable["to"]),
        stable_failing_from=_failing_from(stable),
    )


def _failing_from(edge: dict[str, Any] | None) -> int | None:
    return None if edge is None or edge["failing_from"] is None else int(edge["failing_from"])


def _exact(hole: dict[str, Any]) -> ExactHole:
    runs = hole["run_ids"]
    return ExactHole(
        first_fail_byte=int(hole["first_fail_byte"]),
        last_fail_byte=int(hole["last_fail_byte"]),
        width=int(hole["width"]),
        intervals=int(hole["intervals"]),
        ok_below=str(runs["ok_below"]),
        first_fail=str(runs["first_fail"]),
        last_fail=str(runs["last_fail"]),
        ok_above=str(runs["ok_above"]),
    )


@dataclass(frozen=True)
class Coverage:
    """What exact walks classified: the certified stretches of the stored intervals (the
    report's and `holes`'s, engine/landscape/intervals.py), and the walks recorded."""

    stretches: list[tuple[int, int | None]]
    walks: int
    complete: int

    def share(self, peak: int) -> float:
        """Of the useful range (report.USEFUL_RANGE x peak), the share certified."""
        return certified_share(self.stretches, peak)

    def useful_gaps(self, peak: int) -> list[tuple[int, int]]:
        """The gaps of the useful range (report.USEFUL_RANGE x peak)."""
        return self.gaps(*budget_range(peak))

    def gaps(self, start: int, end: int) -> list[tuple[int, int]]:
        """The byte ranges of [start, end] no stretch certifies, in budget order."""
        out: list[tuple[int, int]] = []
        at = start  # the lowest byte not yet accounted for
        for lo, hi in self.stretches:
            if at > end:
                break
            if lo > at:
                out.append((at, min(lo - 1, end)))
            at = max(at, end + 1 if hi is None else hi + 1)
        if at <= end:
            out.append((at, end))
        return out


def coverage(found: Holes, walks: pd.DataFrame) -> Coverage:
    """The certified stretches of `found`'s intervals, and how many walks ran (complete)."""
    complete = int(walks["complete"].fillna(False).astype(bool).sum()) if len(walks) else 0
    return Coverage(list(found.certified), len(walks), complete)


def neighbours(frame: pd.DataFrame, record: dict[str, Any]) -> tuple[dict | None, dict | None]:
    """The stored runs at the nearest budgets below and above a run's, in its landscape: the
    runs comparable with it (engine/landscape/holes.py: its policy and cap, no what-ifs, not
    excluded) of its trace version, the newest run per budget. Runs are looked at from the
    nearest budget outward, so a walked landscape's 100,000 runs cost one sort."""
    if frame.empty or "budget" not in frame:
        return None, None
    policy = str(record.get("policy"))
    cap = DEFAULT_CAP if missing(record.get("cap")) else float(record["cap"])
    version = record.get("trace_sha256")
    budget = int(record["budget"])
    rows = frame[frame["budget"].notna() & (frame["policy"] == policy)]
    if not missing(version) and "trace_sha256" in rows:
        rows = rows[rows["trace_sha256"] == version]
    below = rows[rows["budget"] < budget].sort_values("budget", ascending=False, kind="stable")
    above = rows[rows["budget"] > budget].sort_values("budget", kind="stable")
    return _nearest(below, policy, cap), _nearest(above, policy, cap)


def _nearest(ordered: pd.DataFrame, policy: str, cap: float) -> dict | None:
    """The newest comparable run at the first budget of `ordered` that has one."""
    at: Any = None
    found: list[dict] = []
    for row in _chunks(ordered):
        if found and row["budget"] != at:
            break
        if comparable(row, policy, cap):
            at = row["budget"]
            found.append(row)
    return max(found, key=age_key) if found else None


def _chunks(frame: pd.DataFrame, size: int = 256) -> Any:
    """The frame's rows as dicts, a few at a time (most lookups stop in the first few)."""
    for start in range(0, len(frame), size):
        yield from frame.iloc[start : start + size].to_dict("records")


# -- charts of many runs ---------------------------------------------------------------------
def bands(frame: pd.DataFrame, limit: int) -> pd.DataFrame:
    """The frame's same-execution intervals as bands: columns lo, hi (bytes; hi NaN for 'any
    larger'), status, run_id, peak and executions. Up to `limit` distinct intervals are one
    band each; more (a walked landscape) are merged where they touch and share an outcome,
    one band per stretch, its run_id the stretch's lowest execution."""
    columns = ["lo", "hi", "status", "run_id", "peak", "executions"]
    if frame.empty or "same_lo" not in frame:
        return pd.DataFrame(columns=columns)
    known = frame[frame["same_lo"].notna() & frame["peak"].notna()]
    known = known.drop_duplicates(["same_lo", "same_hi", "status"]).sort_values("same_lo")
    out = pd.DataFrame(
        {
            "lo": known["same_lo"].astype("int64").to_numpy(),
            "hi": known["same_hi"].astype("float64").to_numpy(),
            "status": known["status"].to_numpy(),
            "run_id": known["run_id"].to_numpy(),
            "peak": known["peak"].astype("float64").to_numpy(),
            "executions": 1,
        }
    )
    if len(out) <= limit:
        return out
    # a new stretch where the outcome changes or a gap opens (hi + 1 != next lo)
    touches = out["hi"].shift(1).add(1).eq(out["lo"])
    starts = ~(touches & out["status"].eq(out["status"].shift(1)))
    stretch = starts.cumsum()
    merged = out.groupby(stretch, sort=True).agg(
        lo=("lo", "first"),
        hi=("hi", "last"),
        status=("status", "first"),
        run_id=("run_id", "first"),
        peak=("peak", "first"),
        executions=("executions", "sum"),
    )
    return merged.reset_index(drop=True)[columns]


def thinned(frame: pd.DataFrame, limit: int) -> pd.DataFrame:
    """At most `limit` of the frame's runs, for markers: in budget order, every run whose
    outcome differs from its neighbour's (the edges of holes) first, then runs evenly spaced
    between them. The frame itself when it has no more than `limit` runs."""
    if len(frame) <= limit:
        return frame
    ordered = frame.sort_values("budget", kind="stable")
    status = ordered["status"]
    edge = (status != status.shift(1)) | (status != status.shift(-1))
    positions = pd.Series(range(len(ordered)), index=ordered.index)
    edges = positions[edge.to_numpy()]
    if len(edges) >= limit:
        keep = edges.iloc[_evenly(len(edges), limit)]
    else:
        rest = positions[~edge.to_numpy()]
        keep = pd.concat([edges, rest.iloc[_evenly(len(rest), limit - len(edges))]])
    return ordered.iloc[sorted(keep.tolist())]


def _evenly(n: int, k: int) -> list[int]:
    """k positions of range(n), evenly spaced, first and last included (k <= n)."""
    if k <= 0:
        return []
    if k == 1:
        return [0]
    return sorted({round(i * (n - 1) / (k - 1)) for i in range(k)})


def in_view(frame: pd.DataFrame, lo: float, hi: float) -> pd.DataFrame:
    """The runs a strip zoomed to [lo, hi] (ratios of the peak) shows: those whose budget or
    same-execution interval lies in it, partly or wholly."""
    if frame.empty:
        return frame
    inside = frame["x"].between(lo, hi)
    if "same_lo" in frame:
        peak = frame["peak"].astype(float)
        top = frame["same_hi"].astype(float).div(peak).fillna(float("inf"))
        inside |= frame["same_lo"].astype(float).div(peak).le(hi) & top.ge(lo)
    return frame[inside]
