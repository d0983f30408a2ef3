"""`dtr-landscape diverge`: why one budget fails where another succeeds.

    dtr-landscape diverge TRACE (--budget B | --ratio R) (--budget B | --ratio R)
        [--policy P] [--cap 60] [--retain IDS] [--traces DIR] [--keep-events DIR] [--json]
    dtr-landscape diverge --runs RUN_A RUN_B [--db PATH] [--events-dir DIR] [--out FILE]
        [--traces DIR] [--json]

The first form runs both budgets with their event logs; the second compares two stored runs,
recording the event log of each side that has none yet (events/<run_id>.parquet beside the
store) and, with --out, writing the analysis there too (what the dashboard's compare page
caches). Progress goes to stderr as `k/n` lines. The analysis is engine/landscape/diverge.py.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from engine.cli import arguments
from engine.sim.policies import POLICIES
from engine.sim.simulate import DEFAULT_CAP, parse_retain

Handler = Callable[[argparse.Namespace], int]


def _budget(text: str) -> tuple[str, float | int]:
    return ("budget", arguments.byte_count(text))


def _ratio(text: str) -> tuple[str, float | int]:
    return ("ratio", arguments.ratio(text))


def register(sub: Any) -> dict[str, Handler]:
    parser = sub.add_parser(
        "diverge", help="two runs side by side: where their decisions part, and why one fails"
    )
    parser.add_argument("trace", nargs="?", help="a trace name (see `traces`) or a DTR log path")
    parser.add_argument(
        "--budget", dest="points", action="append", type=_budget, metavar="BYTES", default=[]
    )
    parser.add_argument(
        "--ratio", dest="points", action="append", type=_ratio, metavar="R", default=[]
    )
    parser.add_argument(
        "--policy", default="DTR", help=f"NAME[@k=v,...], one of: {', '.join(POLICIES)}"
    )
    parser.add_argument("--cap", type=arguments.positive_float, default=DEFAULT_CAP)
    parser.add_argument("--retain", default="", metavar="IDS", help="for both runs: 3131,932")
    parser.add_argument("--keep-events", metavar="DIR", help="keep the two event logs here")
    parser.add_argument(
        "--runs", nargs=2, metavar=("RUN_A", "RUN_B"), help="compare two stored runs instead"
    )
    parser.add_argument("--db", metavar="PATH", help="the DuckDB store (with --runs)")
    parser.add_argument(
        "--events-dir", metavar="DIR", help="event logs of stored runs (default: events/ beside)"
    )
    parser.add_argument("--out", metavar="FILE", help="also write the analysis (JSON) here")
    parser.add_argument("--traces", metavar="DIR", help="folder of the DTR logs")
    parser.add_argument("--json", action="store_true", help="print the analysis as JSON")
    return {"diverge": command_diverge}


def _progress(done: int, total: int, what: str) -> None:
    print(f"diverge: {done}/{total} {what}", file=sys.stderr, flush=True)


def command_diverge(args: argparse.Namespace) -> int:
    if args.runs:
        if args.trace or args.points:
            raise ValueError("--runs compares two stored runs: give no TRACE, --budget or --ratio")
        analysis = _stored(args)
    else:
        if args.db or args.events_dir:
            raise ValueError("--db and --events-dir go with --runs RUN_A RUN_B")
        analysis = _points(args)
    if args.out:
        from engine.landscape.event_logs import write_analysis

        write_analysis(Path(args.out), analysis)
    if args.json:
        print(json.dumps(analysis))
    else:
        print("\n".join(describe(analysis)))
    return 0


def _points(args: argparse.Namespace) -> dict[str, Any]:
    from engine.sim.policies import make_policy
    from engine.sim.simulate import baseline, budget_for, load, run_point

    if not args.trace:
        raise ValueError("give a TRACE and two budgets (--budget B or --ratio R, twice)")
    if len(args.points) != 2:
        raise ValueError(
            f"give exactly two budgets (--budget BYTES or --ratio R), got {len(args.points)}"
        )
    retain = parse_retain(args.retain)
    make_policy(args.policy)  # an unknown policy is bad input before any replay
    ref, program = load(args.trace, args.traces)
    peak = baseline(program).peak
    budgets = [budget_for(v, peak) if kind == "ratio" else int(v) for kind, v in args.points]
    if budgets[0] == budgets[1]:
        raise ValueError(f"both budgets are {budgets[0]:,} bytes: nothing to compare")
    with tempfile.TemporaryDirectory(prefix="dtr-diverge-") as tmp:
        folder = Path(args.keep_events or tmp)
        folder.mkdir(parents=True, exist_ok=True)
        records, paths = [], []
        for i, ((kind, value), budget) in enumerate(zip(args.points, budgets, strict=True)):
            side = "ab"[i]
            _progress(i, 3, f"run {side} at budget {budget:,} with its event log")
            path = folder / f"{ref.name}-{budget}.parquet"
            records.append(
                run_point(
                    ref,
                    budget=budget if kind == "budget" else None,
                    ratio=float(value) if kind == "ratio" else None,
                    policy=args.policy,
                    cap=args.cap,
                    retain=retain,
                    events=path,
                )
            )
            paths.append(path)
        _progress(2, 3, "analysing the two event logs")
        import pandas as pd

        from engine.landscape.diverge import diverge

        analysis = diverge(pd.read_parquet(paths[0]), pd.read_parquet(paths[1]), *records)
    _progress(3, 3, "done")
    return analysis


def _stored(args: argparse.Namespace) -> dict[str, Any]:
    from engine.landscape.event_logs import check_distinct, compare_stored
    from engine.landscape.store import Store

    check_distinct(*args.runs)  # an argument error, whatever the store
    return compare_stored(
        Store.existing(args.db),
        *args.runs,
        events_dir=Path(args.events_dir) if args.events_dir else None,
        traces=args.traces,
        progress=_progress,
    )


# -- the text form -------------------------------------------------------------------------
def _score(value: Any) -> str:
    if value is None:
        return "none"
    return "inf" if value == "inf" else f"{float(value):.3g}"


def victim_text(victim: Mapping[str, Any] | None) -> str:
    """`storage 3131 at operator 2,267 (score 2.82e-09 among 675 candidates; runner-up 932,
    8.18e-09)`, or a note that the run evicts nothing more."""
    if not victim:
        return "no further eviction"
    runner = (
        f"; runner-up {victim['runner_up']}, {_score(victim['runner_up_score'])}"
        if victim.get("runner_up") is not None
        else "; no runner-up"
    )
    return (
        f"storage {victim['storage']} at operator {victim['operator']:,} (score "
        f"{_score(victim['score'])} among {victim['pool_size']:,} candidates{runner})"
    )


def describe(analysis: Mapping[str, Any]) -> list[str]:
    """The analysis in a few lines of text (the CLI's output without --json)."""
    from engine.landscape.diverge import SIDES  # it imports pandas: not at every start-up

    runs = analysis["runs"]
    lines = [
        f"{analysis['trace']}: a = {runs['a']['budget']:,} B ({runs['a']['status']}), "
        f"b = {runs['b']['budget']:,} B ({runs['b']['status']}), "
        f"{analysis['operators_in_common']:,} operators in common"
    ]
    first, div = analysis["first_difference"], analysis["divergence"]
    if first is None:
        lines.append("the runs make the same policy decisions throughout")
    else:
        lines.append(
            f"first different decision at operator {first['operator']:,}: "
            f"a {victim_text(first['a'])}; b {victim_text(first['b'])}"
        )
    if div is not None:
        agreed = div.get("last_agreed")
        since = (
            f" after {div['agreed_before']} agreed decision(s), the last storage "
            f"{agreed['storage']} at operator {agreed['operator']:,}"
            if agreed
            else ""
        )
        lines.append(f"the runs part for good at operator {div['operator']:,}{since}:")
        for side in SIDES:
            after = analysis["after"][side]
            lines.append(
                f"  {side} evicts {victim_text(div[side])}; from there {after['evictions']:,} "
                f"evictions, {after['rematerializations']:,} rematerializations"
            )
    inside = analysis.get("in_failure_operator")
    if inside:
        lines.append(
            f"in operator {inside['operator']:,}: "
            + "; ".join(
                f"{side} {inside[side]['evictions']:,} evictions, "
                f"{inside[side]['rematerializations']:,} rematerializations"
                for side in SIDES
            )
        )
    for side in SIDES:
        failure = analysis["failure"][side]
        if failure:
            lines.append(
                f"{side} fails in operator {failure['operator']:,}: {failure['request']:,} B "
                f"requested, {failure['pinned']:,} B pinned at depth {failure['depth']}, "
                f"{failure['over_by']:,} B over"
            )
    for item in analysis.get("retain") or []:
        lines.append(
            f"what-if: rerun {item['run']} retaining {item['storage']} "
            f"(--retain {','.join(map(str, item['retain']))}, {item['why'].replace('_', ' ')})"
        )
    return lines
