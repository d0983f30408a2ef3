"""`dtr-landscape runs`: a trace's stored runs, as a table or one JSON object per line.

    dtr-landscape runs TRACE [--policy P] [--db PATH] [--traces DIR] [--json]

A trace we can read is matched by content (its SHA-256), whatever name its runs were stored
under; a name or SHA-256 of a trace that is not on this machine still lists imported runs.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator
from typing import Any

from engine.sim.catalog import TraceNotFound, resolve
from engine.sim.policies import make_policy
from engine.sim.record import FIELD_NAMES
from engine.sim.simulate import load

# The store's own columns shown beside the run record's fields.
STORE_FIELDS = ("run_id", "source", "sweep_id", "repeat", "stage", "cap")


def stored_runs(
    trace: str, *, policy: str | None = None, db: str | None = None, traces: str | None = None
) -> list[dict[str, Any]]:
    """The stored runs of a trace as run records plus STORE_FIELDS, by budget."""
    batches = run_batches(trace, policy=policy, db=db, traces=traces)
    return [run for batch in batches for run in batch]


def run_batches(
    trace: str,
    *,
    policy: str | None = None,
    db: str | None = None,
    traces: str | None = None,
    size: int = 4096,
) -> Iterator[list[dict[str, Any]]]:
    """`stored_runs` a few thousand at a time, for a listing to write as it goes: only the
    columns the records take are read, as plain rows (InceptionV4's 483,255 walked runs took
    65 s through pandas), and only one batch at a time is Python objects (all of them took
    1.5 GB). An unknown trace, or a store that cannot be read, fails here, before any batch."""
    from engine.landscape.store import RUN_COLUMNS, Store, runs_query

    store = Store.existing(db)
    spec = make_policy(policy).spec if policy else None
    try:
        _, program = load(resolve(trace, traces))
        key, known = program.sha256, True
    except TraceNotFound:
        key, known = trace, False
    wanted = {*FIELD_NAMES, *STORE_FIELDS, "retained", "same_lo", "same_hi"}
    columns = [n for n, _ in RUN_COLUMNS if n in wanted or n.startswith("failure_")]
    stored = store.row_batches(*runs_query(key, spec, columns), size=size)
    first = next(stored, [])
    if not first and not known:
        raise TraceNotFound(f"unknown trace {trace!r} and no stored runs under that name")
    return _as_records(itertools.chain([first], stored))


def _as_records(batches: Iterable[list[dict[str, Any]]]) -> Iterator[list[dict[str, Any]]]:
    from engine.landscape.store import unflatten

    names = (*FIELD_NAMES, *STORE_FIELDS)
    for batch in batches:
        if batch:
            yield [{name: record.get(name) for name in names} for record in map(unflatten, batch)]
