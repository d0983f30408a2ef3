"""The exact walk's part of `dtr-landscape bench`: the same walk done three ways in one run,
side by side, with every record checked equal across them.

- replay: one fresh replay per same-execution interval (how walks ran before prefix sharing);
- prefix: each run resumed from the state where it first differs from the previous one;
- prefix+suffix: resumed runs also merge into the previous run's rest where their states
  meet again, and skip ahead over stretches where they would replay it (the default).
Then the whole `landscape` command (store writes included), walks whose runs keep their
trajectories always, by the walk's choice, or never, and a longer walk of a trace with a
large state, where the suffix sharing matters most. Times are wall seconds of the walk
alone (parse and baseline are cached first); the machine's load shows in them, the ratios
between the modes of one run much less.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from engine.sim import native
from engine.sim.native import NativeSimulation
from engine.sim.policies import make_policy
from engine.sim.runtime import RunResult
from engine.sim.simulate import baseline, budget_for, limit_for, load

# (trace, from ratio, to ratio, at most this many executions)
WALKS = (("resnet32", 0.095, 0.110, None), ("unrolled_gan", 0.30, 0.60, 150))
# Bands where every run thrashes up to the cap (90,000-270,000 evictions, each run changing
# 48M-87M memory words), with the trajectory log unlimited and limited. On the TreeLSTM
# a resumed run never rejoins its predecessor; in InceptionV4's band most rejoin it at once
# and take the rest of it over, when the log holds it.
THRASH_WALKS = (("treelstm", 0.106, 3), ("inceptionv4", 0.20, 100))
# Walks whose runs rarely rejoin their predecessor (the TreeLSTM, the LSTM) and one whose runs
# mostly do (the Unrolled GAN), with every run keeping its trajectory, with the walk choosing
# (engine/sim/walk_tracking.py), and with none: (trace, from ratio, executions).
TRACKING_WALKS = (("treelstm", 0.075, 30), ("lstm", 0.22, 16), ("unrolled_gan", 0.22, 300))


def _compared(result: RunResult) -> RunResult:
    """Every field of a run's result but its wall time."""
    return dataclasses.replace(result, wall_s=0.0)


def _walk_modes(
    trace: str, start_ratio: float, end_ratio: float, limit: int | None, traces_dir: Any
) -> list[str]:
    ref, program = load(trace, traces_dir)
    base = baseline(program)
    policy = make_policy("DTR")
    start, end = budget_for(start_ratio, base.peak), budget_for(end_ratio, base.peak)
    remat_limit = limit_for(base, 60)
    timings: dict[str, tuple[int, float]] = {}
    records: dict[str, list[RunResult]] = {}
    stats: dict[str, dict[str, int]] = {}
    for mode, merging in (("prefix+suffix", True), ("prefix", False)):
        walk = native.Walk(program, start, policy, remat_limit=remat_limit, merging=merging)
        began = time.perf_counter()
        found = []
        for step in walk:
            found.append(_compared(step.result))
            hi = step.result.same_execution["hi"]
            if hi is None or hi >= end or (limit is not None and len(found) >= limit):
                break
        timings[mode] = (len(found), time.perf_counter() - began)
        records[mode] = found
        stats[mode] = walk.stats()
    # one fresh replay per interval, at the walk's budget for it
    count = len(records["prefix+suffix"])
    began = time.perf_counter()
    fresh = []
    for record in records["prefix+suffix"]:
        budget = record.budget  # the walk's budget for this execution
        sim = NativeSimulation(program, budget, policy, remat_limit=remat_limit)
        fresh.append(_compared(sim.run()))
    timings["replay"] = (count, time.perf_counter() - began)
    records["replay"] = fresh
    same = records["replay"] == records["prefix"] == records["prefix+suffix"]
    replay_rate = count / timings["replay"][1]
    span = f"{trace} {start_ratio:g}-{end_ratio:g}" + (f" (first {limit})" if limit else "")
    lines = [
        f"exact walk {span} DTR: {count} distinct executions, records equal in all modes: {same}"
    ]
    for mode in ("replay", "prefix", "prefix+suffix"):
        runs, seconds = timings[mode]
        lines.append(
            f"  {mode:<14} {runs:>6} runs {seconds:>8.2f} s {runs / seconds:>9.1f} runs/s "
            f"{runs / seconds / replay_rate:>6.1f}x"
        )
    full = stats["prefix+suffix"]
    lines.append(
        f"  prefix+suffix: {full['merges']} runs merged into their predecessor's rest, "
        f"{full['jumps']} skips over {full['steps_jumped']:,} steps; "
        f"state {full['state_bytes']:,} B"
    )
    return lines


