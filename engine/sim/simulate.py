"""Running one point: a trace, a budget (bytes or ratio of the peak) and a policy, in, one run
record (engine/sim/record.py) out. Shared by the CLI, the benchmark and the tests."""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path

from engine import __version__
from engine.sim.cache import load_baseline, load_program, store_baseline
from engine.sim.catalog import TraceRef, resolve
from engine.sim.events import EventLog
from engine.sim.native import NativeSimulation
from engine.sim.native import supports as native_supports
from engine.sim.policies import make_policy
from engine.sim.record import ordered
from engine.sim.runtime import RunResult, Simulation
from engine.sim.trace import Program

DEFAULT_CAP = 60


@dataclass(frozen=True)
class Baseline:
    """The unconstrained run: infinite budget, same runtime."""

    peak: int
    model_compute: int


def baseline(program: Program) -> Baseline:
    cached = load_baseline(program.sha256) if program.sha256 else None
    if cached is not None:
        return Baseline(cached["peak"], cached["model_compute"])
    result = Simulation(program, None, make_policy("DTR")).run()
    if result.status != "ok":  # an infinite budget cannot fail
        raise RuntimeError(f"unconstrained replay of {program.name} ended {result.status}")
    base = Baseline(result.max_memory, result.model_compute)
    if program.sha256:
        store_baseline(program.sha256, {"peak": base.peak, "model_compute": base.model_compute})
    return base


def budget_for(ratio: float, peak: int) -> int:
    """floor(ratio * peak), computed as simrd's evaluation scripts do (float product)."""
    if not (isinstance(ratio, float | int) and math.isfinite(ratio) and ratio > 0):
        raise ValueError(f"ratio must be a positive number, got {ratio!r}")
    return int(ratio * peak)


def limit_for(base: Baseline, cap: float) -> float:
    """simrd's thrash limit: model compute x (cap - 1), an int when cap is integral."""
    factor = int(cap) - 1 if float(cap).is_integer() else cap - 1
    return base.model_compute * factor


def parse_retain(text: str) -> frozenset[int]:
    """`3131,932` -> {3131, 932}; storage ids are simrd's (the id of the first tensor)."""
    ids: set[int] = set()
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        if not item.isdigit():
            raise ValueError(f"--retain expects storage ids like 3131,932, got {item!r}")
        ids.add(int(item))
    return frozenset(ids)


def load(
    trace: str | TraceRef, traces: str | os.PathLike[str] | None = None
) -> tuple[TraceRef, Program]:
    ref = trace if isinstance(trace, TraceRef) else resolve(trace, traces)
    return ref, load_program(ref.path, ref.name)


def run_point(
    trace: str | TraceRef,
    *,
    budget: int | None = None,
    ratio: float | None = None,
    policy: str = "DTR",
    cap: float = DEFAULT_CAP,
    retain: frozenset[int] = frozenset(),
    time_limit: float | None = None,
    events: str | os.PathLike[str] | None = None,
    traces: str | os.PathLike[str] | None = None,
    native: bool = True,
) -> dict:
    """Replay one point and return its run record (fields in declaration order). `native`:
    run in C when the extension is built and implements the policy (identical records)."""
    if (budget is None) == (ratio is None):
        raise ValueError("give exactly one of a budget in bytes or a ratio")
    if budget is not None and budget < 0:
        raise ValueError(f"budget must be a non-negative number of bytes, got {budget}")
    if not cap > 1:
        raise ValueError(f"cap must be greater than 1, got {cap}")
    if time_limit is not None and not time_limit > 0:
        raise ValueError(f"time limit must be positive, got {time_limit}")
    the_policy = make_policy(policy)
    ref, program = load(trace, traces)
    base = baseline(program)
    if ratio is not None:
        budget = budget_for(ratio, base.peak)
    assert budget is not None
    unknown = sorted(s for s in retain if not _is_storage(program, s))
    if unknown:
        raise ValueError(
            f"--retain: {', '.join(map(str, unknown))} not a storage id of {ref.name} "
            f"(storage ids are tensor ids 0..{program.n_tensors - 1} of non-alias outputs)"
        )
    log = EventLog(program) if events is not None else None
    runtime = NativeSimulation if native and native_supports(the_policy) else Simulation
    sim = runtime(
        program,
        budget,
        the_policy,
        remat_limit=limit_for(base, cap),
        retain=retain,
        time_limit=time_limit,
        events=log,
    )
    result = sim.run()
    if log is not None:
        log.finish(result.operators)
        log.write(Path(events))  # type: ignore[arg-type]
    return make_record(ref, program, base, result, the_policy.spec, ratio, retain)


def _is_storage(program: Program, s: int) -> bool:
    if not 0 <= s < program.n_tensors:
        return False
    # binary search for the operator whose outputs include tensor s
    lo, hi = 0, program.n_ops - 1
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if program.op_first_tensor[mid] <= s:
            lo = mid
        else:
            hi = mid - 1
    return program.op_aliases[lo][s - program.op_first_tensor[lo]] == -1


def make_record(
    ref: TraceRef,
    program: Program,
    base: Baseline,
    result: RunResult,
    policy: str,
    ratio: float | None,
    retain: frozenset[int],
) -> dict:
    overhead = None
    if result.status == "ok" and result.model_compute:
        overhead = (result.model_compute + result.remat_compute) / result.model_compute
    return ordered(
        {
            "trace": ref.name,
            "trace_sha256": program.sha256,
            "policy": policy,
            "budget": result.budget,
            "ratio": ratio,
            "peak": base.peak,
            "model_compute": base.model_compute,
            "status": result.status,
            "overhead": overhead,
            "clock": result.clock,
            "remat_compute": result.remat_compute,
            "evictions": result.evictions,
            "policy_evictions": result.policy_evictions,
            "rematerializations": result.rematerializations,
            "operators": result.operators,
            "max_memory": result.max_memory,
            "peak_pinned": result.peak_pinned,
            "depth_at_peak_pinned": result.depth_at_peak_pinned,
            "max_nesting_depth": result.max_nesting_depth,
            "failure": result.failure,
            "same_execution": result.same_execution,
            "retained": sorted(retain),
            "engine_version": __version__,
            "wall_s": round(result.wall_s, 4),
        }
    )
