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
import sys
import time

from app.launch import ESTIMATE_SAMPLE_S, ESTIMATE_STRATA
from engine.landscape.estimate import duration, estimate_walk
from engine.landscape.report import budget_range, certified_share
from engine.landscape.report_check import load_claimed, read_report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--report", default="docs/landscapes.json")
    parser.add_argument("--traces", default=None, help="the traces folder (else the setting)")
    args = parser.parse_args()
    report = read_report(args.report)
    print("| trace | estimate: executions, seconds | complete walk | walk / estimate | took |")
    print("|---|---:|---:|---:|---:|")
    for claims in report.traces:
        if certified_share(claims.certified, claims.peak) < 1.0:  # not walked whole
            continue
        ref, _ = load_claimed(claims, report.path, args.traces)  # the trace the walks walked
        start, end = budget_range(claims.peak)  # 0.05-0.60
        entry = claims.raw
        began = time.perf_counter()
        guess = estimate_walk(
            ref,
            start=start,
            end=end,
            policy=report.policy,
            cap=report.cap,
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
    try:
        main()
    except ValueError as exc:  # a bad report, or a trace that is not the one it was made from
        sys.exit(f"estimate_accuracy: {exc}")