def bench_walks(traces_dir: str | os.PathLike[str] | None) -> list[str]:
    from engine.sim.catalog import TraceNotFound

    lines: list[str] = []
    for trace, a, b, limit in WALKS:
        try:
            lines += _walk_modes(trace, a, b, limit, traces_dir)
        except TraceNotFound:
            lines.append(f"exact walk over {trace}: needs the DTR traces")
    with contextlib.suppress(TraceNotFound):  # (said above already)
        lines += bench_landscape_command(traces_dir)
        lines += bench_tracking(traces_dir)
        lines += bench_thrash_memory(traces_dir)
    return lines


def bench_tracking(traces_dir: str | os.PathLike[str] | None) -> list[str]:
    """TRACKING_WALKS in this process, each mode after the other, records compared."""
    lines: list[str] = []
    for trace, ratio, steps in TRACKING_WALKS:
        ref, program = load(trace, traces_dir)
        base = baseline(program)
        records: dict[str, list[RunResult]] = {}
        rows = []
        for mode in ("always", "auto", "never"):
            walk = native.Walk(
                program,
                budget_for(ratio, base.peak),
                make_policy("DTR"),
                remat_limit=limit_for(base, 60),
                tracking=mode,
            )
            began = time.perf_counter()
            records[mode] = []
            for step in walk:
                records[mode].append(_compared(step.result))
                if len(records[mode]) == steps or step.result.same_execution["hi"] is None:
                    break
            seconds = time.perf_counter() - began
            stats = walk.stats()
            rows.append(
                f"  {mode:<7} {seconds:>7.1f} s ({seconds / len(records[mode]):.3f} s each), "
                f"{stats['untracked_runs']} runs without a trajectory, "
                f"{stats['epochs_started']} trajectories started again, {stats['merges']} merges"
            )
        same = records["always"] == records["auto"] == records["never"]
        lines.append(
            f"exact walk {trace} from {ratio:g}, {len(records['auto'])} executions, "
            f"trajectories kept always / chosen / never, records equal: {same}"
        )
        lines += rows
    return lines


