"""How far the dashboard's estimate of an exact walk falls from complete walks.

For every trace a report (`holes --all --json`, default docs/landscapes.json) certifies whole
from 0.05 to 0.60 (the useful range), estimate that walk as the dashboard's "estimate" job
does (app/launch.py's strata and per-sample seconds) and print, as a Markdown table, the
estimate beside what the walks' stored runs counted and cost (`executions`, `run_seconds`),
with the ratios.
engine/landscape/estimate.py's SHORTFALL quotes the result.

    python tools/estimate_accuracy.py [--report docs/landscapes.json] [--traces DIR]
"""

from __future__ import annotations

import argparse
import time

from app.launch import ESTIMATE_SAMPLE_S, ESTIMATE_STRATA
from engine.landscape.estimate import duration, estimate_walk
from engine.landscape.report import budget_range
from engine.landscape.report_check import read_report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--report", default="docs/landscapes.json")
    parser.add_argument("--traces", default=None, help="the traces folder (else the setting)")
    args = parser.parse_args()
    report = read_report(args.report)
    print("| trace | estimate: executions, seconds | complete walk | walk / estimate | took |")
    print("|---|---:|---:|---:|---:|")
    for entry in report.data["traces"]:
        start, end = budget_range(entry["peak"])  # 0.05-0.60
        whole = any(s["from_budget"] <= start and s["to_budget"] >= end for s in entry["certified"])
        if not whole:
            continue
        began = time.perf_counter()
        guess = estimate_walk(
            entry["trace"],
            start=start,
            end=end,
            policy=report.data["policy"],
            cap=report.data["cap"],
            samples=ESTIMATE_STRATA,
            refine=ESTIMATE_STRATA,
            sample_seconds=ESTIMATE_SAMPLE_S,
            traces=args.traces,
        )
        took = time.perf_counter() - began
        print(
            f"| {entry['trace']} | {guess['executions']:,.0f}, {duration(guess['seconds'])} "
            f"| {entry['executions']:,}, {duration(entry['run_seconds'])} "
            f"| {entry['executions'] / guess['executions']:.1f}x, "
            f"{entry['run_seconds'] / guess['seconds']:.1f}x | {duration(took)} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
