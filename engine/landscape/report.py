"""`holes --all`: every stored trace's exact landscape in one report, and how it compares with
the paper's sampled failure regions (Table 1 of "When More Memory Fails").

Everything comes from the store: the distinct same-execution intervals of each trace (one per
execution walked), the stretches they certify (touching intervals: every byte classified),
and the holes those stretches prove (a failing stretch with ok intervals touching it on both
sides: both edges exact). Where the paper sampled a trace, each of its samples is looked up
in the exact landscape: a sample whose budget lies in a certified stretch gets the status of
its interval and the run that proves it, so a disagreement names the run to open.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from engine.landscape.frame_selection import frame_intervals
from engine.landscape.holes import SAME_SETTINGS
from engine.landscape.intervals import (
    Interval,
    covered_bytes,
    covering,
    failing,
    interval_holes,
    statuses_in,
    stretches,
)
from engine.sim.policies import make_policy
from engine.sim.simulate import DEFAULT_CAP, budget_for

if TYPE_CHECKING:
    from engine.landscape.report_check import Report
    from engine.landscape.store import Store

# The paper's sampled DTR failure regions: (last ok below, first failing, last failing,
# first ok above) as ratios of the peak; None where the bracketing sample timed out. The
# traces listed with no region are those the paper reports none for at its resolution.
PUBLISHED: dict[str, list[tuple[float | None, float, float, float | None]]] = {
    "resnet32": [(0.101, 0.102, 0.106, 0.107)],
    "unet": [(0.422, 0.423, 0.425, 0.426), (0.431, 0.432, 0.435, 0.436)],
    "inceptionv4": [
        (0.209, 0.212, 0.222, 0.223),
        (0.2343, 0.235, 0.2425, 0.243),
        (None, 0.2526, 0.2527, None),  # its edge brackets (0.2525, 0.2528-0.2530) timed out
    ],
    "densenet121": [],
    "transformer": [],
    "treelstm": [],
}


def _stored(store: Store, policy: str, cap: float) -> dict[str, dict[str, Any]]:
    """Per trace version: its name, peak, distinct intervals under (policy, cap) (an
    IntervalTable where they are disjoint, as a walk's are) and how many conflicted."""
    frame = store.query(
        "SELECT trace, trace_sha256, peak, run_id, status, overhead, same_lo, same_hi FROM runs "
        f"WHERE {SAME_SETTINGS} AND status IN ('ok', 'oom', 'thrashed') "
        "AND same_lo IS NOT NULL AND trace_sha256 IS NOT NULL "
        "ORDER BY started_at NULLS FIRST, run_id",
        [policy, float(cap)],
    )
    versions: dict[str, dict[str, Any]] = {}
    # versions in the order their first (oldest) run comes, each one's rows in age order
    for sha256, rows in frame.groupby("trace_sha256", sort=False):
        intervals, conflicts = frame_intervals(
            rows["same_lo"],
            rows["same_hi"],
            rows["status"],
            rows["overhead"],
            rows["run_id"].tolist(),
        )
        first = rows.iloc[0]
        versions[str(sha256)] = {
            "trace": first["trace"],
            "peak": first["peak"],
            "intervals": intervals,
            "conflicts": conflicts,
        }
    return versions


def _ratio(budget: int | None, peak: int | None) -> float | None:
    return None if budget is None or not peak else budget / peak


def trace_report(
    name: str, sha256: str, peak: int, intervals: Sequence[Interval], conflicts: int
) -> dict[str, Any]:
    """One trace version's entry, from its distinct intervals (sorted, disjoint)."""
    certified = stretches(intervals)
    holes = []
    for hole in interval_holes(intervals):
        first, last = hole["first_fail_byte"], hole["last_fail_byte"]
        at = covering(intervals, first)
        holes.append(
            {
                **hole,
                "first_fail_ratio": _ratio(first, peak),
                "last_fail_ratio": _ratio(last, peak),
                "width_ratio": hole["width"] / peak if peak else None,
                "statuses": sorted(
                    statuses_in(intervals, at, at + hole["intervals"]) if at is not None else []
                ),
            }
        )
    report: dict[str, Any] = {
        "trace": name,
        "trace_sha256": sha256,
        "peak": peak,
        "executions": len(intervals),
        "conflicting_intervals": conflicts,
        "certified": [
            {
                "from_budget": lo,
                "to_budget": hi,
                "from_ratio": _ratio(lo, peak),
                "to_ratio": _ratio(hi, peak),
                "bytes": None if hi is None else hi - lo + 1,
            }
            for lo, hi in certified
        ],
        "holes": holes,
        "failing_bytes_in_holes": sum(h["width"] for h in holes),
    }
    if name in PUBLISHED:
        report["published"] = compare_published(name, peak, intervals, holes)
    return report


def compare_published(
    name: str, peak: int, intervals: Sequence[Interval], holes: list[dict[str, Any]]
) -> dict[str, Any]:
    """Each published sample against the exact landscape, and each published region against
    the exact holes between its completing brackets."""
    regions = []
    for below, first, last, above in PUBLISHED[name]:
        samples = [
            _sample(ratio, expected, peak, intervals)
            for ratio, expected in ((below, "ok"), (first, "fail"), (last, "fail"), (above, "ok"))
            if ratio is not None
        ]
        lo = budget_for(below if below is not None else first, peak)
        hi = budget_for(above if above is not None else last, peak)
        inside = [h for h in holes if h["first_fail_byte"] <= hi and h["last_fail_byte"] >= lo]
        regions.append(
            {
                "published": {
                    "last_ok_below": below,
                    "first_fail": first,
                    "last_fail": last,
                    "first_ok_above": above,
                },
                "samples": samples,
                # False: a sample's exact status differs; None: not every sample walked yet
                "agrees": _all_agree([s["agrees"] for s in samples]),
                "exact_holes": inside,
            }
        )
    claimed = [(budget_for(r[1], peak), budget_for(r[2], peak)) for r in PUBLISHED[name]]
    unseen = [
        h
        for h in holes
        if not any(h["first_fail_byte"] <= b and h["last_fail_byte"] >= a for a, b in claimed)
    ]
    return {
        "regions": regions,
        "holes_not_in_paper": unseen,
        "paper_reports_none": not PUBLISHED[name],
    }


def _all_agree(verdicts: list[bool | None]) -> bool | None:
    if any(v is False for v in verdicts):
        return False
    return None if any(v is None for v in verdicts) else True


def _sample(
    ratio: float, expected: str, peak: int, intervals: Sequence[Interval]
) -> dict[str, Any]:
    budget = budget_for(ratio, peak)
    at = covering(intervals, budget)
    found = intervals[at] if at is not None else None
    status = found.status if found is not None else None
    agrees = None if found is None else (failing(status or "") == (expected == "fail"))
    return {
        "ratio": ratio,
        "budget": budget,
        "published": expected,
        "exact_status": status,
        "run_id": found.run_id if found is not None else None,
        "agrees": agrees,
    }


def landscape_report(
    store: Store, *, policy: str = "DTR", cap: float = DEFAULT_CAP
) -> dict[str, Any]:
    """Every stored trace (by version), its executions, certified stretches and exact holes."""
    spec = make_policy(policy).spec
    # what the stored runs cost: each one's own seconds (a resumed run's from where it
    # resumed), summed: the time one process spent, whatever the workers and interruptions
    # (to the millisecond: a float sum's last digits follow the order rows are read in, and
    # the published report should change only when the runs do)
    cost = store.query(
        "SELECT trace_sha256, count(*) AS runs, round(fsum(wall_s), 3) AS seconds FROM runs "
        f"WHERE {SAME_SETTINGS} GROUP BY trace_sha256",
        [spec, float(cap)],
    )
    spent = {row["trace_sha256"]: row for row in cost.to_dict("records")}
    traces = []
    for sha256, entry in _stored(store, spec, cap).items():
        peak = int(entry["peak"]) if entry["peak"] == entry["peak"] else 0
        report = trace_report(
            str(entry["trace"]), sha256, peak, entry["intervals"], entry["conflicts"]
        )
        paid = spent.get(sha256, {})
        report["runs_stored"] = int(paid.get("runs") or 0)
        report["run_seconds"] = float(paid.get("seconds") or 0.0)
        traces.append(report)
    traces.sort(key=lambda t: (t["trace"], t["trace_sha256"]))
    return {"policy": spec, "cap": cap, "traces": traces}


def merged_report(published: Report, stored: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """`published` (a report file, read) with each trace of `stored` (a store's
    `landscape_report`) in place of its entry of the same name, or added; the other entries as
    they were. A report gathers traces walked into different stores (and machines), so one
    store's walk updates its traces' entries and nothing else. Returns the new report and a
    line per trace put in. ValueError, naming the file, when the settings differ, when the
    store holds no runs of them, or when the report's entry of that name was made from
    another version of the trace (a report with two would show two rows of one name)."""
    where = published.path
    ours = f"policy {stored['policy']}, cap {float(stored['cap']):g}"
    if (published.policy, float(published.cap)) != (stored["policy"], float(stored["cap"])):
        raise ValueError(
            f"{where}: its runs are policy {published.policy}, cap {float(published.cap):g}; "
            f"the runs asked of the store are {ours} (--policy, --cap)"
        )
    if not stored["traces"]:
        raise ValueError(f"the store holds no runs of {ours}: nothing to put in {where}")
    merged = [claims.raw for claims in published.traces]
    lines = []
    for fresh in stored["traces"]:
        name, now = fresh["trace"], _in_brief(fresh)
        same_name = [claims for claims in published.traces if claims.name == name]
        if len(same_name) > 1:
            places = " and ".join(f"traces[{claims.index}]" for claims in same_name)
            raise ValueError(f"{where}: {places} are both {name}: which one to replace?")
        for old in same_name:
            if old.sha256 != fresh["trace_sha256"]:
                raise ValueError(
                    f"{where}: traces[{old.index}] ({name}) was made from the trace of SHA-256 "
                    f"{old.sha256}; the store's runs are of {fresh['trace_sha256']}"
                )
        if same_name:
            (old,) = same_name
            lines.append(f"{name}: replaced; was {_in_brief(old.raw)}; now {now}")
            merged[old.index] = fresh
        else:
            lines.append(f"{name}: added; {now}")
            merged.append(fresh)
    traces = sorted(merged, key=lambda t: (t["trace"], t["trace_sha256"]))
    return {**published.data, "traces": traces}, lines


def _in_brief(entry: dict[str, Any]) -> str:
    (row,) = summary_rows({"traces": [entry]})
    return (
        f"{_count(row['executions'], 'execution')}, certified {row['certified_share']:.4f}, "
        f"{_count(row['holes'], 'hole')}"
    )


# The share of a trace's budgets the README table and the dashboard report as certified: the
# useful range of exact landscapes (docs/DOMAIN.md), as ratios of the peak.
USEFUL_RANGE = (0.05, 0.60)


def budget_range(
    peak: int, start: float = USEFUL_RANGE[0], end: float = USEFUL_RANGE[1]
) -> tuple[int, int]:
    """The budgets [a, b] of the ratios [start, end] of `peak` (by default the useful range)."""
    return budget_for(start, peak), budget_for(end, peak)


def certified_share(
    certified: Iterable[tuple[int, int | None]],
    peak: int,
    start: float = USEFUL_RANGE[0],
    end: float = USEFUL_RANGE[1],
) -> float:
    """The share of the budgets [start, end] x peak that the certified stretches cover."""
    a, b = budget_range(peak, start, end)
    return covered_bytes(certified, a, b) / (b - a + 1)


def summary_rows(
    report: dict[str, Any], *, start: float = USEFUL_RANGE[0], end: float = USEFUL_RANGE[1]
) -> list[dict[str, Any]]:
    """Per trace of a report: its executions, the certified share of [start, end], the holes
    there (count, failing bytes, the widest), what it says of the paper's sampled regions and
    the run time. One reading for the README's table and the dashboard's published page."""
    rows = []
    for t in report["traces"]:
        peak = t["peak"]
        a, b = budget_range(peak, start, end)
        share = certified_share(
            ((c["from_budget"], c["to_budget"]) for c in t["certified"]), peak, start, end
        )
        holes = [h for h in t["holes"] if h["last_fail_byte"] >= a and h["first_fail_byte"] <= b]
        widest = max(holes, key=lambda h: h["last_fail_byte"] - h["first_fail_byte"], default=None)
        seconds = t.get("run_seconds", 0.0)
        rows.append(
            {
                "trace": t["trace"],
                "executions": t["executions"],
                "certified_share": share,
                "holes": len(holes),
                "failing_bytes": sum(h["last_fail_byte"] - h["first_fail_byte"] + 1 for h in holes),
                "widest": None
                if widest is None
                else {
                    "first_fail_byte": widest["first_fail_byte"],
                    "last_fail_byte": widest["last_fail_byte"],
                    "width": widest["last_fail_byte"] - widest["first_fail_byte"] + 1,
                    "first_fail_ratio": widest["first_fail_byte"] / peak,
                    "last_fail_ratio": widest["last_fail_byte"] / peak,
                },
                "paper": _paper_verdict(t.get("published")),
                "run_time": _duration(seconds) if isinstance(seconds, int | float) else "-",
            }
        )
    return rows


def _paper_verdict(published: Any) -> str:
    if not isinstance(published, dict):
        return "not in Table 1"
    found = len(published.get("holes_not_in_paper") or [])
    if published.get("paper_reports_none"):
        return f"none; {_count(found, 'exact hole')} found"
    regions = published.get("regions") or []
    agree = _all_agree([r.get("agrees") for r in regions])
    verdict = {True: "agree", False: "DISAGREE", None: "not all walked yet"}[agree]
    return (
        f"{_count(len(regions), 'region')}, samples {verdict}; {_count(found, 'more exact hole')}"
    )


def markdown_table(
    report: dict[str, Any], *, start: float = USEFUL_RANGE[0], end: float = USEFUL_RANGE[1]
) -> str:
    """The README's table: per trace, executions, certified share of [start, end] and holes."""
    lines = [
        f"| trace | executions | certified {start:g}-{end:g} | holes | failing bytes in holes "
        "| widest hole (bytes, ratios) | paper's sampled regions | run time (one process) |",
        "|---|---:|---:|---:|---:|---|---|---:|",
    ]
    for row in summary_rows(report, start=start, end=end):
        widest = row["widest"]
        widest_text = (
            f"{widest['width']:,} "
            f"({widest['first_fail_ratio']:.5f}-{widest['last_fail_ratio']:.5f})"
            if widest
            else "-"
        )
        lines.append(
            f"| {row['trace']} | {row['executions']:,} | {row['certified_share']:.4f} "
            f"| {row['holes']:,} | {row['failing_bytes']:,} | {widest_text} | {row['paper']} "
            f"| {row['run_time']} |"
        )
    return "\n".join(lines)


def _duration(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.0f} s"
    if seconds < 3600:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def _count(n: int, noun: str) -> str:
    return f"{n:,} {noun}{'' if n == 1 else 's'}"