def peak_rss_bytes() -> int:
    """This process's peak resident set since it started its program: VmHWM from
    /proc/self/status. Not getrusage's ru_maxrss, which Linux carries over an exec from the
    process that forked it, so that a walk run in a child of a process holding 1.2 GB reported
    1.2 GB whatever it used itself (`bench` did until 2026-12-06). Elsewhere, ru_maxrss."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def walk_memory(
    trace: str,
    ratio: float,
    steps: int,
    limited: bool,
    checkpoints: bool = True,
    sweep_words: int = native.SWEEP_WORDS,
    incremental: bool = True,
    point_every: int = native.POINT_EVERY,
) -> dict[str, Any]:
    """`steps` executions of a walk from `ratio` up; run in a process of its own (its max RSS
    is the process's high-water mark). `checkpoints=False`: its jumps apply every changed word
    from where they start, as before the runtime kept copies of the state. `sweep_words=1`:
    the neighbourhood searches sweep 64 bases at a time, as before wider labels.
    `incremental=False`: every search from scratch, as before reverse ones were updated in
    place and new storages' forward ones derived. `point_every=1`: a point after every
    computation inside a cascade, as before they were spaced."""
    ref, program = load(trace)
    base = baseline(program)
    start = budget_for(ratio, base.peak)
    walk = native.Walk(
        program,
        start,
        make_policy("DTR"),
        remat_limit=limit_for(base, 60),
        max_log_bytes=None if limited else 0,  # None: the walk's own share of its budget
        max_run_log_bytes=native.MAX_RUN_LOG_BYTES if limited else 0,
        checkpoint_words=-1 if checkpoints else 0,
        sweep_words=sweep_words,
        incremental=incremental,
        point_every=point_every,
    )
    began = time.perf_counter()
    statuses = []
    for step in walk:
        statuses.append(step.result.status)
        if len(statuses) == steps or step.result.same_execution["hi"] is None:
            break
    seconds = time.perf_counter() - began
    stats = walk.stats()
    return {
        "runs": len(statuses),
        "statuses": statuses,
        "seconds": seconds,
        "max_rss": peak_rss_bytes(),
        "unlogged_segments": stats["unlogged_segments"],
        "checkpoint_restores": stats["checkpoint_restores"],
    }


def bench_thrash_memory(traces_dir: str | os.PathLike[str] | None) -> list[str]:
    """THRASH_WALKS with the trajectory log unlimited (how walks ran before the limit),
    limited without copies of the state for jumps, limited with searches swept 64 bases at a
    time, limited with every search from scratch, limited with a point after every
    computation inside cascades, and the default (limited, copies, 512 bases a sweep, reverse
    searches updated in place and forward ones derived, points spaced), each in a fresh
    process: max RSS and seconds, side by side."""
    lines: list[str] = []
    for trace, ratio, steps in THRASH_WALKS:
        lines += _thrash_memory(trace, ratio, steps, traces_dir)
    return lines


def _thrash_memory(
    trace: str, ratio: float, steps: int, traces_dir: str | os.PathLike[str] | None
) -> list[str]:
    load(trace, traces_dir)  # TraceNotFound here, not in the child
    env = dict(os.environ)
    if traces_dir is not None:
        env["DTR_LANDSCAPE_TRACES"] = str(traces_dir)
    lines = [f"exact walk {trace} from {ratio:g}, {steps} executions, each in a fresh process:"]
    wide, spaced = native.SWEEP_WORDS, native.POINT_EVERY
    modes = (
        ("log unlimited", False, True, wide, True, spaced),
        ("no checkpoints", True, False, wide, True, spaced),
        ("64-base sweeps", True, True, 1, True, spaced),
        ("from scratch", True, True, wide, False, spaced),
        ("a point each", True, True, wide, True, 1),
        ("log limited", True, True, wide, True, spaced),
    )
    for label, limited, checkpoints, sweep_words, incremental, point_every in modes:
        code = (
            "import json; from engine.cli.bench_walk import walk_memory; "
            f"print(json.dumps(walk_memory({trace!r}, {ratio!r}, {steps}, {limited}, "
            f"{checkpoints}, {sweep_words}, {incremental}, {point_every})))"
        )
        out = subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
        )
        got = json.loads(out.stdout.strip().splitlines()[-1])
        lines.append(
            f"  {label:<14} {got['runs']} runs ({', '.join(sorted(set(got['statuses'])))}) "
            f"{got['seconds']:>7.1f} s ({got['seconds'] / got['runs']:.2f} s each), "
            f"max RSS {got['max_rss'] / 2**20:>6.0f} MB, "
            f"segments without their words {got['unlogged_segments']:,}, "
            f"jumps from a checkpoint {got['checkpoint_restores']:,}"
        )
    return lines


def bench_landscape_command(traces_dir: str | os.PathLike[str] | None) -> list[str]:
    """The `landscape` command's walk over ResNet-32 0.095-0.110 into a temporary store, in
    this process and on two worker processes (chunks stitched at the seams)."""
    from engine.landscape.store import Store
    from engine.landscape.walk import walk_landscape

    ref, program = load("resnet32", traces_dir)
    peak = baseline(program).peak
    start, end = budget_for(0.095, peak), budget_for(0.110, peak)
    lines = []
    outcomes = []
    for workers in (1, 2):
        with tempfile.TemporaryDirectory() as tmp:
            store = Store.open(Path(tmp) / "bench.duckdb")
            began = time.perf_counter()
            result = walk_landscape(store, ref, start=start, end=end, workers=workers)
            seconds = time.perf_counter() - began
        intervals = result["intervals"]
        outcomes.append([(s["lo"], s["hi"], s["status"]) for s in intervals])
        widths = [s["hi"] - s["lo"] + 1 for s in intervals if s["hi"] is not None]
        runs = result["runs_executed"]
        lines.append(
            f"landscape resnet32 0.095-0.110 DTR, {workers} worker(s), store writes included: "
            f"{runs} runs in {seconds:.1f} s ({runs / seconds:.0f} runs/s), {len(intervals)} "
            f"intervals of {min(widths):,}..{max(widths):,} bytes, coverage "
            f"{result['coverage']:.3f}"
        )
    lines.append(f"  the same intervals with 1 and 2 workers: {outcomes[0] == outcomes[1]}")
    return lines
