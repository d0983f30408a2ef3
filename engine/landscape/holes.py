"""Counting holes over sampled ratios, and the one definition of which stored runs are a
landscape's samples: `landscape_holes`, which the `holes` command and the dashboard both call
(the dashboard only adapts its result for display). Pure functions, rows in, results out; the
`holes` command's store reading is the last section. Interval arithmetic (exact widths,
edges) is engine/landscape/intervals.py.

Definitions (docs/DOMAIN.md, "Counting holes"), on samples sorted by ratio with timeouts set
aside first:
- first success: the lowest completing (`ok`) sample;
- failing samples above it (`oom` or `thrashed`);
- failure region: a maximal run of consecutive failing samples with a completing sample
  immediately below and above; its edge brackets are (last ok below, first fail) and
  (last fail, first ok above);
- stable-from: the lowest sample at and above which every sample succeeds.

Which runs are samples (`select`):
- comparable runs only: one policy and cap, no what-if retained storages, and no row an
  imported evidence table marked excluded (stage 'excluded:...');
- one trace version (SHA-256): runs of a changed trace file are another landscape;
- runs given by ratio only: a run given in bytes (a walk's, an edge search's, a one-off
  budget) is not a sample of the grid, though its interval still counts for exact widths;
- per ratio, the newest resolved sample; timeouts (and imported `recursion`) are set aside.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from engine.landscape.intervals import (
    RESOLVED,
    UNRESOLVED,
    Interval,
    distinct_intervals,
    exact_range,
    failing,
    interval_edges,
    interval_from_row,
    interval_holes,
    missing,
    stretches,
)
from engine.landscape.record_files import EXCLUDED_PREFIX
from engine.sim.policies import make_policy
from engine.sim.simulate import DEFAULT_CAP

if TYPE_CHECKING:
    import pandas as pd

    from engine.landscape.store import Store

# Runs comparable with each other, as SQL over the store's `runs` (parameters: policy, cap):
# `comparable` below is the same test on rows. The walks read their stored intervals with it.
SAME_SETTINGS = (
    "policy = ? AND cap = ? AND coalesce(retained, '') = '' "
    "AND coalesce(stage, '') NOT LIKE 'excluded:%'"
)


@dataclass(frozen=True)
class Sample:
    ratio: float
    budget: int
    status: str
    run_id: str | None = None


# -- samples -------------------------------------------------------------------------------
def count_holes(samples: Iterable[Sample]) -> dict[str, Any]:
    """The paper's hole counts over sampled ratios, given oldest first: a ratio sampled more
    than once keeps its newest resolved sample (the simulator is deterministic, so repeats
    agree; an imported or older engine's row may not)."""
    resolved: dict[float, Sample] = {}
    timeouts = 0
    for sample in samples:
        if sample.status in UNRESOLVED:
            timeouts += 1
        else:
            resolved[sample.ratio] = sample
    ordered = [resolved[r] for r in sorted(resolved)]
    first_ok = next((i for i, s in enumerate(ordered) if s.status == "ok"), None)
    above = ordered[first_ok:] if first_ok is not None else []
    regions = []
    i = 1
    while i < len(above):
        if not failing(above[i].status):
            i += 1
            continue
        j = i
        while j + 1 < len(above) and failing(above[j + 1].status):
            j += 1
        # a run of failures ends at a completing sample (the region) or at the top (no region)
        if j + 1 < len(above) and above[j + 1].status == "ok":
            regions.append(_region(above[i - 1], above[i], above[j], above[j + 1], j - i + 1))
        i = j + 1
    stable = None
    for sample in reversed(ordered):
        if sample.status != "ok":
            break
        stable = sample
    last_ok = max((i for i, s in enumerate(ordered) if s.status == "ok"), default=None)
    return {
        "samples": len(ordered),
        "timeouts_set_aside": timeouts,
        "first_success": _point(ordered[first_ok]) if first_ok is not None else None,
        "failing_above": [_point(s) for s in above if failing(s.status)],
        "regions": regions,
        "stable_from": _point(stable) if stable is not None else None,
        # the outer edges: the failures below the first success, and above the last one
        "low_edge": {
            "last_fail": _point(ordered[first_ok - 1]) if first_ok else None,
            "first_ok": _point(ordered[first_ok]) if first_ok is not None else None,
        },
        "high_edge": {
            "last_ok": _point(ordered[last_ok]) if last_ok is not None else None,
            "first_fail": (
                _point(ordered[last_ok + 1])
                if last_ok is not None and last_ok + 1 < len(ordered)
                else None
            ),
        },
    }


def _point(sample: Sample) -> dict[str, Any]:
    return {
        "ratio": sample.ratio,
        "budget": sample.budget,
        "status": sample.status,
        "run_id": sample.run_id,
    }


def _region(
    ok_below: Sample, first: Sample, last: Sample, ok_above: Sample, count: int
) -> dict[str, Any]:
    ends = {
        "last_ok_below": ok_below,
        "first_fail": first,
        "last_fail": last,
        "first_ok_above": ok_above,
    }
    return {
        **{key: sample.ratio for key, sample in ends.items()},
        "budgets": {key: sample.budget for key, sample in ends.items()},
        "points": {key: _point(sample) for key, sample in ends.items()},
        "failing_samples": count,
        "edge_brackets": [
            {"last_ok": ok_below.ratio, "first_fail": first.ratio},
            {"last_fail": last.ratio, "first_ok": ok_above.ratio},
        ],
    }


# -- which runs are samples ----------------------------------------------------------------
Rows = Iterable[Mapping[str, Any]]


class TraceVersionsError(ValueError):
    """Runs of more than one version (SHA-256) of a trace, and none was chosen."""

    def __init__(self, versions: list[str]) -> None:
        self.versions = versions
        super().__init__(
            f"{len(versions)} versions of the trace are stored; name one by its SHA-256: "
            + ", ".join(sorted(versions))
        )


@dataclass(frozen=True)
class Selection:
    """The runs of one landscape that count, as `select` chose them."""

    trace_sha256: str | None
    versions: list[str]  # every version among the comparable runs, newest first
    runs: int  # comparable runs of the chosen version
    samples: list[Sample]  # ratio-given runs, oldest first, timeouts included
    # distinct same-execution intervals of the resolved runs (an IntervalTable from a frame)
    intervals: Sequence[Interval]
    conflicting_intervals: int
    without_version: int  # runs with no SHA-256 set aside because other runs have one


def as_text(value: Any) -> str:
    return "" if missing(value) else str(value)


def comparable(row: Mapping[str, Any], policy: str, cap: float) -> bool:
    """`SAME_SETTINGS` on one row: this policy and cap, no retained storages, not excluded."""
    row_cap = row.get("cap")
    return (
        row.get("policy") == policy
        and row_cap is not None
        and not missing(row_cap)
        and float(row_cap) == float(cap)
        and not as_text(row.get("retained"))
        and not as_text(row.get("stage")).startswith(EXCLUDED_PREFIX)
    )


def age_key(row: Mapping[str, Any]) -> tuple[Any, ...]:
    """Oldest first: runs without a start time (imports) before any other, then by start,
    then by id (as the store's `ORDER BY started_at NULLS FIRST, run_id`)."""
    started = row.get("started_at")
    return (0, 0, as_text(row.get("run_id"))) if missing(started) else (1, started, row["run_id"])


# Every column `select` reads.
SELECTED_COLUMNS = (
    "run_id",
    "trace_sha256",
    "policy",
    "cap",
    "retained",
    "stage",
    "started_at",
    "ratio",
    "budget",
    "status",
    "overhead",
    "same_lo",
    "same_hi",
)


def select(
    rows: pd.DataFrame | Rows,
    *,
    policy: str,
    cap: float = DEFAULT_CAP,
    trace_sha256: str | None = None,
    newest_version: bool = False,
) -> Selection:
    """The samples and intervals of one trace's landscape under (policy, cap), from any of its
    stored runs (the store's `runs` columns; other policies, caps and what-ifs are skipped).
    Several trace versions need `trace_sha256`, or `newest_version` (the version of the most
    recently started run), else TraceVersionsError.

    A DataFrame (what the store and the dashboard give) is read column-wise
    (engine/landscape/frame_selection.py);
    mappings are read one by one below, the reference the column-wise code is tested
    against."""
    if getattr(rows, "columns", None) is not None:  # a DataFrame
        from engine.landscape.frame_selection import select_frame

        return select_frame(rows, policy, cap, trace_sha256, newest_version)  # type: ignore[arg-type]
    ordered = sorted((r for r in rows if comparable(r, policy, cap)), key=age_key)
    versions = list(
        dict.fromkeys(
            str(r["trace_sha256"]) for r in reversed(ordered) if not missing(r.get("trace_sha256"))
        )
    )
    chosen = trace_sha256
    if chosen is None and versions:
        if len(versions) > 1 and not newest_version:
            raise TraceVersionsError(versions)
        chosen = versions[0]
    if chosen is None:  # no run knows its version (imports of an unregistered trace)
        mine = ordered
    else:
        mine = [r for r in ordered if as_text(r.get("trace_sha256")) == chosen]
    samples = [
        Sample(float(r["ratio"]), int(r["budget"]), str(r["status"]), as_text(r.get("run_id")))
        for r in mine
        if not missing(r.get("ratio")) and not missing(r.get("budget"))
    ]
    intervals, conflicts = distinct_intervals(
        interval_from_row(dict(r))
        for r in mine
        if r.get("status") in RESOLVED and not missing(r.get("same_lo"))
    )
    return Selection(
        trace_sha256=chosen,
        versions=versions,
        runs=len(mine),
        samples=samples,
        intervals=intervals,
        conflicting_intervals=conflicts,
        without_version=sum(1 for r in ordered if missing(r.get("trace_sha256")))
        if chosen is not None
        else 0,
    )


def landscape_holes(
    rows: pd.DataFrame | Rows,
    *,
    policy: str,
    cap: float = DEFAULT_CAP,
    trace_sha256: str | None = None,
    newest_version: bool = False,
) -> dict[str, Any]:
    """The hole report of one landscape: `select`'s samples counted (`count_holes`), each
    failure region's exact bytes from the intervals (`exact_range`), and the holes the
    intervals alone show. What `dtr-landscape holes --json` prints, less the trace's name."""
    chosen = select(
        rows, policy=policy, cap=cap, trace_sha256=trace_sha256, newest_version=newest_version
    )
    report = count_holes(chosen.samples)
    for region in report["regions"]:
        region["bytes"] = exact_range(region, chosen.intervals)
    edges = interval_edges(chosen.intervals)
    return {
        "trace_sha256": chosen.trace_sha256,
        "trace_versions": chosen.versions,
        "policy": policy,
        "cap": cap,
        "runs": chosen.runs,
        "without_version_set_aside": chosen.without_version,
        **report,
        "intervals": len(chosen.intervals),
        "conflicting_intervals": chosen.conflicting_intervals,
        # the byte ranges the intervals classify: [lo, hi], hi None for no upper end
        "certified": [[lo, hi] for lo, hi in stretches(chosen.intervals)],
        "interval_holes": interval_holes(chosen.intervals),
        # the first success and stable-from of the intervals, to the byte
        "exact_first_success": edges["first_success"],
        "exact_stable_from": edges["stable_from"],
    }


# -- the `holes` command: store I/O -------------------------------------------------
def holes_report(
    store: Store, trace: str, *, policy: str = "DTR", cap: float = DEFAULT_CAP
) -> dict[str, Any]:
    spec = make_policy(policy).spec
    frame = store.query(
        f"SELECT {', '.join(SELECTED_COLUMNS)} FROM runs "
        "WHERE (trace = ? OR trace_sha256 = ?) AND policy = ?",
        [trace, trace, spec],
    )
    try:
        report = landscape_holes(frame, policy=spec, cap=float(cap))
    except TraceVersionsError as exc:
        raise ValueError(
            f"{len(exc.versions)} versions of {trace} are stored; name one by its SHA-256: "
            + ", ".join(sorted(exc.versions))
        ) from None
    if not report["runs"]:
        raise ValueError(f"no stored runs of {trace} with policy {spec}, cap {cap:g}")
    return {"trace": trace, **report, "cap": cap}
