"""The dashboard's commands: `dtr-landscape serve`, `bench-dashboard` and `figure`.

    dtr-landscape figure strip|scatter|overhead TRACE [--policy P] [--depth COLUMN]
    dtr-landscape figure operators RUN_ID
    dtr-landscape figure compare RUN_A RUN_B
        each with --out FILE.(png|svg|pdf) [--out ...] [--db PATH] [--traces DIR]

They plug into the engine's command line through the entry point group
`dtr_landscape.commands` (pyproject.toml), so the engine never imports the dashboard.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from typing import Any

Handler = Callable[[argparse.Namespace], int]


def register(sub: Any) -> dict[str, Handler]:
    serve = sub.add_parser("serve", help="serve the dashboard with gunicorn")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8050)
    serve.add_argument("--workers", type=int, default=2)
    serve.add_argument("--db", metavar="PATH", help="the DuckDB store")
    serve.add_argument("--traces", metavar="DIR", help="folder of the DTR logs")
    bench = sub.add_parser(
        "bench-dashboard",
        help="time the dashboard in Chromium (overview with 10,000 runs, a run detail); "
        "--load: many users browsing while a sweep writes",
    )
    bench.add_argument(
        "--load", action="store_true", help="locust users against gunicorn during a sweep"
    )
    bench.add_argument("--users", type=int, default=50, help="with --load: concurrent users")
    bench.add_argument("--runs", type=int, default=1000, help="with --load: runs the sweep writes")
    figure = sub.add_parser(
        "figure", help="a dashboard chart as PNG, SVG or PDF (the same builder as the page)"
    )
    kinds = figure.add_subparsers(dest="figure_kind", required=True, metavar="KIND")
    for name, help_text in (
        ("strip", "the outcome strip of a trace"),
        ("scatter", "peak pinned memory against depth, one point per run"),
        ("overhead", "overhead against budget of the completing runs"),
    ):
        parser = kinds.add_parser(name, help=help_text)
        parser.add_argument("trace", help="a trace name, as stored")
        parser.add_argument("--policy", default="DTR")
        if name == "scatter":
            parser.add_argument(
                "--depth",
                choices=("depth_at_peak_pinned", "max_nesting_depth"),
                default="depth_at_peak_pinned",
            )
    operators = kinds.add_parser("operators", help="a run's per-operator pinned memory and depth")
    operators.add_argument("run", metavar="RUN_ID")
    compare = kinds.add_parser(
        "compare", help="two runs side by side (computes and caches the comparison if needed)"
    )
    compare.add_argument("a", metavar="RUN_A")
    compare.add_argument("b", metavar="RUN_B")
    for parser in kinds.choices.values():
        parser.add_argument(
            "--out",
            action="append",
            required=True,
            metavar="FILE",
            help="FILE.png, FILE.svg or FILE.pdf (repeat for several formats)",
        )
        parser.add_argument("--db", metavar="PATH", help="the DuckDB store")
        parser.add_argument("--traces", metavar="DIR", help="folder of the DTR logs")
    return {
        "serve": _cmd_serve,
        "bench-dashboard": _cmd_bench_dashboard,
        "figure": _cmd_figure,
    }


def _cmd_serve(args: argparse.Namespace) -> int:
    if args.db:
        os.environ["DTR_LANDSCAPE_DB"] = args.db
    if args.traces:
        os.environ["DTR_LANDSCAPE_TRACES"] = args.traces
    from app.serve import serve

    return serve(args.host, args.port, args.workers)


def _cmd_bench_dashboard(args: argparse.Namespace) -> int:
    if args.load:
        from app.load_bench import main

        return main(args)
    from app.browser_bench import bench_dashboard

    for line in bench_dashboard():
        print(line)
    return 0


def _cmd_figure(args: argparse.Namespace) -> int:
    """Build the chart once, render it to every --out file in one headless browser."""
    import json
    from pathlib import Path

    if args.db:
        os.environ["DTR_LANDSCAPE_DB"] = args.db
    if args.traces:
        os.environ["DTR_LANDSCAPE_TRACES"] = args.traces
    from app import figures

    targets = [Path(out) for out in args.out]
    for target in targets:
        fmt = target.suffix.lower().lstrip(".")
        if fmt not in figures.FORMATS:
            raise ValueError(f"--out {target}: the file name must end in .png, .svg or .pdf")
    kind = args.figure_kind
    params = {
        name: str(getattr(args, name))
        for name in ("trace", "policy", "depth", "run", "a", "b")
        if getattr(args, name, None) is not None
    }
    if kind == "compare":
        _ensure_comparison(args.a, args.b)
    fig = figures.build(kind, params)
    rendered = figures.render([(fig, t.suffix.lower().lstrip(".")) for t in targets])
    for target, body in zip(targets, rendered, strict=True):
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(body)
    print(json.dumps({"figure": kind, "files": [str(t) for t in targets]}))
    return 0


def _ensure_comparison(run_a: str, run_b: str) -> None:
    """A command line may simulate: compute and cache a comparison the page has not."""
    import sys

    from app import data
    from engine.landscape.event_logs import compare_stored, write_analysis

    if data.read_compare(run_a, run_b) is not None:
        return
    analysis = compare_stored(
        data.store(),
        run_a,
        run_b,
        events_dir=data.store_path().parent / data.EVENTS_DIR,
        progress=lambda done, total, what: print(
            f"figure: {done}/{total} {what}", file=sys.stderr, flush=True
        ),
    )
    write_analysis(data.compare_path(run_a, run_b), analysis)
