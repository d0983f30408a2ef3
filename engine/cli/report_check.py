"""`dtr-landscape check-report`: a published landscape report checked run by run.

    dtr-landscape check-report REPORT [--trace NAME ...] [--backend engine|simrd]
        [--workers N | --scheduler tcp://HOST:PORT] [--db PATH] [--traces DIR] [--json]

Every hole's four edge runs (engine/landscape/report_check.py), trace by trace: exit 0 when the
report holds, 1 when a run or the report itself says otherwise (each difference printed),
2 when the file is not a report or a trace is not the one it was made from.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from engine.cli import arguments
from engine.cli.interrupts import exit_code, sigterm_interrupts

Handler = Callable[[argparse.Namespace], int]
STORE_EVERY = 50  # runs per store part (one part per run made hundreds of parts)


def register(sub: Any) -> dict[str, Handler]:
    check = sub.add_parser(
        "check-report",
        help="run every hole's edges of a `holes --all --json` report (docs/landscapes.json)",
    )
    check.add_argument("report", help="the report's JSON file")
    check.add_argument(
        "--trace",
        action="append",
        metavar="NAME",
        help="only this trace of the report (repeatable; default every one)",
    )
    arguments.add_fresh_run_options(check, "the runs")
    check.add_argument(
        "--interior",
        action="store_true",
        help="also walk every hole from first - 1 to last + 1, each execution inside (engine)",
    )
    check.add_argument(
        "--db",
        metavar="PATH",
        help="also store the engine's runs there, to open them (--interior walks reuse what it "
        "holds; without --db they walk into a temporary store)",
    )
    check.add_argument("--traces", metavar="DIR", help="folder of the DTR logs")
    check.add_argument("--json", action="store_true", help="print one JSON object")
    return {"check-report": command_check_report}


def command_check_report(args: argparse.Namespace) -> int:
    from engine.landscape.report_check import load_claimed, read_report
    from engine.sim.policies import make_policy

    if args.backend == "simrd" and (args.workers > 1 or args.scheduler or args.db):
        raise ValueError("--backend simrd runs in this process: no --workers, --scheduler or --db")
    if args.backend == "simrd" and args.interior:
        raise ValueError("--interior walks on the engine: not with --backend simrd")
    report = read_report(args.report)
    policy = make_policy(report.policy).spec  # a report of another policy names it
    chosen = list(report.traces)
    if args.trace:
        names = [t.name for t in report.traces]
        unknown = [n for n in args.trace if n not in names]
        if unknown:
            raise ValueError(
                f"--trace: {', '.join(unknown)} not in {args.report} "
                f"(it has {', '.join(names) or 'no trace'})"
            )
        chosen = [t for t in chosen if t.name in args.trace]
    # every trace found and the one its claims were made from, before anything runs or is stored
    loaded = [(claims, *load_claimed(claims, report.path, args.traces)) for claims in chosen]
    with contextlib.ExitStack() as cleanup:
        store = walks = None
        if args.db or args.interior:
            from engine.landscape.store import Store

            if args.db:
                store = walks = Store.open(args.db)
            else:  # the interior walks need a store; this one goes with the command
                folder = Path(cleanup.enter_context(tempfile.TemporaryDirectory()))
                walks = Store.open(folder / "walks.duckdb")
        results = []
        with sigterm_interrupts():
            try:
                for claims, ref, program in loaded:
                    result = _check_trace(claims, ref, program, report, policy, args, store)
                    if args.interior:
                        _walk_holes(result, claims, ref, report, policy, args, walks)
                    results.append(result)
                    if not args.json:  # each trace as it is checked: a long check shows progress
                        _print_trace(result, args.backend)
                        sys.stdout.flush()
            except KeyboardInterrupt as interrupt:
                print("dtr-landscape: check interrupted", file=sys.stderr)
                return exit_code(interrupt)
            finally:
                if store is not None:
                    store.compact()
    agrees = all(r["agrees"] for r in results)
    if args.json:
        out = {"report": args.report, "backend": args.backend, "traces": results}
        print(json.dumps({**out, "agrees": agrees}))
    return 0 if agrees else 1


def _check_trace(
    claims: Any,
    ref: Any,
    program: Any,
    report: Any,
    policy: str,
    args: argparse.Namespace,
    store: Any,
) -> dict[str, Any]:
    from engine.landscape.progress import Progress
    from engine.landscape.report_check import edge_budgets, inconsistencies, judged
    from engine.sim.simulate import baseline

    problems = inconsistencies(claims)
    peak = baseline(program).peak
    if peak != claims.peak:
        problems.append(
            f"traces[{claims.index}] ({claims.name}): peak is {claims.peak:,} in the report, "
            f"{peak:,} by this engine"
        )
    budgets = edge_budgets(claims.holes)
    progress = Progress(len(budgets), label=f"{claims.name}: edge runs")

    def finished() -> Any:
        for budget, record, error in arguments.fresh_runs(
            args, ref, program.sha256, budgets, policy=policy, cap=report.cap, progress=progress
        ):
            if store is not None and record is not None:
                rows.append(_row(record, report.cap))
                if len(rows) >= STORE_EVERY:
                    store.add_rows("runs", rows)
                    rows.clear()
            yield budget, record, error

    rows: list[dict[str, Any]] = []
    try:
        edges = judged(claims.holes, finished())
    finally:
        progress.close()
        if rows:  # what ran is stored, interrupted or not
            store.add_rows("runs", rows)
    holes = []
    for k, hole in enumerate(claims.holes):
        mine = edges[4 * k : 4 * k + 4]
        holes.append(
            {
                "first_fail_byte": hole.first,
                "last_fail_byte": hole.last,
                "width": hole.last - hole.first + 1,
                "agrees": all(e.problem is None for e in mine),
                "edges": [e.as_dict() for e in mine],
            }
        )
    return {
        "trace": claims.name,
        "trace_sha256": claims.sha256,
        "holes": holes,
        "runs": len(budgets),
        "problems": problems,
        "agrees": not problems and all(h["agrees"] for h in holes),
    }


def _walk_holes(
    result: dict[str, Any],
    claims: Any,
    ref: Any,
    report: Any,
    policy: str,
    args: argparse.Namespace,
    walks: Any,
) -> None:
    """Each hole walked from first - 1 to last + 1, judged execution by execution."""
    from engine.landscape.report_check import judge_interior
    from engine.landscape.walk import walk_landscape

    for hole, shown in zip(claims.holes, result["holes"], strict=True):
        walked = walk_landscape(
            walks,
            ref,
            start=hole.first - 1,
            end=hole.last + 1,
            policy=policy,
            cap=report.cap,
            workers=args.workers,
            scheduler=args.scheduler,
            progress=sys.stderr,
        )
        problem = judge_interior(hole, walked["intervals"])
        shown["interior"] = {
            "executions": sum(
                1 for s in walked["intervals"] if hole.first <= s["lo"] and s["lo"] <= hole.last
            ),
            "runs_executed": walked["runs_executed"],
            "agrees": problem is None,
            "problem": problem,
        }
        shown["agrees"] = shown["agrees"] and problem is None
    result["agrees"] = not result["problems"] and all(h["agrees"] for h in result["holes"])


def _row(record: dict[str, Any], cap: float) -> dict[str, Any]:
    """The run as a store row under a new id, which the record then carries into the output."""
    import uuid

    from engine.landscape.store import flatten

    record["run_id"] = uuid.uuid4().hex
    return flatten(record, source="engine", stage="check", cap=cap)


def _print_trace(result: dict[str, Any], backend: str) -> None:
    holes = result["holes"]
    wrong = [h for h in holes if not h["agrees"]]
    verdict = (
        "every hole as reported"
        if not wrong
        else f"{len(wrong)} hole{'s' if len(wrong) != 1 else ''} not as reported"
    )
    walked = [h["interior"]["executions"] for h in holes if "interior" in h]
    inside = f", {sum(walked):,} executions walked inside" if walked else ""
    print(
        f"{result['trace']}: {len(holes)} hole{'s' if len(holes) != 1 else ''}, "
        f"{result['runs']} runs on {'unmodified simrd' if backend == 'simrd' else 'the engine'}"
        f"{inside}: {verdict}"
    )
    for problem in result["problems"]:
        print(f"  report: {problem}")
    for hole in wrong:
        where = f"  hole [{hole['first_fail_byte']:,}, {hole['last_fail_byte']:,}]"
        for edge in hole["edges"]:
            if not edge["agrees"]:
                print(f"{where}, {edge['side']} (budget {edge['budget']:,}): {edge['problem']}")
        interior = hole.get("interior") or {}
        if interior.get("problem"):
            print(f"{where}, walked: {interior['problem']}")
