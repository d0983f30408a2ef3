"""Why one budget fails where another succeeds: two runs' event logs, decision by decision.

`diverge(events_a, events_b, record_a, record_b)` takes the two runs' event logs
(engine/sim/events.py) and run records (engine/sim/record.py) and returns one plain,
JSON-ready dict. It is pure (no store, no simulation); `dtr-landscape diverge` and the
dashboard's compare page both print or show what it returns.

Decisions are the policy's evictions (`evict_policy` rows): eager evictions follow from the
trace's releases and rematerializations from earlier evictions. The two runs' decisions are
aligned operator by operator: at operator k, run a's i-th decision meets run b's i-th.

- `first_difference`: the first aligned position where the runs decide differently.
- `divergence`: the first difference after the runs' last agreed decision. Runs that first
  differ early can agree again for long stretches (on InceptionV4 at 0.2343 and 0.235 they
  first differ at the 14th eviction, operator 945, and still make the same 14 evictions in
  operator 2,266); from this position on they never agree again before either stops, so it
  is where the failing run's own path to its failure begins (the DTR paper's Section 5).
- For each side, its victim there: the decision at that position, or its next one when it
  makes none there (the other run evicts one more storage in that operator, say): operator,
  storage, size, score, candidate pool size, runner-up and its score, pinned bytes, depth.
- `after`: each side's evictions and rematerializations from the divergence on, and in the
  failing run's last operator; `failure`: each record's failure snapshot; `series`: each
  side's per-operator max pinned bytes and max nesting depth (index i = operator i + 1).
- `retain`: with exactly one failing side, the storage its victim was: rerunning the failing
  budget with it retained (`run --retain`) is the paper's what-if.

Scores are floats; an infinite score (zero denominator) is the string "inf", so the dict
stays valid JSON for browsers.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from engine.landscape.intervals import failing

# Bumped when the dict's shape changes: a cached analysis of another format is recomputed.
ANALYSIS_FORMAT = 1
SIDES = ("a", "b")
REQUIRED_COLUMNS = (
    "kind",
    "operator",
    "storage",
    "depth",
    "size",
    "score",
    "pool_size",
    "pinned",
    "runner_up",
    "runner_up_score",
    "max_pinned",
    "max_depth",
)
RECORD_FIELDS = (
    "run_id",
    "trace",
    "policy",
    "budget",
    "ratio",
    "peak",
    "status",
    "overhead",
    "evictions",
    "policy_evictions",
    "rematerializations",
    "operators",
    "peak_pinned",
    "depth_at_peak_pinned",
    "max_nesting_depth",
    "failure",
    "retained",
)


class DivergeError(ValueError):
    """The two runs cannot be compared (different traces, a log of another run...)."""


@dataclass(frozen=True)
class Decision:
    row: int  # position in the run's event log (evictions and rematerializations only)
    number: int  # 1-based: the run's n-th policy decision (its row among them is number - 1)
    operator: int
    storage: int


class _Log:
    """One run's event log, indexed for alignment."""

    def __init__(self, side: str, events: pd.DataFrame, record: Mapping[str, Any]) -> None:
        missing = [c for c in REQUIRED_COLUMNS if c not in events.columns]
        if missing:
            raise DivergeError(
                f"the event log of run {side} is not an event log (missing {', '.join(missing)})"
            )
        kinds = events["kind"].astype(str)
        log = events[kinds != "operator"]
        ops = events[kinds == "operator"].sort_values("operator")
        self.kinds: list[str] = log["kind"].astype(str).tolist()
        self.operators: list[int] = [int(x) for x in log["operator"].tolist()]
        self.storages: list[int] = [int(x) for x in log["storage"].tolist()]
        self.depths: list[int] = [int(x) for x in log["depth"].fillna(0).tolist()]
        self.sizes: list[int | None] = [_whole(x) for x in log["size"].tolist()]
        self.max_pinned = [int(x) for x in ops["max_pinned"].tolist()]
        self.max_depth = [int(x) for x in ops["max_depth"].tolist()]
        _check_matches(side, self, record)
        self.by_operator: dict[int, list[Decision]] = {}
        self.decisions: list[Decision] = []
        # the policy's rows, read whole only for the few decisions the analysis reports
        self.policy = log[log["kind"] == "evict_policy"].reset_index(drop=True)
        rows = [i for i, kind in enumerate(self.kinds) if kind == "evict_policy"]
        for number, row in enumerate(rows, start=1):
            decision = Decision(row, number, self.operators[row], self.storages[row])
            self.decisions.append(decision)
            self.by_operator.setdefault(decision.operator, []).append(decision)
        self.decision_operators = [d.operator for d in self.decisions]

    def values(self, decision: Decision) -> dict[str, Any]:
        return dict(self.policy.iloc[decision.number - 1].to_dict())

    def at(self, operator: int, index: int) -> list[Decision]:
        return self.by_operator.get(operator, [])[index:]

    def next_decision(self, operator: int, index: int) -> Decision | None:
        """The decision at (operator, index), or the first one after that operator."""
        here = self.at(operator, index)
        if here:
            return here[0]
        i = bisect.bisect_right(self.decision_operators, operator)
        return self.decisions[i] if i < len(self.decisions) else None

    def start_row(self, operator: int, index: int) -> int:
        """The first event row after the run's index-th decision of `operator` (or the
        operator's first row when index is 0)."""
        if index > 0:
            return self.by_operator[operator][index - 1].row + 1
        return bisect.bisect_left(self.operators, operator)

    def last_event(self, storage: int, before_operator: int) -> dict[str, Any] | None:
        """The storage's last eviction or rematerialization before `before_operator` began."""
        for row in range(bisect.bisect_left(self.operators, before_operator) - 1, -1, -1):
            if self.storages[row] == storage:
                return {"kind": self.kinds[row], "operator": self.operators[row]}
        return None

    def rebuilt_inputs(self, operator: int) -> list[int]:
        """Storages `operator` itself had to rebuild (depth 2: the model operator is depth
        1): its inputs that were evicted when it started, in the order it rebuilt them."""
        lo = bisect.bisect_left(self.operators, operator)
        hi = bisect.bisect_right(self.operators, operator)
        seen: list[int] = []
        for row in range(lo, hi):
            rebuilt = self.kinds[row] == "remat" and self.depths[row] == 2
            if rebuilt and self.storages[row] not in seen:
                seen.append(self.storages[row])
        return seen

    def size_of(self, storage: int) -> int | None:
        for row, s in enumerate(self.storages):
            if s == storage and self.sizes[row] is not None:
                return self.sizes[row]
        return None

    def counts(self, start: int = 0, operator: int | None = None) -> dict[str, int]:
        kinds = self.kinds[start:]
        if operator is not None:
            lo = bisect.bisect_left(self.operators, operator)
            hi = bisect.bisect_right(self.operators, operator)
            kinds = self.kinds[lo:hi]
        policy = sum(1 for k in kinds if k == "evict_policy")
        eager = sum(1 for k in kinds if k == "evict_eager")
        return {
            "evictions": policy + eager,
            "policy_evictions": policy,
            "eager_evictions": eager,
            "rematerializations": sum(1 for k in kinds if k == "remat"),
        }


