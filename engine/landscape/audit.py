"""`dtr-landscape audit`: stored executions run again from scratch and compared field for field.

A walk's records are mostly resumed runs: replayed from a kept state where the run first
differs from its predecessor, merged into the predecessor's rest, jumped along its log. The
tests prove on fixtures that such a record equals a fresh run's; an audit proves it on the
store a user is about to publish. It draws executions from the store (seeded, so a failing
audit can be repeated), runs each once more from operator 1 at a byte drawn inside its
same-execution interval (on this engine or on unmodified simrd), and compares every field
the run decides. A fresh run computes its interval itself, so one run checks the stored
interval's claim as well as the record: a wrong end shows up as a different `same_execution`.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from engine.landscape.holes import SAME_SETTINGS
from engine.landscape.schema import unflatten
from engine.sim.record import FIELD_NAMES

if TYPE_CHECKING:
    from engine.landscape.store import Store

# What a run decides: every record field but where it ran (trace, policy, budget, ratio, the
# retained set it was given), which engine version ran it and how long it took.
NOT_DECIDED = (
    "trace",
    "trace_sha256",
    "policy",
    "budget",
    "ratio",
    "retained",
    "engine_version",
    "wall_s",
)
DECIDED: tuple[str, ...] = tuple(name for name in FIELD_NAMES if name not in NOT_DECIDED)


@dataclass(frozen=True)
class Stored:
    """A stored execution as the draw sees it: its run and its interval."""

    run_id: str
    lo: int
    hi: int | None  # None: every budget from lo up


def stored_executions(
    store: Store, trace_sha256: str, policy: str, cap: float, start: int, end: int
) -> list[Stored]:
    """The stored runs a walk of [start, end] would reuse (the runs `stored_intervals` reads in
    engine/landscape/walk.py) whose interval meets that range: only their ids and intervals, so
    that a store of a million runs is drawn from in seconds (their whole records: 1 GB and 8 s
    for the Unrolled GAN's 154,793)."""
    rows = store.rows(
        f"SELECT run_id, same_lo, same_hi FROM runs WHERE trace_sha256 = ? AND {SAME_SETTINGS} "
        "AND status IN ('ok', 'oom', 'thrashed') AND same_lo IS NOT NULL "
        "AND same_lo <= ? AND (same_hi IS NULL OR same_hi >= ?) ORDER BY same_lo, run_id",
        [trace_sha256, policy, float(cap), end, start],
    )
    return [Stored(str(r["run_id"]), int(r["same_lo"]), _whole(r["same_hi"])) for r in rows]


def _whole(value: Any) -> int | None:
    return None if value is None else int(value)


@dataclass(frozen=True)
class Drawn:
    """One stored execution to run again, the byte of its interval it runs at, and its stored
    record (engine/landscape/schema.py's unflatten)."""

    run_id: str
    lo: int
    hi: int | None  # None: every budget from lo up
    budget: int
    stored: Mapping[str, Any]


def draw(store: Store, executions: Sequence[Stored], count: int, seed: int) -> list[Drawn]:
    """`count` of the executions (all of them when there are fewer), each at a byte drawn
    inside its interval, with its stored record, in budget order; the same executions and seed
    draw the same."""
    rng = random.Random(seed)
    chosen = [
        executions[i]
        for i in sorted(rng.sample(range(len(executions)), min(count, len(executions))))
    ]
    budgets = [e.lo if e.hi is None else rng.randint(e.lo, e.hi) for e in chosen]
    ids = [e.run_id for e in chosen]
    rows = store.rows("SELECT * FROM runs WHERE list_contains(?::VARCHAR[], run_id)", [ids])
    records = {str(row["run_id"]): unflatten(row) for row in rows}
    drawn = [
        Drawn(e.run_id, e.lo, e.hi, b, records[e.run_id])
        for e, b in zip(chosen, budgets, strict=True)
    ]
    return sorted(drawn, key=lambda d: (d.budget, d.run_id))


def differences(stored: Mapping[str, Any], fresh: Mapping[str, Any]) -> list[str]:
    """'field: stored X, fresh Y' for each decided field the two records disagree on."""
    return [
        f"{name}: stored {stored.get(name)!r}, fresh {fresh.get(name)!r}"
        for name in DECIDED
        if _decided(name, stored) != _decided(name, fresh)
    ]


def _decided(name: str, record: Mapping[str, Any]) -> Any:
    """The field as the execution decides it. A failure's `over_by` is the failing request's
    excess over the budget the run was given, so it moves byte for byte across an interval:
    what the execution decides is the excess plus the budget (the memory the allocation
    needed). A failure read back from the store carries every column even when the stored
    record had no such key: None and a missing key are the same."""
    value = record.get(name)
    if name != "failure" or value is None:
        return value
    failure = {k: v for k, v in value.items() if v is not None}
    if "over_by" in failure:
        failure["over_by"] += record["budget"]
    return failure


@dataclass
class Verdict:
    drawn: Drawn
    problems: list[str]  # empty: the fresh run gives the stored record

    def as_dict(self) -> dict[str, Any]:
        return {
            "run_id": self.drawn.run_id,
            "lo": self.drawn.lo,
            "hi": self.drawn.hi,
            "budget": self.drawn.budget,
            "status": self.drawn.stored.get("status"),
            "agrees": not self.problems,
            "problems": self.problems,
        }


def judge(
    drawn: Sequence[Drawn], fresh: Iterable[tuple[int, Mapping[str, Any] | None, str | None]]
) -> list[Verdict]:
    """Each drawn execution against the fresh run at its budget: `fresh` yields (budget,
    record or None, error) in any order, one per distinct budget."""
    by_budget = {budget: (record, error) for budget, record, error in fresh}
    verdicts = []
    for d in drawn:
        record, error = by_budget.get(d.budget, (None, "not run"))
        if record is None:
            verdicts.append(Verdict(d, [f"the fresh run failed: {error}"]))
        else:
            verdicts.append(Verdict(d, differences(d.stored, record)))
    return verdicts


def describe(result: Mapping[str, Any], *, shown: int = 3) -> str:
    """An audit's answer in one sentence, from what `audit --json` prints: the CLI's first line
    and the dashboard's jobs panel say the same. The first `shown` differing runs are named
    with their fields."""
    audited = result["audited"]
    differing = [a for a in audited if not a["agrees"]]
    head = (
        f"{result['trace']} {result['policy']}: {len(audited)} of {result['stored']:,} stored "
        f"executions run again on {result['backend']} (seed {result['seed']}): "
    )
    if not differing:
        return head + "every record as stored"
    named = "; ".join(
        f"run {a['run_id']} at {a['budget']:,} ({', '.join(_field(p) for p in a['problems'])})"
        for a in differing[:shown]
    )
    more = f"; and {len(differing) - shown} more" if len(differing) > shown else ""
    return head + f"{len(differing)} differ: {named}{more}"


def _field(problem: str) -> str:
    """'clock: stored 1, fresh 2' -> 'clock'; a failed run's problem as it is."""
    name, sep, _ = problem.partition(": stored ")
    return name if sep else problem
