"""What a full exact walk of a budget range would cost, from a sample of it.

A walk's cost is set by how narrow the same-execution intervals are (executions per byte) and
what each execution costs once it shares its neighbours' work, and both vary by orders of
magnitude along a trace: a few executions per megabyte where runs pass easily, one per kilobyte
in a thrashing failure region. So the range is cut into equal strata and each stratum is
sampled by a short walk (`steps` executions from the stratum's middle, the walk's own prefix and
suffix sharing included): the stratum's executions are its bytes over the sample's mean width,
its seconds those executions times the sample's mean seconds per resumed execution (the
sample's first run is a fresh one, which a walk pays once per chunk). Then the costliest
stratum is halved and both halves sampled, `refine` times, since the cost sits in bands
narrower than a stratum. Nothing is stored;
the numbers are estimates (a stratum is as dense as its sample), meant to say whether a walk
takes minutes or days before it is started.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from engine.landscape.chunks import split
from engine.sim import native
from engine.sim.policies import make_policy
from engine.sim.simulate import baseline, limit_for, load

if TYPE_CHECKING:
    from engine.sim.catalog import TraceRef
    from engine.sim.policies import Policy


@dataclass(frozen=True)
class StratumEstimate:
    lo: int  # the stratum's budgets [lo, hi]
    hi: int
    sampled_from: int  # the sample walk's first budget
    executions_sampled: int
    mean_width: float  # bytes per execution in the sample
    seconds_per_execution: float
    statuses: dict[str, int]
    executions: float  # estimated for the whole stratum
    seconds: float


def estimable(policy: Policy) -> bool:
    """Whether walks of this policy share work in the C runtime, which the samples measure."""
    return native.supports(policy) and not policy.reads_budget


def estimate_walk(
    trace: str | TraceRef,
    *,
    start: int,
    end: int,
    policy: str = "DTR",
    cap: float = 60.0,
    samples: int = 22,
    steps: int = 25,
    refine: int = 0,
    sample_seconds: float | None = None,
    traces: str | os.PathLike[str] | None = None,
    progress: Callable[[StratumEstimate], None] | None = None,
) -> dict[str, Any]:
    """Estimated executions and single-process seconds of walking [start, end] (see above).
    `sample_seconds`: a sample walk also stops past this (after two executions, the first
    fresh, the second resumed): in a thrashing band an execution takes seconds, and 25 of
    them in each of 24 samples took the LSTM's estimate past half an hour."""
    if not 0 <= start < end:
        raise ValueError(f"the range must go upward: from {start} to {end}")
    if sample_seconds is not None and not sample_seconds > 0:
        raise ValueError(f"a sample's seconds must be positive, got {sample_seconds}")
    if samples < 1 or steps < 1 or refine < 0:
        raise ValueError(
            f"samples and steps must be at least 1 and refinements at least 0, got {samples}, "
            f"{steps} and {refine}"
        )
    the_policy = make_policy(policy)
    if not estimable(the_policy):
        raise ValueError(
            f"estimates sample walks of the C runtime, which does not share work for {policy}"
        )
    ref, program = load(trace, traces)
    base = baseline(program)
    limit = limit_for(base, cap)

    def sample(lo: int, hi: int) -> StratumEstimate:
        middle = (lo + hi) // 2
        walk = native.Walk(program, middle, the_policy, remat_limit=limit)
        statuses: dict[str, int] = {}
        first = last = None
        count = 0
        began = time.perf_counter()
        fresh_s = 0.0  # the sample's first run starts from nothing, unlike a walk's runs
        for step in walk:
            count += 1
            result = step.result
            if count == 1:
                fresh_s = time.perf_counter() - began
            statuses[result.status] = statuses.get(result.status, 0) + 1
            first = result.same_execution["lo"] if first is None else first
            last = result.same_execution["hi"]
            if last is None or count >= steps:
                break
            late = sample_seconds is not None and time.perf_counter() - began >= sample_seconds
            if late and count >= 2:
                break
        seconds = time.perf_counter() - began
        assert first is not None
        if last is None:  # the last execution reaches to infinity: it covers the stratum
            width = float(max(hi - first + 1, 1)) / count
        else:
            width = (last - first + 1) / count
        per = (seconds - fresh_s) / (count - 1) if count > 1 else seconds
        executions = max(1.0, (hi - lo + 1) / width)
        stratum = StratumEstimate(
            lo, hi, middle, count, width, per, statuses, executions, executions * per
        )
        if progress is not None:
            progress(stratum)
        return stratum

    strata = [sample(lo, hi) for lo, hi in split(start, end, samples, minimum=1)]
    first_pass = len(strata)
    # The cost sits in narrow bands (runs that thrash before they fail), which a stratum's one
    # sample hits or misses: the costliest stratum is halved and both halves sampled, again
    # and again, `refine` times.
    for _ in range(refine):
        costly = max((s for s in strata if s.hi - s.lo >= 2), key=lambda s: s.seconds, default=None)
        if costly is None:
            break
        middle = (costly.lo + costly.hi) // 2
        strata.remove(costly)
        strata += [sample(costly.lo, middle), sample(middle + 1, costly.hi)]
    strata.sort(key=lambda s: s.lo)
    return {
        "trace": ref.name,
        "policy": the_policy.spec,
        "cap": cap,
        "from_budget": start,
        "to_budget": end,
        "peak": base.peak,
        "samples": samples,
        "steps": steps,
        "sample_seconds": sample_seconds,
        "refined": len(strata) - first_pass,  # each halving adds one stratum
        "executions": sum(s.executions for s in strata),
        "seconds": sum(s.seconds for s in strata),
        "strata": [asdict(s) for s in strata],
    }


def duration(seconds: float) -> str:
    """Seconds as a reader weighs them: under 1 s, 40 s, 12 min, 3.5 h, 2.5 days."""
    if seconds < 0.5:  # what would print as "0 s"
        return "under 1 s"
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    if seconds < 48 * 3600:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} days"


# How far short of the truth these estimates have fallen: the dashboard's estimate (8 strata,
# 8 halvings, 15 s a sample) of 0.05-0.60 against the complete walks of docs/landscapes.json,
# on the five traces walked whole (the README's table). Samples start in the wide intervals
# between dense bands, and see only a band's first, cheapest executions.
SHORTFALL = (
    "complete walks of five traces took 1.3-2.2x the executions and 1.6-10x the seconds "
    "their estimates said"
)


def describe(result: dict[str, Any], workers: int = 1) -> str:
    """An estimate (estimate_walk's result) in one sentence, for the CLI and the dashboard."""
    seconds = result["seconds"]
    limit = f" or {result['sample_seconds']:g} s" if result.get("sample_seconds") else ""
    shared = f", about {duration(seconds / workers)} with {workers} workers" if workers > 1 else ""
    return (
        f"about {result['executions']:,.0f} executions, {duration(seconds)} of one process"
        f"{shared} (sampled in {len(result['strata'])} strata of {result['steps']} "
        f"executions{limit} each; nothing stored); {SHORTFALL}"
    )