def _check_matches(side: str, log: _Log, record: Mapping[str, Any]) -> None:
    """An event log of another run (an older trace file, another budget) would explain
    nothing: its counts must be the record's."""
    evictions = sum(1 for k in log.kinds if k != "remat")
    remats = len(log.kinds) - evictions
    expected = (record.get("operators"), record.get("evictions"), record.get("rematerializations"))
    found = (len(log.max_pinned), evictions, remats)
    if any(e is not None and int(e) != f for e, f in zip(expected, found, strict=True)):
        raise DivergeError(
            f"the event log of run {side} does not belong to its record: it has "
            f"{found[0]:,} operators, {found[1]:,} evictions and {found[2]:,} "
            f"rematerializations, the record {expected[0]}, {expected[1]} and {expected[2]}"
        )


def _plain(value: Any) -> Any:
    if value is None:
        return None
    if isinstance(value, float):
        if math.isnan(value):
            return None
        if math.isinf(value):
            return "inf"
        return value
    if hasattr(value, "item"):
        return _plain(value.item())
    return value


def _whole(value: Any) -> int | None:
    value = _plain(value)
    return None if value is None else int(value)


def _victim(log: _Log, decision: Decision | None) -> dict[str, Any] | None:
    if decision is None:
        return None
    values = log.values(decision)

    def whole(name: str) -> int | None:
        return _whole(values.get(name))

    return {
        "operator": decision.operator,
        "storage": decision.storage,
        "decision": decision.number,
        "seq": whole("seq"),
        "size": whole("size"),
        "score": _plain(values.get("score")),
        "pool_size": whole("pool_size"),
        "runner_up": whole("runner_up"),
        "runner_up_score": _plain(values.get("runner_up_score")),
        "pinned": whole("pinned"),
        "depth": whole("depth"),
    }


def _position(logs: Sequence[_Log], operator: int, index: int) -> dict[str, Any]:
    return {
        "operator": operator,
        "index": index,  # decisions of this operator the runs agreed on before it
        **{
            side: _victim(log, log.next_decision(operator, index))
            for side, log in zip(SIDES, logs, strict=True)
        },
    }


def _summary(record: Mapping[str, Any]) -> dict[str, Any]:
    out = {name: _plain(record.get(name)) for name in RECORD_FIELDS}
    out["retained"] = sorted(int(s) for s in record.get("retained") or [])
    failure = record.get("failure")
    out["failure"] = {k: _plain(v) for k, v in failure.items()} if failure else None
    return out


def check_comparable(a: Mapping[str, Any], b: Mapping[str, Any]) -> None:
    """DivergeError unless the two run records are of one trace."""
    sha_a, sha_b = a.get("trace_sha256"), b.get("trace_sha256")
    if (sha_a and sha_b and sha_a != sha_b) or (not (sha_a and sha_b) and a["trace"] != b["trace"]):
        raise DivergeError(
            f"the runs are of different traces: a is {a['trace']} ({str(sha_a or '?')[:12]}), "
            f"b is {b['trace']} ({str(sha_b or '?')[:12]})"
        )


