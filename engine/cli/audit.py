"""`dtr-landscape audit`: a store's executions run again from scratch, field for field.

    dtr-landscape audit TRACE [--sample N] [--seed S]
        [--from R --to R | --from-budget B --to-budget B] [--policy P] [--cap 60]
        [--backend engine|simrd] [--workers N | --scheduler tcp://HOST:PORT]
        [--db PATH] [--traces DIR] [--json]

engine/landscape/audit.py draws the executions and compares; the runs go where check-report's
go (engine/landscape/report_check.py's run_budgets). Exit 0 when every drawn record is what a
fresh run gives, 1 when one is not (each difference printed), 2 on bad input. The store is
only read.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import Any

from engine.cli import arguments
from engine.cli.interrupts import exit_code, sigterm_interrupts

Handler = Callable[[argparse.Namespace], int]


def register(sub: Any) -> dict[str, Handler]:
    audit = sub.add_parser(
        "audit", help="run stored executions again from scratch and compare every field"
    )
    audit.add_argument("trace", help="a trace name (see `traces`) or a path to a DTR log")
    audit.add_argument(
        "--sample",
        type=arguments.count,
        default=20,
        metavar="N",
        help="executions drawn from the store (default 20; all when it holds fewer)",
    )
    audit.add_argument(
        "--seed", type=arguments.whole_number, default=0, help="what is drawn (default 0)"
    )
    stretch = "only executions whose interval meets [FROM, TO] (default: every one stored)"
    audit.add_argument(
        "--from", dest="from_ratio", type=arguments.ratio, metavar="R", help=f"{stretch}, ratios"
    )
    audit.add_argument("--to", dest="to_ratio", type=arguments.ratio, metavar="R")
    audit.add_argument(
        "--from-budget", type=arguments.byte_count, metavar="BYTES", help=f"{stretch}, bytes"
    )
    audit.add_argument("--to-budget", type=arguments.byte_count, metavar="BYTES")
    audit.add_argument("--policy", default="DTR", help="the stored runs' policy (default DTR)")
    audit.add_argument(
        "--cap", type=arguments.positive_float, default=60, help="the stored runs' cap (default 60)"
    )
    arguments.add_fresh_run_options(audit, "the fresh runs")
    audit.add_argument("--db", metavar="PATH", help="the DuckDB store")
    audit.add_argument("--traces", metavar="DIR", help="folder of the DTR logs")
    audit.add_argument("--json", action="store_true", help="print one JSON object")
    return {"audit": command_audit}


def command_audit(args: argparse.Namespace) -> int:
    from engine.landscape.audit import describe, draw, judge, stored_executions
    from engine.landscape.progress import Progress
    from engine.landscape.store import Store
    from engine.sim.policies import make_policy
    from engine.sim.simulate import baseline, load

    if args.backend == "simrd" and (args.workers > 1 or args.scheduler):
        raise ValueError("--backend simrd runs in this process: no --workers or --scheduler")
    policy = make_policy(args.policy).spec
    ref, program = load(args.trace, args.traces)
    stretch = arguments.budget_range(args, required=False)  # None: every stored execution
    start, end = (
        (0, 2**63 - 1) if stretch is None else stretch.in_bytes(lambda: baseline(program).peak)
    )
    store = Store.existing(args.db)
    executions = stored_executions(store, program.sha256, policy, args.cap, start, end)
    if not executions:
        raise ValueError(
            f"{store.path}: no stored execution of {ref.name} ({policy}, cap {args.cap:g}) "
            f"meets [{start:,}, {end:,}]"
        )
    drawn = draw(store, executions, args.sample, args.seed)
    budgets = sorted({d.budget for d in drawn})
    progress = Progress(len(budgets), label=f"{ref.name}: audit runs")
    fresh = arguments.fresh_runs(
        args, ref, program.sha256, budgets, policy=policy, cap=args.cap, progress=progress
    )
    try:
        with sigterm_interrupts():
            verdicts = judge(drawn, fresh)
    except KeyboardInterrupt as interrupt:
        print("dtr-landscape: audit interrupted", file=sys.stderr)
        return exit_code(interrupt)
    finally:
        progress.close()
    agrees = all(not v.problems for v in verdicts)
    result = {
        "trace": ref.name,
        "trace_sha256": program.sha256,
        "policy": policy,
        "cap": args.cap,
        "backend": args.backend,
        "stored": len(executions),
        "seed": args.seed,
        "audited": [v.as_dict() for v in verdicts],
        "agrees": agrees,
    }
    if args.json:
        print(json.dumps(result))
        return 0 if agrees else 1
    print(describe(result))
    for v in verdicts:
        if not v.problems:
            continue
        top = "..." if v.drawn.hi is None else f"{v.drawn.hi:,}"
        print(f"  run {v.drawn.run_id} [{v.drawn.lo:,}, {top}] at {v.drawn.budget:,}:")
        for problem in v.problems:
            print(f"    {problem}")
    return 0 if agrees else 1
