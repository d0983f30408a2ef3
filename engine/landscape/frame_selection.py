"""`select` (engine/landscape/holes.py) over a DataFrame, column by column: the same
Selection as its row-wise code, which is the reference (tests/test_holes.py holds them equal
on random frames). A walked landscape is 100,000s of runs, which every dashboard card and
`holes` select. holes.py imports this module when it is given a DataFrame (holes.py itself
imports neither pandas nor numpy).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from engine.landscape.holes import (
    Sample,
    Selection,
    TraceVersionsError,
    as_text,
)
from engine.landscape.interval_table import IntervalTable
from engine.landscape.intervals import RESOLVED, Interval, distinct_intervals
from engine.landscape.record_files import EXCLUDED_PREFIX


def select_frame(
    frame: pd.DataFrame,
    policy: str,
    cap: float,
    trace_sha256: str | None,
    newest_version: bool,
) -> Selection:
    """`select` over a DataFrame. InceptionV4's 224,351 walked runs took 3.6 s row by row
    and 2.2 s so (one process, side by side); with `frame_intervals` about 1.2 s. Its
    483,255 runs took 6.2 s, 5.4 s of them making an Interval a run and sorting by run ids:
    with the intervals kept as columns (IntervalTable) and `_age_order`, 1.1 s."""
    n = len(frame)

    def column(name: str) -> pd.Series:
        if name in frame:
            return frame[name].reset_index(drop=True)
        return pd.Series([None] * n, dtype=object)

    cap_values = pd.to_numeric(column("cap"), errors="coerce")
    retained, stage = column("retained"), column("stage")
    keep = (
        (column("policy") == policy)
        & cap_values.notna()
        & (cap_values == float(cap))
        & (retained.isna() | (retained.astype(str) == ""))
        & ~(stage.notna() & stage.astype(str).str.startswith(EXCLUDED_PREFIX))
    )
    index = _age_order(column("started_at"), column("run_id"), keep.to_numpy())
    sha = column("trace_sha256").iloc[index]
    known = sha.notna()
    # newest first: the order of first appearance from the newest run down
    versions = sha[known].astype(str).iloc[::-1].drop_duplicates().tolist()
    chosen = trace_sha256
    if chosen is None and versions:
        if len(versions) > 1 and not newest_version:
            raise TraceVersionsError(versions)
        chosen = versions[0]
    if chosen is not None:
        index = index[(known & (sha.astype(str) == chosen)).to_numpy()]

    def values(name: str) -> list[Any]:
        return column(name).iloc[index].tolist()

    run_id = values("run_id")
    given = index[(column("ratio").iloc[index].notna() & column("budget").iloc[index].notna())]
    samples = [
        Sample(float(r), int(b), str(s), as_text(i))
        for r, b, s, i in zip(
            *(column(name).iloc[given].tolist() for name in ("ratio", "budget", "status")),
            column("run_id").iloc[given].tolist(),
            strict=True,
        )
    ]
    lo, hi, state, overhead = (
        column(name).iloc[index] for name in ("same_lo", "same_hi", "status", "overhead")
    )
    intervals, conflicts = frame_intervals(lo, hi, state, overhead, run_id)
    return Selection(
        trace_sha256=chosen,
        versions=versions,
        runs=len(index),
        samples=samples,
        intervals=intervals,
        conflicting_intervals=conflicts,
        without_version=int((~known).sum()) if chosen is not None else 0,
    )


def _age_order(started: pd.Series, run_ids: pd.Series, keep: np.ndarray) -> np.ndarray:
    """The kept rows' positions, oldest first (`age_key`): undated first, by run id; then by
    start, then run id; ties keep row order. With start times as datetime64 (the store's),
    sorted by time alone and then by run id only where times tie: sorting by the ids (as
    strings) was 1.7 s of InceptionV4's 483,255 walked runs, whose times never tie."""
    order = pd.DataFrame(
        {
            "dated": started.notna().astype(int),
            "started": started.where(started.notna(), None),
            "run_id": run_ids.where(run_ids.notna(), "").astype(str),
        }
    )[keep]
    if not len(order):
        return order.index.to_numpy()
    dtype = order["started"].dtype
    if not pd.api.types.is_datetime64_dtype(dtype) or isinstance(dtype, pd.DatetimeTZDtype):
        return order.sort_values(["dated", "started", "run_id"], kind="stable").index.to_numpy()
    # the times in their column's own unit (no conversion that could overflow); undated rows
    # (NaT) take the lowest, below every start
    times = order["started"].to_numpy().astype(np.int64)
    times[order["dated"].to_numpy() == 0] = np.iinfo(np.int64).min
    by_time = np.argsort(times, kind="stable")
    index, times = order.index.to_numpy()[by_time], times[by_time]
    ties = np.flatnonzero(times[1:] == times[:-1])
    if not len(ties):
        return index
    ids = order["run_id"].to_numpy()[by_time]
    # each maximal stretch of equal times, sorted by run id (sorted() is stable)
    first = 0
    while first < len(ties):
        last = first
        while last + 1 < len(ties) and ties[last + 1] == ties[last] + 1:
            last += 1
        lo, hi = int(ties[first]), int(ties[last]) + 2
        within = sorted(range(lo, hi), key=lambda k: ids[k])
        index[lo:hi] = index[within]
        first = last + 1
    return index


def frame_intervals(
    lo: pd.Series, hi: pd.Series, status: pd.Series, overhead: pd.Series, run_id: list[Any]
) -> tuple[Sequence[Interval], int]:
    """`distinct_intervals` of the rows' intervals (resolved runs with a same_lo), from
    their columns: the first row of each (lo, hi) is kept, in (lo, hi) order, no hi last.
    The kept rows become an IntervalTable, and the overlap check is one comparison of columns
    unless some overlap (then `distinct_intervals` itself drops them, one by one)."""
    lo_n = pd.to_numeric(lo, errors="coerce").reset_index(drop=True)
    hi_n = pd.to_numeric(hi, errors="coerce").reset_index(drop=True)
    resolved = (status.isin(RESOLVED).to_numpy()) & lo_n.notna().to_numpy()
    rows = pd.DataFrame(
        {
            "lo": lo_n[resolved].astype("int64"),
            "open": hi_n[resolved].isna(),
            "hi": hi_n[resolved].fillna(0).astype("int64"),
        }
    )
    rows = rows.drop_duplicates().sort_values(["lo", "open", "hi"], kind="stable")
    position = rows.index.to_numpy()
    los, his, open_ = rows["lo"].to_numpy(), rows["hi"].to_numpy(), rows["open"].to_numpy()
    table = IntervalTable(
        los,
        his,
        open_,
        status.iloc[position].tolist(),
        overhead.iloc[position].tolist(),
        [run_id[k] for k in position.tolist()],
    )
    # each interval above the one before it: lo past its hi (none is open but the last)
    disjoint = not open_[:-1].any() and bool(np.all(los[1:] > his[:-1]))
    if disjoint:
        return table, 0
    return distinct_intervals(table)