def diverge(
    events_a: pd.DataFrame,
    events_b: pd.DataFrame,
    record_a: Mapping[str, Any],
    record_b: Mapping[str, Any],
) -> dict[str, Any]:
    """The comparison of run a and run b (see the module docstring); DivergeError when they
    cannot be compared."""
    check_comparable(record_a, record_b)
    logs = (_Log("a", events_a, record_a), _Log("b", events_b, record_b))
    a, b = logs
    last = min(len(a.max_pinned), len(b.max_pinned))  # operators both runs started
    first: tuple[int, int] | None = None
    divergence: tuple[int, int] | None = None
    last_agreed: tuple[int, int] | None = None
    streak = streak_at_divergence = 0
    for operator in sorted(set(a.by_operator) | set(b.by_operator)):
        if operator > last:
            break
        mine, theirs = a.at(operator, 0), b.at(operator, 0)
        agreed = 0
        while (
            agreed < min(len(mine), len(theirs)) and mine[agreed].storage == theirs[agreed].storage
        ):
            agreed += 1
        if agreed:
            last_agreed, divergence = (operator, agreed), None
            streak += agreed
        if agreed < max(len(mine), len(theirs)):
            if first is None:
                first = (operator, agreed)
            if divergence is None:
                divergence, streak_at_divergence = (operator, agreed), streak
            streak = 0

    failing_sides = [
        side
        for side, r in zip(SIDES, (record_a, record_b), strict=True)
        if failing(str(r.get("status")))
    ]
    one_failing = failing_sides[0] if len(failing_sides) == 1 else None
    result: dict[str, Any] = {
        "format": ANALYSIS_FORMAT,
        "trace": record_a.get("trace"),
        "trace_sha256": record_a.get("trace_sha256"),
        "runs": {"a": _summary(record_a), "b": _summary(record_b)},
        "failing": one_failing,
        "operators_in_common": last,
        "same_decisions": first is None,
        "first_difference": _position(logs, *first) if first else None,
        "divergence": None,
        "after": None,
        "in_failure_operator": None,
        "failure_inputs": [],
        "retain": [],
        "failure": {
            side: _summary(r)["failure"]
            for side, r in zip(SIDES, (record_a, record_b), strict=True)
        },
        "series": {
            side: {"max_pinned": log.max_pinned, "max_depth": log.max_depth}
            for side, log in zip(SIDES, logs, strict=True)
        },
    }
    if divergence is not None:
        operator, index = divergence
        position = _position(logs, operator, index)
        position["agreed_before"] = streak_at_divergence
        position["last_agreed"] = (
            {
                "operator": last_agreed[0],
                "storage": a.by_operator[last_agreed[0]][last_agreed[1] - 1].storage,
                "decision": {
                    side: log.by_operator[last_agreed[0]][last_agreed[1] - 1].number
                    for side, log in zip(SIDES, logs, strict=True)
                },
            }
            if last_agreed is not None
            else None
        )
        result["divergence"] = position
        result["after"] = {
            side: log.counts(log.start_row(operator, index))
            for side, log in zip(SIDES, logs, strict=True)
        }
    if one_failing is None:
        return result
    failing_log, other_log = (a, b) if one_failing == "a" else (b, a)
    record = record_a if one_failing == "a" else record_b
    failed_in = int((record.get("failure") or {}).get("operator") or len(failing_log.max_pinned))
    result["in_failure_operator"] = {
        "operator": failed_in,
        **{side: log.counts(operator=failed_in) for side, log in zip(SIDES, logs, strict=True)},
    }
    result["failure_inputs"] = [
        {
            "storage": storage,
            "size": failing_log.size_of(storage),
            "evicted": failing_log.last_event(storage, failed_in),
            "other": other_log.last_event(storage, failed_in),
        }
        for storage in failing_log.rebuilt_inputs(failed_in)
    ]
    retained = sorted(int(s) for s in record.get("retained") or [])
    candidates: list[tuple[int, str]] = []
    victim = (result["divergence"] or {}).get(one_failing)
    if victim:
        candidates.append((int(victim["storage"]), "divergence"))
    for item in result["failure_inputs"]:
        # worth retaining: an input the failing operator had to rebuild that the other run
        # had resident (never evicted, or rebuilt since)
        other = item["other"]
        if other is None or other["kind"] == "remat":
            candidates.append((int(item["storage"]), "failure_input"))
    seen: set[int] = set()
    for storage, why in candidates:
        if storage in seen or storage in retained:
            continue
        seen.add(storage)
        result["retain"].append(
            {
                "storage": storage,
                "why": why,
                "run": one_failing,
                "run_id": record.get("run_id"),
                "budget": record.get("budget"),
                "retain": sorted({*retained, storage}),
            }
        )
    return result
