"""`dtr-landscape landscape | edges | holes | walking`: exact walks, exact edges, hole counts,
the walks running now.

    dtr-landscape landscape TRACE (--from R --to R | --from-budget B --to-budget B)
        [--policy P] [--cap 60] [--max-runs N] [--db PATH] [--traces DIR] [--json]
        [--estimate SAMPLES [--estimate-steps K] [--estimate-seconds S] [--estimate-refine R]]
    dtr-landscape edges TRACE [--policy P] [--cap 60] [--db PATH] [--traces DIR] [--json]
    dtr-landscape holes TRACE [--policy P] [--cap 60] [--db PATH] [--json]
    dtr-landscape holes --all [--policy P] [--cap 60] [--db PATH] [--update REPORT]
        [--json | --markdown]
    dtr-landscape walking [--db PATH] [--json]

The work is done in engine/landscape/walk.py and engine/landscape/holes.py; `--estimate`
(engine/landscape/estimate.py) samples the range instead and stores nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from engine.cli import arguments
from engine.cli.interrupts import exit_code, sigterm_interrupts
from engine.landscape.edges import find_exact_edges
from engine.landscape.holes import holes_report
from engine.landscape.walk import walk_landscape
from engine.sim.policies import POLICIES, make_policy
from engine.sim.simulate import DEFAULT_CAP, baseline, load

Handler = Callable[[argparse.Namespace], int]


def register(sub: Any) -> dict[str, Handler]:
    walk = sub.add_parser("landscape", help="walk a budget range execution by execution")
    walk.add_argument("trace", help="a trace name (see `traces`) or a path to a DTR log")
    walk.add_argument("--from", dest="from_ratio", type=arguments.ratio, metavar="R")
    walk.add_argument("--to", dest="to_ratio", type=arguments.ratio, metavar="R")
    walk.add_argument("--from-budget", type=arguments.byte_count, metavar="BYTES")
    walk.add_argument("--to-budget", type=arguments.byte_count, metavar="BYTES")
    walk.add_argument("--max-runs", type=arguments.count, metavar="N", help="stop after N new runs")
    run_on = walk.add_mutually_exclusive_group()
    run_on.add_argument(
        "--workers", type=arguments.count, default=1, help="local processes walking chunks"
    )
    run_on.add_argument("--scheduler", metavar="ADDRESS", help="a Dask scheduler, tcp://H:P")
    walk.add_argument(
        "--intervals", action="store_true", help="list every interval (default: status stretches)"
    )
    walk.add_argument(
        "--estimate",
        type=arguments.count,
        metavar="SAMPLES",
        help="walk nothing: estimate a full walk's executions and seconds from short walks "
        "in SAMPLES strata (nothing is stored)",
    )
    estimate_options = (  # flag, parser, default, metavar, help
        ("--estimate-steps", arguments.count, 25, "K", "executions per sample walk (default 25)"),
        (
            "--estimate-seconds",
            arguments.positive_float,
            None,
            "S",
            "a sample walk also stops after S seconds (and two executions; default: none)",
        ),
        (
            "--estimate-refine",
            arguments.whole_number,
            None,
            "R",
            "then halve the costliest stratum R times, sampling both halves (default SAMPLES)",
        ),
    )
    for flag, parse, default, metavar, text in estimate_options:
        walk.add_argument(flag, type=parse, default=default, metavar=metavar, help=text)
    edges = sub.add_parser("edges", help="bisect stored neighbours of different status")
    edges.add_argument("trace", help="a trace name (see `traces`) or a path to a DTR log")
    holes = sub.add_parser("holes", help="failure regions of the stored samples (and bytes)")
    holes.add_argument("trace", nargs="?", help="a trace name or SHA-256, as stored")
    holes.add_argument(
        "--all",
        action="store_true",
        help="every stored trace: executions, certified bytes, exact holes, the paper's regions",
    )
    holes.add_argument("--markdown", action="store_true", help="with --all: the README's table")
    holes.add_argument(
        "--update",
        metavar="REPORT",
        help="with --all: the store's traces replace their entries in REPORT (a report file "
        "such as docs/landscapes.json; its other traces are kept), REPORT is rewritten, and "
        "what is printed is the updated report",
    )
    walking = sub.add_parser(
        "walking", help="the walks running on the store now: budgets, process, how far each got"
    )
    walking.add_argument("--db", metavar="PATH", help="the DuckDB store")
    walking.add_argument("--json", action="store_true", help="print one JSON list")
    for parser in (walk, edges, holes):
        parser.add_argument(
            "--policy", default="DTR", help=f"NAME[@k=v,...], one of: {', '.join(POLICIES)}"
        )
        parser.add_argument("--cap", type=arguments.positive_float, default=DEFAULT_CAP)
        parser.add_argument("--db", metavar="PATH", help="the DuckDB store")
        parser.add_argument("--json", action="store_true", help="print one JSON object")
    for parser in (walk, edges):  # holes only reads the store
        parser.add_argument("--traces", metavar="DIR", help="folder of the DTR logs")

    return {
        "landscape": _cmd_landscape,
        "edges": _cmd_edges,
        "holes": command_holes,
        "walking": _cmd_walking,
    }


def _cmd_walking(args: argparse.Namespace) -> int:
    from engine.landscape.store import Store, default_path
    from engine.landscape.walk_claims import describe_walk, progress_of, running_walks

    path = default_path(args.db)
    claims = running_walks(path, wait_s=5.0)
    if claims is None:
        raise RuntimeError(
            f"{path}: a walk has held the running walks' lock for 5 s (stopped while claiming?)"
        )
    notes = {c.walk_id: progress_of(path, c.walk_id) for c in claims}
    if args.json:
        print(json.dumps([{**asdict(c), "progress": notes[c.walk_id]} for c in claims]))
        return 0
    if not claims:
        print(f"no walk is running on {path}")
        return 0
    peaks = {
        str(row["trace_sha256"]): int(row["peak"])
        for row in Store.existing(path).rows(
            "SELECT trace_sha256, max(peak) AS peak FROM runs GROUP BY trace_sha256"
        )
        if row["peak"] is not None
    }
    for claim in claims:
        line = describe_walk(claim, notes[claim.walk_id], peaks.get(claim.trace_sha256))
        print(f"{claim.trace} {line}")
    return 0


def _cmd_landscape(args: argparse.Namespace) -> int:
    budgets = arguments.budget_range(args, required=True)
    assert budgets is not None  # required: a missing range is refused above
    make_policy(args.policy)  # an unknown policy is bad input before any loading
    ref, program = load(args.trace, args.traces)
    start, end = budgets.in_bytes(lambda: baseline(program).peak)
    if args.estimate is not None:
        return _estimate(args, ref, start, end)
    from engine.landscape.store import Store

    # The dashboard's runner stops a walk with SIGTERM: the walk then publishes what it ran
    # and records how far it certainly got, as on Ctrl-C (engine/cli/interrupts.py).
    try:
        with sigterm_interrupts():
            result = walk_landscape(
                Store.open(args.db),
                ref,
                start=start,
                end=end,
                policy=args.policy,
                cap=args.cap,
                max_runs=args.max_runs,
                traces=args.traces,
                workers=args.workers,
                scheduler=args.scheduler,
                progress=sys.stderr,
            )
    except KeyboardInterrupt as interrupt:
        print(f"{ref.name}: walk interrupted; what it ran is stored", file=sys.stderr)
        return exit_code(interrupt)
    if args.json:
        print(json.dumps(result))
        return 0
    print(
        f"{result['trace']} {result['policy']}: {len(result['intervals'])} intervals over "
        f"[{start:,}, {end:,}], {result['runs_executed']} runs, {result['runs_reused']} reused, "
        f"coverage {result['coverage']:.4f}"
        + ("" if result["complete"] else f", stopped at {result['stopped_at']}")
    )
    if args.intervals:
        for step in result["intervals"]:
            last = "..." if step["hi"] is None else f"{step['hi']:,}"
            print(f"  [{step['lo']:,}, {last}] {step['status']}")
        return 0
    for status, lo, hi, count in stretches(result["intervals"]):
        top = "..." if hi is None else f"{hi:,}"
        print(f"  {status:<8} [{lo:,}, {top}]  {count:,} execution{'s' if count > 1 else ''}")
    return 0


def _estimate(args: argparse.Namespace, ref: Any, start: int, end: int) -> int:
    from engine.landscape.estimate import StratumEstimate, describe, estimate_walk
    from engine.landscape.progress import Progress

    refine = args.estimate if args.estimate_refine is None else args.estimate_refine
    # each stratum one sample walk, each refinement two (a job runner reads these lines)
    progress = Progress(args.estimate + 2 * refine, label=f"{ref.name}: estimate's sample walks")

    def show(s: StratumEstimate) -> None:
        progress.update(max(s.statuses, key=s.statuses.__getitem__))
        if not args.json:
            print(
                f"  [{s.lo:,}, {s.hi:,}] {s.mean_width:>14,.0f} B/execution "
                f"{1000 * s.seconds_per_execution:>9.1f} ms/execution -> "
                f"{s.executions:>10,.0f} executions {s.seconds:>10,.0f} s  "
                + " ".join(f"{k} {v}" for k, v in sorted(s.statuses.items())),
                flush=True,
            )

    result = estimate_walk(
        ref,
        start=start,
        end=end,
        policy=args.policy,
        cap=args.cap,
        samples=args.estimate,
        steps=args.estimate_steps,
        refine=refine,
        sample_seconds=args.estimate_seconds,
        traces=args.traces,
        progress=show,
    )
    progress.close()
    if args.json:
        print(json.dumps(result))
    else:
        print(f"{result['trace']} {result['policy']} [{start:,}, {end:,}]: {describe(result)}")
    return 0


def stretches(steps: list[dict[str, Any]]) -> list[tuple[str, int, int | None, int]]:
    """Consecutive intervals of one status merged: (status, lo, hi, executions)."""
    out: list[tuple[str, int, int | None, int]] = []
    for step in steps:
        if out and out[-1][0] == step["status"]:
            status, lo, _, count = out[-1]
            out[-1] = (status, lo, step["hi"], count + 1)
        else:
            out.append((step["status"], step["lo"], step["hi"], 1))
    return out


def _cmd_edges(args: argparse.Namespace) -> int:
    from engine.landscape.store import Store

    result = find_exact_edges(
        Store.open(args.db), args.trace, policy=args.policy, cap=args.cap, traces=args.traces
    )
    if args.json:
        print(json.dumps(result))
        return 0
    print(f"{result['trace']} {result['policy']}: {len(result['edges'])} exact edges")
    for edge in result["edges"]:
        below, above = edge["below"], edge["above"]
        print(f"  {below['status']} up to {below['hi']:,} | {above['status']} from {above['lo']:,}")
    return 0


def command_holes(args: argparse.Namespace) -> int:
    from engine.landscape.store import Store

    if args.all == (args.trace is not None):
        raise ValueError("give a trace, or --all for every stored trace")
    if args.markdown and not args.all:
        raise ValueError("--markdown goes with --all")
    if args.update and not args.all:
        raise ValueError("--update goes with --all")
    if args.all:
        return _all_holes(Store.existing(args.db), args)
    report = holes_report(Store.existing(args.db), args.trace, policy=args.policy, cap=args.cap)
    if args.json:
        print(json.dumps(report))
        return 0
    first = report["first_success"]
    stable = report["stable_from"]
    print(
        f"{report['trace']} {report['policy']}: {report['samples']} samples, first success "
        f"{first['ratio'] if first else None}, {len(report['failing_above'])} failing above, "
        f"{len(report['regions'])} failure regions, stable from "
        f"{stable['ratio'] if stable else None}"
    )
    for region in report["regions"]:
        exact = region["bytes"] or {}
        width = f", {exact['width']:,} bytes" if exact.get("width") is not None else ""
        print(
            f"  ok {region['last_ok_below']} | fail {region['first_fail']} .. "
            f"{region['last_fail']} | ok {region['first_ok_above']}{width}"
            + (" (complete)" if exact.get("complete") else "")
        )
    # what walks found: without this, a trace that was only walked (no samples) would read
    # as "0 failure regions" however many exact holes its intervals show
    holes = report["interval_holes"]
    print(
        f"{report['trace']} {report['policy']}: {report['intervals']:,} distinct executions "
        f"(intervals), {len(holes)} exact hole{'s' if len(holes) != 1 else ''}"
        + "".join(f"; {text}" for text in _exact_edge_texts(report))
    )
    for hole in holes:
        ids = hole["run_ids"]
        print(
            f"  fail [{hole['first_fail_byte']:,}, {hole['last_fail_byte']:,}] "
            f"{hole['width']:,} bytes ({hole['intervals']:,} execution"
            f"{'s' if hole['intervals'] != 1 else ''}) | ok below "
            f"{ids['ok_below']}, ok above {ids['ok_above']}"
        )
    return 0


def _exact_edge_texts(report: dict[str, Any]) -> list[str]:
    """The walked first success and stable-from (engine/landscape/intervals.py
    `interval_edges`) in words, in bytes: to the byte when failing bytes touch them from
    below, otherwise an upper bound."""
    texts = []
    first = report["exact_first_success"]
    if first is not None:
        texts.append(f"first success {_edge_text(first)}")
    stable = report["exact_stable_from"]
    if stable is not None:
        top = "no upper end" if stable["to"] is None else f"{stable['to']:,}"
        texts.append(f"stable from {_edge_text(stable)}, every byte to {top} completes")
    return texts


def _edge_text(edge: dict[str, Any]) -> str:
    below = edge["failing_from"]
    if below is None:
        return f"at most {edge['byte']:,} (the bytes just below it are not classified)"
    return f"{edge['byte']:,} (every byte from {below:,} below it fails)"


def _update_report(path: str, stored: dict[str, Any]) -> dict[str, Any]:
    """Rewrite the report at `path` with the store's traces in it (report.merged_report), in
    one rename: a reader, or a check-report running on it, sees the old file or the new one.
    Says on stderr what each trace's entry was and is."""
    from engine.landscape.report import merged_report
    from engine.landscape.report_check import read_report

    merged, lines = merged_report(read_report(path), stored)
    target = Path(path)
    tmp = target.with_name(f".{target.name}.tmp")
    tmp.write_text(json.dumps(merged, indent=1) + "\n", encoding="utf-8")
    os.replace(tmp, target)
    for line in lines:
        print(f"{path}: {line}", file=sys.stderr)
    return merged


def _all_holes(store: Any, args: argparse.Namespace) -> int:
    from engine.landscape.report import landscape_report, markdown_table

    report = landscape_report(store, policy=args.policy, cap=args.cap)
    if args.update:
        report = _update_report(args.update, report)
    if args.json:
        print(json.dumps(report))
        return 0
    if args.markdown:
        print(markdown_table(report))
        return 0
    if not report["traces"]:
        print(f"no stored runs with policy {report['policy']}, cap {args.cap:g}")
    for t in report["traces"]:
        print(
            f"{t['trace']}: {t['executions']:,} executions, {len(t['holes'])} exact "
            f"hole{'s' if len(t['holes']) != 1 else ''}, "
            f"{len(t['certified'])} certified stretch{'es' if len(t['certified']) != 1 else ''}"
        )
        for h in t["holes"]:
            print(
                f"  fail [{h['first_fail_byte']:,}, {h['last_fail_byte']:,}] {h['width']:,} bytes "
                f"(ratios {h['first_fail_ratio']:.6f}-{h['last_fail_ratio']:.6f}, "
                f"{'/'.join(h['statuses'])}, {h['intervals']} executions)"
            )
    return 0
