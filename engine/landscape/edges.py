"""`dtr-landscape edges`: bisect between stored neighbouring intervals of different statuses
until an interval of one status sits directly below one of the other (an exact edge). The
bisection itself is engine/landscape/intervals.py's `find_edges`; the runs it makes are stored
(stage "edge") in batches, like a walk's."""

from __future__ import annotations

import os
from datetime import datetime
from typing import TYPE_CHECKING, Any

from engine.landscape.intervals import Interval, find_edges
from engine.landscape.walk import RunWriter, _result_head, _stored, _walk_row
from engine.sim.simulate import DEFAULT_CAP

if TYPE_CHECKING:
    from engine.landscape.store import Store
    from engine.sim.catalog import TraceRef


def find_exact_edges(
    store: Store,
    trace: str | TraceRef,
    *,
    policy: str = "DTR",
    cap: float = DEFAULT_CAP,
    traces: str | os.PathLike[str] | None = None,
) -> dict[str, Any]:
    the_policy, ref, program, known, conflicts = _stored(store, trace, policy, cap, traces)
    spec = the_policy.spec
    if not known:
        raise ValueError(f"no stored runs of {ref.name} with policy {spec}, cap {cap:g}")
    top = known[-1].hi if known[-1].hi is not None else known[-1].lo
    row = _walk_row("edges", ref, program, spec, cap, from_budget=known[0].lo, to_budget=top)
    writer = RunWriter(store, row["walk_id"], "edge", cap)
    try:
        edges, bisected = find_edges(known, lambda budget: writer.run(ref, budget, spec))
    except BaseException:
        writer.flush()
        store.add_walk(
            **row, ended_at=datetime.now(), reached=None, complete=False, runs=writer.executed
        )
        raise
    writer.flush()
    store.add_walk(
        **{**row, "ended_at": datetime.now()}, reached=top, complete=True, runs=writer.executed
    )
    return {
        **_result_head(row, cap),
        "edges": [{"below": _edge_side(a), "above": _edge_side(b)} for a, b in edges],
        "gaps_bisected": bisected,
        "runs_executed": writer.executed,
        "conflicting_intervals": conflicts,
    }


def _edge_side(interval: Interval) -> dict[str, Any]:
    return {k: getattr(interval, k) for k in ("lo", "hi", "status", "run_id")}
