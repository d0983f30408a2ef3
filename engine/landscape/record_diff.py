"""Two stores' records of a trace's executions, compared field by field (`diff-records`).

An execution is known by its interval: every budget in [same_lo, same_hi] gives it, under one
policy and cap. Two stores that walked the same budgets (another engine version, another
machine, a walk resumed elsewhere) must hold the same intervals and, for each, the same
record in everything that describes the execution. They may differ in which run it was, when
and where it ran, and at which budget of its interval the run was entered: a chunk of a
parallel walk begins wherever it was cut, so its first run may sit at another budget of the
same interval than the other store's. Such a record differs in its budget, its ratio and the
bytes a failure was over the budget by (`failure_over_by` = used + request - budget), by the
same shift and in nothing else.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from engine.landscape.intervals import RESOLVED
from engine.landscape.schema import is_missing, plain_value

# which run it was, when, where, by which engine and with what cost: not the execution
NOT_THE_EXECUTION = frozenset(
    {
        "run_id",
        "trace_sha256",
        "engine_version",
        "wall_s",
        "source",
        "sweep_id",
        "walk_id",
        "repeat",
        "stage",
        "host",
        "started_at",
        "ended_at",
        "events_path",
    }
)
# measured from the budget the run was entered at (see the module's docstring)
ENTRY_FIELDS = ("budget", "ratio", "failure_over_by")
# an execution's identity: the policy and cap it ran under, and its interval
KEY = ("policy", "cap", "same_lo", "same_hi")
OPEN = -1  # same_hi of an interval open at the top (every larger budget), as a key


@dataclass
class RecordDiff:
    """What `diff` found. `examples`: the first shared executions whose records differ (up to
    `EXAMPLES`), {policy, cap, same_lo, same_hi, run_id, other_run_id, fields: {name: [ours,
    theirs]}}."""

    shared: int
    only_ours: int
    only_theirs: int
    # executions of one side whose interval overlaps one of the other side's without being it:
    # the two stores put some bytes in different executions
    conflicting: int
    entered_elsewhere: int
    differing: int
    examples: list[dict[str, Any]] = field(default_factory=list)

    @property
    def agree(self) -> bool:
        """Some execution in both, and none that differs or conflicts (two stores of
        disjoint ranges compared nothing: they do not agree)."""
        return self.shared > 0 and not self.differing and not self.conflicting

    def as_json(self) -> dict[str, Any]:
        return {"agree": self.agree, **asdict(self)}


EXAMPLES = 20
MAX = np.iinfo(np.int64).max


def executions(runs: pd.DataFrame) -> pd.DataFrame:
    """One record per execution (the first stored, by budget), with KEY's columns; runs
    without an interval (timeouts, imported samples) are left out."""
    known = runs[runs["status"].isin(RESOLVED) & runs["same_lo"].notna()].copy()
    known["same_hi"] = known["same_hi"].fillna(OPEN)
    for name in ("same_lo", "same_hi"):
        known[name] = known[name].astype("int64")
    return known.drop_duplicates(list(KEY)).reset_index(drop=True)


def diff(ours: pd.DataFrame, theirs: pd.DataFrame) -> RecordDiff:
    """Compare two stores' runs of one trace (`Store.runs`), execution by execution."""
    a, b = executions(ours), executions(theirs)
    both = a.merge(b, on=list(KEY), suffixes=("", " other"))
    compared = sorted(
        c for c in set(a.columns) & set(b.columns) if c not in NOT_THE_EXECUTION | set(KEY)
    )
    shift = both["budget"] - both["budget other"]
    differs: dict[str, pd.Series] = {}
    for name in compared:
        if name not in ENTRY_FIELDS:
            differs[name] = ~_equal(both[name], both[f"{name} other"])
    if "ratio" in compared:
        differs["ratio"] = (shift == 0) & ~_equal(both["ratio"], both["ratio other"])
    if "failure_over_by" in compared:
        over, over_other = both["failure_over_by"], both["failure_over_by other"]
        differs["failure_over_by"] = (over.isna() != over_other.isna()) | (
            over.notna() & (over + shift != over_other)
        )
    table = pd.DataFrame(differs)
    wrong = table.any(axis=1)
    examples = [
        _example(both.loc[k], table.columns[table.loc[k]].tolist())
        for k in both.index[wrong][:EXAMPLES]
    ]
    return RecordDiff(
        shared=len(both),
        only_ours=len(a) - len(both),
        only_theirs=len(b) - len(both),
        conflicting=_overlapping(a, b) + _overlapping(b, a),
        entered_elsewhere=int((shift != 0).sum()),
        differing=int(wrong.sum()),
        examples=examples,
    )


def _equal(x: pd.Series, y: pd.Series) -> pd.Series:
    """Element by element, missing equal to missing (object columns compared as text)."""
    if x.dtype == object or y.dtype == object:
        x, y = x.map(_text), y.map(_text)
    return (x == y) | (x.isna() & y.isna())


def _text(value: Any) -> Any:
    return None if is_missing(value) else str(value)


def _example(row: pd.Series, names: list[str]) -> dict[str, Any]:
    return {
        "policy": row["policy"],
        "cap": plain_value(row["cap"]),
        "same_lo": int(row["same_lo"]),
        "same_hi": None if row["same_hi"] == OPEN else int(row["same_hi"]),
        "run_id": row["run_id"],
        "other_run_id": row["run_id other"],
        "fields": {n: [plain_value(row[n]), plain_value(row[f"{n} other"])] for n in names},
    }


def _overlapping(a: pd.DataFrame, b: pd.DataFrame) -> int:
    """How many of a's executions that b does not hold overlap one of b's (the same policy and
    cap): bytes the two stores give to different executions."""
    only = a.merge(b[list(KEY)], on=list(KEY), how="left", indicator=True)
    only = only[only["_merge"] == "left_only"]
    count = 0
    for (policy, cap), ours in only.groupby(["policy", "cap"], sort=False):
        theirs = b[(b["policy"] == policy) & (b["cap"] == cap)]
        if theirs.empty:
            continue
        order = np.argsort(theirs["same_lo"].to_numpy(), kind="stable")
        los = theirs["same_lo"].to_numpy()[order]
        top = np.maximum.accumulate(_tops(theirs["same_hi"])[order])  # highest byte so far
        lo, hi = ours["same_lo"].to_numpy(), _tops(ours["same_hi"])
        below = np.searchsorted(los, hi, side="right")  # their intervals starting at or below hi
        hit = below > 0
        hit[hit] = top[below[hit] - 1] >= lo[hit]
        count += int(hit.sum())
    return count


def _tops(same_hi: pd.Series) -> np.ndarray:
    values = same_hi.to_numpy()
    return np.where(values == OPEN, MAX, values)
