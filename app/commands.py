"""The dashboard's commands, `dtr-landscape serve` and `dtr-landscape bench-dashboard`.

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
    return {"serve": _cmd_serve, "bench-dashboard": _cmd_bench_dashboard}


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
