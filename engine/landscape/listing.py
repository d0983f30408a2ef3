"""`dtr-landscape runs`: a trace's stored runs, as a table or one JSON object per line.

    dtr-landscape runs TRACE [--policy P] [--db PATH] [--traces DIR] [--json]

A trace we can read is matched by content (its SHA-256), whatever name its runs were stored
under; a name or SHA-256 of a trace that is not on this machine still lists imported runs.
"""

from __future__ import annotations

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
    """The stored runs of a trace as run records plus STORE_FIELDS, by budget. Read as plain
    rows, not a DataFrame, and only the columns the records take: InceptionV4's 483,255
    walked runs took 65 s through pandas (most of it `to_dict` and `unflatten` of NumPy
    values)."""
    from engine.landscape.store import RUN_COLUMNS, Store, runs_query, unflatten

    store = Store.existing(db)
    spec = make_policy(policy).spec if policy else None
    try:
        _, program = load(resolve(trace, traces))
        key, known = program.sha256, True
    except TraceNotFound:
        key, known = trace, False
    wanted = {*FIELD_NAMES, *STORE_FIELDS, "retained", "same_lo", "same_hi"}
    columns = [n for n, _ in RUN_COLUMNS if n in wanted or n.startswith("failure_")]
    stored = store.rows(*runs_query(key, spec, columns))
    if not stored and not known:
        raise TraceNotFound(f"unknown trace {trace!r} and no stored runs under that name")
    names = (*FIELD_NAMES, *STORE_FIELDS)
    listed = []
    while stored:  # each row given up as it is listed: the rows are not held twice
        record = unflatten(stored.pop())
        listed.append({name: record.get(name) for name in names})
    listed.reverse()
    return listed
