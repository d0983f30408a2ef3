"""`dtr-landscape bench`: the engine's speed on a fixed point set, side by side with
unmodified simrd in the same run (with `--simrd` and SIMRD_DIR), as a per-point and median
ratio. Times are the constrained run's wall seconds for both (parsing and the unconstrained
baseline are excluded for both). Each engine record is also checked against simrd's (when
run) or against the golden record for that point (when ../shared/golden is present).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
from pathlib import Path

from engine.sim.record import EXACT_FIELDS
from engine.sim.simulate import run_point

# The benchmark points; inceptionv4 0.235 (oom) takes simrd about 12-14 minutes, so
# simrd runs it only with --simrd-slow; its golden record still checks the engine's result.
DEFAULT_POINTS = (
    ("inceptionv4", 0.2343),
    ("inceptionv4", 0.3),
    ("resnet32", 0.101),
    ("resnet32", 0.104),
    ("unet", 0.433),
    ("densenet121", 0.2),
    ("transformer", 0.15),
    ("lstm", 0.3),
    ("unrolled_gan", 0.25),
    ("inceptionv4", 0.235),
)
SLOW_FOR_SIMRD = {("inceptionv4", 0.235)}
GOLDEN = Path(__file__).resolve().parents[3] / "shared" / "golden" / "simrd-golden.jsonl"


def _golden() -> dict[tuple[str, str, float], dict]:
    path = Path(os.environ.get("DTR_LANDSCAPE_GOLDEN", GOLDEN))
    if not path.is_file():
        return {}
    out = {}
    for line in path.read_text().splitlines():
        if line.strip():
            rec = json.loads(line)
            out[(rec["trace"], rec["policy"], rec["ratio"])] = rec
    return out


def _same(ours: dict, theirs: dict) -> bool:
    for name in EXACT_FIELDS:
        a, b = ours.get(name), theirs.get(name)
        if name == "failure" and a is not None and b is not None:
            a = {k: v for k, v in a.items() if k != "over_by"}
            b = {k: v for k, v in b.items() if k != "over_by"}
        if a != b:
            return False
    return True


def _parse_points(items: list[str] | None) -> list[tuple[str, float]]:
    if not items:
        return list(DEFAULT_POINTS)
    points = []
    for item in items:
        trace, _, ratio = item.rpartition(":")
        if not trace:
            raise ValueError(f"bench points look like TRACE:RATIO, got {item!r}")
        points.append((trace, float(ratio)))
    return points


def main(args: argparse.Namespace) -> int:
    from engine.sim.native import backend_description

    # Timings mean nothing without knowing which runtime made them: the first line says.
    print(backend_description(), flush=True)
    points = _parse_points(args.points)
    golden = _golden()
    with_simrd = bool(args.simrd)
    if with_simrd:
        from engine.sim.reference import ReferenceUnavailable, reference_available

        if not reference_available():
            raise ReferenceUnavailable(
                "bench --simrd needs unmodified simrd: set SIMRD_DIR to the simrd/ folder of a "
                "uwsampl/dtr-prototype checkout (commit eff53cc4)"
            )
    header = (
        f"{'trace':<13} {'ratio':>7} {'status':>8} {'engine s':>9} {'simrd s':>9} "
        f"{'ratio':>7}  check"
    )
    print(header)
    print("-" * len(header))
    ratios: list[float] = []
    all_exact = True
    for trace, ratio in points:
        best: dict | None = None
        for _ in range(max(1, args.repeat)):
            record = run_point(trace, ratio=ratio, traces=args.traces)
            if best is None or record["wall_s"] < best["wall_s"]:
                best = record
        assert best is not None
        simrd_s: float | None = None
        source = ""
        check = "-"
        reference = golden.get((trace, "DTR", ratio))
        if with_simrd and ((trace, ratio) not in SLOW_FOR_SIMRD or args.simrd_slow):
            from engine.sim.catalog import resolve
            from engine.sim.reference import run_reference

            ref = resolve(trace, args.traces)
            theirs = run_reference(str(ref.path), name=ref.name, ratio=ratio, policy="DTR")
            simrd_s = theirs["wall_s"]
            reference = theirs
            source = ""
        elif reference is not None:
            simrd_s = reference.get("simrd_wall_s")
            source = " (golden)"
        if reference is not None:
            exact = _same(best, reference)
            all_exact &= exact
            against = "golden" if source else "simrd"
            check = f"exact vs {against}" if exact else "MISMATCH"
        speedup = simrd_s / best["wall_s"] if simrd_s and best["wall_s"] > 0 else None
        if speedup is not None and not source:
            ratios.append(speedup)
        print(
            f"{trace:<13} {ratio:>7} {best['status']:>8} {best['wall_s']:>9.2f} "
            f"{(f'{simrd_s:.2f}' if simrd_s is not None else '-'):>9} "
            f"{(f'{speedup:.1f}x' if speedup else '-'):>7}  {check}{source}"
        )
    if ratios:
        median = statistics.median(ratios)
        print(f"median speed-up over unmodified simrd, measured in this run: {median:.1f}x")
    else:
        print("no simrd timing in this run (use --simrd with SIMRD_DIR); golden times are recorded")
    if args.store:
        from engine.cli.bench_walk import bench_walks
        from engine.landscape.sweep import bench_sweep_throughput

        print()
        for line in bench_sweep_throughput(args.traces):
            print(line)
        for line in bench_walks(args.traces):
            print(line)
    return 0 if all_exact else 1
