"""`dtr-landscape import-traces | import-records | export`: data into and out of the store.

    dtr-landscape import-traces DIR|logs.zip [--db PATH]
    dtr-landscape import-records FILE [FILE ...] [--format evidence|pareto|runs] [--source TAG]
                  [--traces DIR] [--db PATH]
    dtr-landscape export [--table runs|intervals|traces|walks] (--csv FILE | --parquet FILE)
                  [--trace T] [--except EXPORT ...] [--db PATH]
    dtr-landscape diff-records TRACE --against PATH [--policy P] [--db PATH] [--json]

The work is done in engine/landscape/importers.py and record_diff.py.
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

    compare = sub.add_parser(
        "diff-records",
        help="compare a trace's executions in two stores, field by field (another engine "
        "version, machine or walk): exit 0 when every shared one agrees",
    )
    compare.add_argument("trace", help="a trace name or SHA-256")
    compare.add_argument("--against", metavar="PATH", required=True, help="the other store")
    compare.add_argument("--policy", metavar="P", help="only this policy (default: every one)")
    compare.add_argument("--db", metavar="PATH", help="the DuckDB store")
    compare.add_argument("--json", action="store_true", help="print one JSON object")
    return {
        "import-traces": _cmd_import_traces,
        "import-records": _cmd_import_records,
        "export": _cmd_export,
        "diff-records": _cmd_diff_records,
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


def _cmd_diff_records(args: argparse.Namespace) -> int:
    from engine.landscape.record_diff import diff
    from engine.landscape.store import Store

    ours = Store.existing(args.db).runs(args.trace, args.policy)
    theirs = Store.existing(args.against).runs(args.trace, args.policy)
    if ours.empty and theirs.empty:
        raise ValueError(f"neither store holds runs of {args.trace!r}" + _under(args.policy))
    found = diff(ours, theirs)
    if args.json:
        print(json.dumps({"trace": args.trace, "policy": args.policy, **found.as_json()}))
        return 0 if found.agree else 1
    print(
        f"{args.trace}{_under(args.policy)}: {found.shared:,} executions in both stores, "
        f"{found.only_ours:,} only in this one, {found.only_theirs:,} only in the other"
    )
    print(
        f"  {found.differing:,} shared executions whose records differ; "
        f"{found.conflicting:,} whose interval overlaps another of the other store's; "
        f"{found.entered_elsewhere:,} entered at another budget of their interval"
    )
    for example in found.examples:
        fields = ", ".join(f"{k} {v[0]!r} against {v[1]!r}" for k, v in example["fields"].items())
        print(
            f"  [{example['same_lo']:,}, {example['same_hi'] or 'up'}] {example['policy']}: "
            f"{fields} (runs {example['run_id']} and {example['other_run_id']})"
        )
    if not found.shared:
        print("  nothing compared: no execution is in both stores")
    else:
        print("  agree" if found.agree else "  DISAGREE")
    return 0 if found.agree else 1


def _under(policy: str | None) -> str:
    return f" under {policy}" if policy else ""
