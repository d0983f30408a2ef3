"""`dtr-landscape sweep` and `runs`: sampled landscapes into the store, and what it holds.

    dtr-landscape sweep TRACE [--policy P ...] (--grid FROM:TO:STEP | --ratios a,b,c)
        [--interior N --seed S] [--refine STEP] [--repeats K] [--cap 60] [--time-limit S]
        [--workers N | --scheduler tcp://HOST:PORT] [--db PATH] [--traces DIR]
    dtr-landscape runs TRACE [--policy P] [--db PATH] [--traces DIR] [--json]

The work is done in engine/landscape/sweep.py and engine/landscape/listing.py.
"""

from __future__ import annotations

import argparse
import io
import json
import sys
import time
from collections.abc import Callable
from typing import Any

from engine.cli import arguments
from engine.cli.interrupts import exit_code, sigterm_interrupts
from engine.landscape.distributed import open_executor
from engine.landscape.listing import run_batches
from engine.landscape.progress import Progress
from engine.landscape.sampling import plan_sweep
from engine.landscape.sweep import Tally, run_sweep
from engine.sim.policies import POLICIES
from engine.sim.simulate import DEFAULT_CAP

Handler = Callable[[argparse.Namespace], int]


def register(sub: Any) -> dict[str, Handler]:
    return {**register_sweep(sub), **register_runs(sub)}


def _seed(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer seed, got {text!r}") from None


def register_sweep(sub: Any) -> dict[str, Callable[[argparse.Namespace], int]]:
    policies = f"NAME[@k=v,...], one of: {', '.join(POLICIES)}"
    sweep = sub.add_parser("sweep", help="sample a trace's budgets into the store, resumably")
    sweep.add_argument("trace", help="a trace name (see `traces`) or a path to a DTR log")
    sweep.add_argument("--policy", action="extend", nargs="+", metavar="P", help=policies)
    where = sweep.add_mutually_exclusive_group(required=True)
    where.add_argument("--grid", metavar="FROM:TO:STEP", help="ratios FROM..TO, TO included")
    where.add_argument("--ratios", metavar="A,B,C", help="these budget ratios")
    sweep.add_argument(
        "--interior",
        type=arguments.count,
        default=0,
        metavar="N",
        help="N seeded random ratios inside every grid interval",
    )
    sweep.add_argument("--seed", type=_seed, help="seed of --interior (default 0)")
    sweep.add_argument(
        "--refine",
        type=arguments.positive_float,
        metavar="STEP",
        help="then a STEP grid inside intervals whose outcomes differ",
    )
    sweep.add_argument("--repeats", type=arguments.count, default=1, metavar="K")
    sweep.add_argument(
        "--cap", type=arguments.positive_float, default=DEFAULT_CAP, help="thrash cap"
    )
    sweep.add_argument(
        "--time-limit", type=arguments.positive_float, metavar="SECONDS", help="per run"
    )
    sweep.add_argument(
        "--retry-timeouts", action="store_true", help="run again the points stored only as timeouts"
    )
    run_on = sweep.add_mutually_exclusive_group()
    run_on.add_argument("--workers", type=arguments.count, default=1, help="local processes")
    run_on.add_argument("--scheduler", metavar="ADDRESS", help="a Dask scheduler, tcp://H:P")
    sweep.add_argument("--db", metavar="PATH", help="the store (default data/landscape.duckdb)")
    sweep.add_argument("--traces", metavar="DIR", help="folder of the DTR logs")

    return {"sweep": _cmd_sweep}


def _cmd_sweep(args: argparse.Namespace) -> int:
    from engine.landscape.store import Store

    spec = plan_sweep(
        args.trace,
        traces=args.traces,
        policies=args.policy or ["DTR"],
        grid=args.grid,
        ratios=args.ratios,
        interior_per_interval=args.interior,
        seed=args.seed,
        refine_step=args.refine,
        repeats=args.repeats,
        cap=args.cap,
        time_limit=args.time_limit,
        retry_timeouts=args.retry_timeouts,
    )
    spec.args.update(workers=args.workers, scheduler=args.scheduler)
    started = time.monotonic()
    executor = open_executor(
        spec.trace, spec.sha256, workers=args.workers, scheduler=args.scheduler
    )
    store = Store.open(args.db)
    tally = Tally()
    interrupted = 0
    # A job runner stops a sweep with SIGTERM: wind down as for Ctrl-C (stop feeding work,
    # compact, print the summary) instead of dying mid-way.
    try:
        with sigterm_interrupts():
            run_sweep(spec, store, executor, Progress(0, label=spec.trace.name), tally)
    except KeyboardInterrupt as exc:
        interrupted = exit_code(exc)
    finally:
        executor.close()
    summary: dict[str, Any] = {
        "sweep_id": spec.sweep_id,
        "trace": spec.trace.name,
        "total": tally.total,
        "done": tally.done,
        "skipped_existing": tally.skipped_existing,
        "errors": len(tally.errors),
        "by_status": dict(sorted(tally.by_status.items())),
        "seconds": round(time.monotonic() - started, 3),
    }
    if interrupted:
        summary["interrupted"] = True
    print(json.dumps(summary))
    return interrupted or (1 if tally.errors else 0)


def register_runs(sub: Any) -> dict[str, Callable[[argparse.Namespace], int]]:
    runs = sub.add_parser("runs", help="list a trace's stored runs")
    runs.add_argument("trace", help="a trace name, path or SHA-256")
    runs.add_argument(
        "--policy", metavar="P", help=f"NAME[@k=v,...], one of: {', '.join(POLICIES)}"
    )
    runs.add_argument("--db", metavar="PATH", help="the store (default data/landscape.duckdb)")
    runs.add_argument("--traces", metavar="DIR", help="folder of the DTR logs")
    runs.add_argument("--json", action="store_true", help="one JSON object per run")
    return {"runs": _cmd_runs}


def _cmd_runs(args: argparse.Namespace) -> int:
    batches = run_batches(args.trace, policy=args.policy, db=args.db, traces=args.traces)
    if args.json:
        # written a batch at a time, as it is read: a walked landscape's JSON is 100s of MB
        for batch in batches:
            sys.stdout.write("".join(json.dumps(row) + "\n" for row in batch))
        return 0
    sys.stdout.write(
        f"{'ratio':>8} {'budget':>14} {'policy':<12} {'status':<8} {'overhead':>8} "
        f"{'clock':>14} {'evictions':>9} {'remats':>7} {'rep':>3} {'stage':<8} run_id\n"
    )
    listed = 0
    for batch in batches:
        out = io.StringIO()
        for r in batch:
            ratio = f"{r['ratio']:.6g}" if r["ratio"] is not None else "-"
            overhead = f"{r['overhead']:.4f}" if r["overhead"] is not None else "-"
            repeat = r["repeat"] if r["repeat"] is not None else "-"
            out.write(
                f"{ratio:>8} {r['budget']:>14,} {r['policy']:<12} {r['status']:<8} "
                f"{overhead:>8} {r['clock'] or 0:>14,} {r['evictions'] or 0:>9,} "
                f"{r['rematerializations'] or 0:>7,} {repeat:>3} {r['stage'] or '-':<8} "
                f"{r['run_id']}\n"
            )
        sys.stdout.write(out.getvalue())
        listed += len(batch)
    sys.stdout.write(f"{listed} runs\n")
    return 0
