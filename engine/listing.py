"""`dtr-landscape runs`: a trace's stored runs, as a table or one JSON object per line.

    dtr-landscape runs TRACE [--policy P] [--db PATH] [--traces DIR] [--json]

A trace we can read is matched by content (its SHA-256), whatever name its runs were stored
under; a name or SHA-256 of a trace that is not on this machine still lists imported runs.
"""

from __future__ import annotations

import argparse
import io
import json
import sys
from collections.abc import Callable
from typing import Any

from engine.catalog import TraceNotFound, resolve
from engine.policies import POLICIES, make_policy
from engine.record import FIELD_NAMES
from engine.simulate import load

# The store's own columns shown beside the run record's fields.
STORE_FIELDS = ("run_id", "source", "sweep_id", "repeat", "stage", "cap")


def register(sub: Any) -> dict[str, Callable[[argparse.Namespace], int]]:
    runs = sub.add_parser("runs", help="list a trace's stored runs")
    runs.add_argument("trace", help="a trace name, path or SHA-256")
    runs.add_argument(
        "--policy", metavar="P", help=f"NAME[@k=v,...], one of: {', '.join(POLICIES)}"
    )
    runs.add_argument("--db", metavar="PATH", help="the store (default data/landscape.duckdb)")
    runs.add_argument("--traces", metavar="DIR", help="folder of the DTR logs")
    runs.add_argument("--json", action="store_true", help="one JSON object per run")
    return {"runs": _cmd_runs}


def stored_runs(
    trace: str, *, policy: str | None = None, db: str | None = None, traces: str | None = None
) -> list[dict[str, Any]]:
    """The stored runs of a trace as run records plus STORE_FIELDS, by budget."""
    from engine.store import Store, unflatten

    store = Store.open(db)
    spec = make_policy(policy).spec if policy else None
    try:
        _, program = load(resolve(trace, traces))
        key, known = program.sha256, True
    except TraceNotFound:
        key, known = trace, False
    frame = store.runs(trace=key, policy=spec)
    if frame.empty and not known:
        raise TraceNotFound(f"unknown trace {trace!r} and no stored runs under that name")
    rows = [unflatten(row) for row in frame.to_dict("records")]
    return [{name: row.get(name) for name in (*FIELD_NAMES, *STORE_FIELDS)} for row in rows]


def _cmd_runs(args: argparse.Namespace) -> int:
    rows = stored_runs(args.trace, policy=args.policy, db=args.db, traces=args.traces)
    out = io.StringIO()
    if args.json:
        for row in rows:
            out.write(json.dumps(row) + "\n")
        sys.stdout.write(out.getvalue())
        return 0
    out.write(
        f"{'ratio':>8} {'budget':>14} {'policy':<12} {'status':<8} {'overhead':>8} "
        f"{'clock':>14} {'evictions':>9} {'remats':>7} {'rep':>3} {'stage':<8} run_id\n"
    )
    for r in rows:
        ratio = f"{r['ratio']:.6g}" if r["ratio"] is not None else "-"
        overhead = f"{r['overhead']:.4f}" if r["overhead"] is not None else "-"
        repeat = r["repeat"] if r["repeat"] is not None else "-"
        out.write(
            f"{ratio:>8} {r['budget']:>14,} {r['policy']:<12} {r['status']:<8} {overhead:>8} "
            f"{r['clock'] or 0:>14,} {r['evictions'] or 0:>9,} {r['rematerializations'] or 0:>7,} "
            f"{repeat:>3} {r['stage'] or '-':<8} {r['run_id']}\n"
        )
    out.write(f"{len(rows)} runs\n")
    sys.stdout.write(out.getvalue())
    return 0
