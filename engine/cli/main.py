"""`dtr-landscape`: the command line.

    dtr-landscape traces [--traces DIR] [--json]
    dtr-landscape run TRACE (--ratio R | --budget BYTES) [--policy NAME[@k=v,...]] [--cap 60]
                  [--time-limit S] [--retain IDS] [--events FILE] [--traces DIR]
                  [--backend engine|simrd]
    dtr-landscape bench [--simrd] [--simrd-slow] [--points TRACE:RATIO ...] [--no-store]
    dtr-landscape serve | bench-dashboard | figure  (app/commands.py, an entry point plugin)
    dtr-landscape sweep | runs                 (engine/cli/sweeps.py)
    dtr-landscape landscape | edges | holes    (engine/cli/landscapes.py)
    dtr-landscape import-traces | import-records | export   (engine/cli/records.py)
    dtr-landscape diverge                      (engine/cli/diverge.py)
    dtr-landscape check-report                 (engine/cli/report_check.py)
    dtr-landscape audit                        (engine/cli/audit.py)

Every resolved outcome (ok, oom, thrashed, timeout) exits 0: oom is a result, not an error.
Bad input exits 2 with one line saying what was wrong.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import signal
import sys
from collections.abc import Sequence
from importlib.metadata import entry_points

from engine.cli.arguments import byte_count, positive_float
from engine.sim.catalog import TraceNotFound
from engine.sim.policies import POLICIES, PolicyError
from engine.sim.trace import TraceError

PROG = "dtr-landscape"


class UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(message)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog=PROG, description="Feasibility landscapes of DTR (exact simrd replay).")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    traces = sub.add_parser("traces", help="list the traces: operators, peak bytes, model compute")
    traces.add_argument("--traces", metavar="DIR", help="folder of the DTR logs")
    traces.add_argument("--json", action="store_true", help="one JSON object per trace")

    run = sub.add_parser("run", help="replay one trace under one budget; prints a JSON record")
    run.add_argument("trace", help="a trace name (see `traces`) or a path to a DTR log")
    budget = run.add_mutually_exclusive_group(required=True)
    budget.add_argument("--ratio", type=positive_float, help="budget = floor(ratio * peak)")
    budget.add_argument("--budget", type=byte_count, help="budget in bytes")
    run.add_argument(
        "--policy", default="DTR", help=f"NAME[@k=v,...], one of: {', '.join(POLICIES)}"
    )
    run.add_argument("--cap", type=positive_float, default=60, help="thrash cap x model compute")
    run.add_argument("--time-limit", type=positive_float, metavar="SECONDS")
    run.add_argument(
        "--retain", default="", metavar="IDS", help="storage ids never evicted: 3131,932"
    )
    run.add_argument("--events", metavar="FILE", help="write the event log as Parquet")
    run.add_argument("--traces", metavar="DIR", help="folder of the DTR logs")
    run.add_argument(
        "--backend",
        choices=("engine", "simrd"),
        default="engine",
        help="simrd: the same point through unmodified simrd (needs SIMRD_DIR)",
    )
    # the Python reference runtime instead of the C one (tests, debugging)
    run.add_argument("--python-runtime", action="store_true", help=argparse.SUPPRESS)

    bench = sub.add_parser(
        "bench", help="time the engine (and simrd, with SIMRD_DIR) on fixed points"
    )
    bench.add_argument("--traces", metavar="DIR", help="folder of the DTR logs")
    bench.add_argument(
        "--simrd", action="store_true", help="also time unmodified simrd (SIMRD_DIR)"
    )
    bench.add_argument(
        "--points",
        nargs="*",
        metavar="TRACE:RATIO",
        help="override the point set, e.g. resnet32:0.101",
    )
    bench.add_argument(
        "--simrd-slow", action="store_true", help="with --simrd, also inceptionv4 0.235 (~12 min)"
    )
    bench.add_argument("--repeat", type=int, default=1, help="engine runs per point (best is kept)")
    bench.add_argument(
        "--no-store",
        dest="store",
        action="store_false",
        help="skip sweep throughput (1 and 2 workers) and the resnet32 exact walk",
    )

    for module in COMMAND_MODULES:
        COMMANDS.update(importlib.import_module(module).register(sub))
    # Commands of the layers above (the dashboard's `serve`, `bench-dashboard`) plug in through
    # an entry point group, so the engine never imports them.
    for plugin in entry_points(group=PLUGIN_GROUP):
        COMMANDS.update(plugin.load()(sub))
    return parser


def _cmd_traces(args: argparse.Namespace) -> int:
    from engine.sim.catalog import available
    from engine.sim.native import backend_description
    from engine.sim.simulate import baseline, load

    # Which runtime runs, first, and loudly when it is the slow one; on stderr, so that stdout
    # stays the table (or JSON lines) that scripts read.
    print(backend_description(), file=sys.stderr, flush=True)
    rows = []
    for ref in available(args.traces):
        _, program = load(ref)
        base = baseline(program)
        rows.append(
            {
                "name": ref.name,
                "operators": program.n_ops,
                "peak": base.peak,
                "model_compute": base.model_compute,
                "source": ref.source,
                "sha256": program.sha256,
                "path": str(ref.path),
            }
        )
    if args.json:
        for row in rows:
            print(json.dumps(row))
        return 0
    print(f"{'name':<16} {'operators':>9} {'peak bytes':>16} {'model compute':>15}  source")
    for row in rows:
        print(
            f"{row['name']:<16} {row['operators']:>9,} {row['peak']:>16,} "
            f"{row['model_compute']:>15,}  {row['source']}"
        )
    return 0


def _cmd_run(args: argparse.Namespace) -> int:
    from engine.sim.simulate import parse_retain, run_point

    retain = parse_retain(args.retain)
    if args.backend == "simrd":
        from engine.sim.catalog import resolve
        from engine.sim.reference import run_reference

        if args.events:
            raise UsageError("--events is only available with the engine backend")
        from engine.sim.policies import make_policy

        ref = resolve(args.trace, args.traces)
        spec = make_policy(args.policy)  # validates the name and parameters
        record = run_reference(
            str(ref.path),
            name=ref.name,
            budget=args.budget,
            ratio=args.ratio,
            policy=spec.name,
            seed=int(spec.params["seed"]) if "seed" in spec.params else None,
            cap=args.cap,
            retain=retain,
            time_limit=args.time_limit,
        )
    else:
        record = run_point(
            args.trace,
            budget=args.budget,
            ratio=args.ratio,
            policy=args.policy,
            cap=args.cap,
            retain=retain,
            time_limit=args.time_limit,
            events=args.events,
            traces=args.traces,
            native=not args.python_runtime,
        )
    print(json.dumps(record))
    return 0


def _cmd_bench(args: argparse.Namespace) -> int:
    from engine.cli.bench import main as bench_main

    return bench_main(args)


COMMANDS = {"traces": _cmd_traces, "run": _cmd_run, "bench": _cmd_bench}
# Modules adding subcommands: each has `register(subparsers) -> {name: handler}` and keeps its
# module-level imports light (the store and DuckDB are imported inside handlers).
COMMAND_MODULES: tuple[str, ...] = (
    "engine.cli.sweeps",
    "engine.cli.landscapes",
    "engine.cli.records",
    "engine.cli.diverge",
    "engine.cli.report_check",
    "engine.cli.audit",
)
PLUGIN_GROUP = "dtr_landscape.commands"


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        code = COMMANDS[args.command](args)
        sys.stdout.flush()  # here, so that a reader gone away is told below, not at exit
        return code
    except BrokenPipeError:
        # the reader went away (`| head`): stop quietly as other command-line tools do, and
        # point stdout at /dev/null so that the interpreter's last flush does not fail again
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 128 + signal.SIGPIPE
    except (UsageError, TraceError, TraceNotFound, PolicyError, ValueError) as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:  # a missing reference simulator and the like: one line, no traceback
        from engine.landscape.store import StoreError
        from engine.landscape.walk_claims import WalkOverlap
        from engine.sim.reference import ReferenceUnavailable

        if isinstance(exc, ReferenceUnavailable | StoreError | WalkOverlap):
            print(f"{PROG}: error: {exc}", file=sys.stderr)
            return 2
        raise


if __name__ == "__main__":
    sys.exit(main())
