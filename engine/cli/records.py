"""`dtr-landscape import-traces | import-records | export`: data into and out of the store.

    dtr-landscape import-traces DIR|logs.zip [--db PATH]
    dtr-landscape import-records FILE [FILE ...] [--format evidence|pareto|runs] [--source TAG]
                  [--traces DIR] [--db PATH]
    dtr-landscape export [--table runs|intervals|traces|walks] (--csv FILE | --parquet FILE)
                  [--trace T] [--except EXPORT ...] [--db PATH]

The work is done in engine/landscape/importers.py.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from engine.landscape.importers import EXPORT_TABLES, export_table, import_records, import_traces

Handler = Callable[[argparse.Namespace], int]


def register(sub: Any) -> dict[str, Handler]:
    traces = sub.add_parser("import-traces", help="register DTR logs (a folder or logs.zip)")
    traces.add_argument("source", metavar="DIR|logs.zip", help="folder of *.log, or logs.zip")
    traces.add_argument("--db", metavar="PATH", help="the DuckDB store")

    records = sub.add_parser(
        "import-records",
        help="import runs: the paper's evidence CSV, simrd's pareto JSON, or this tool's "
        "runs export (Parquet, from another store)",
    )
    records.add_argument(
        "files", metavar="FILE", nargs="+", help="one or more; all are checked before any is stored"
    )
    records.add_argument(
        "--format", choices=("evidence", "pareto", "runs"), help="default: by suffix and content"
    )
    records.add_argument("--source", metavar="TAG", help="source column (default import:...)")
    records.add_argument("--traces", metavar="DIR", help="folder of the DTR logs (traces.json)")
    records.add_argument("--db", metavar="PATH", help="the DuckDB store")

    export = sub.add_parser("export", help="write a table to CSV or Parquet")
    export.add_argument("--table", choices=EXPORT_TABLES, default="runs")
    target = export.add_mutually_exclusive_group(required=True)
    target.add_argument("--csv", metavar="FILE")
    target.add_argument("--parquet", metavar="FILE")
    export.add_argument("--trace", metavar="T", help="only this trace (name or SHA-256)")
    export.add_argument(
        "--except",
        dest="except_files",
        metavar="EXPORT",
        action="append",
        default=[],
        help="runs only: leave out the runs of this earlier runs export (repeatable), so that a "
        "walk carried on over several stores is exported in parts",
    )
    export.add_argument("--db", metavar="PATH", help="the DuckDB store")
    return {
        "import-traces": _cmd_import_traces,
        "import-records": _cmd_import_records,
        "export": _cmd_export,
    }


def _cmd_import_traces(args: argparse.Namespace) -> int:
    from engine.landscape.store import Store

    print(json.dumps(import_traces(Store.open(args.db), args.source)))
    return 0


def _cmd_import_records(args: argparse.Namespace) -> int:
    from engine.landscape.store import Store

    summaries = import_records(
        Store.open(args.db), args.files, args.format, args.source, args.traces
    )
    for summary in summaries:
        print(json.dumps(summary))
    return 0


def _cmd_export(args: argparse.Namespace) -> int:
    from engine.landscape.store import Store

    option, target = ("--csv", args.csv) if args.csv else ("--parquet", args.parquet)
    suffix = option.removeprefix("--")
    if Path(target).suffix.lower() != f".{suffix}":
        raise ValueError(f"{option} {target}: the file name must end in .{suffix}")
    rows = export_table(Store.existing(args.db), target, args.table, args.trace, args.except_files)
    print(json.dumps({"table": args.table, "format": suffix, "path": target, "rows": rows}))
    return 0
