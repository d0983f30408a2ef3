"""Which budget ratios a sweep samples: the paper's three stages (pure functions), and the
plan of a sweep.

- Stage A, the grid: FROM, FROM+STEP, ..., TO (or an explicit list of ratios).
- Stage C, interior samples: N seeded random ratios inside every grid interval, so a hole
  narrower than the grid step still has a chance to be hit, reproducibly for one seed.
- Stage B, refinement: a finer grid strictly inside each interval whose two ends disagree
  (different outcomes, or overheads more than 25% apart).
`plan_sweep` validates a sweep's arguments and turns them into a `SweepSpec`: the stages'
ratios for one trace and its peak, whose hash is the sweep's id.

Ratios are rounded (10 decimals for grids, 6 for random draws) so that the same arguments
always give the same floats: a point's identity includes its budget, floor(ratio * peak), and
float drift (0.1 + 3 * 0.001 = 0.10300000000000001) must not create a different budget.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from engine.landscape.distributed import RunTask
from engine.sim.catalog import TraceRef, resolve
from engine.sim.policies import make_policy
from engine.sim.simulate import DEFAULT_CAP, baseline, budget_for, load

MAX_BUDGETS = 5000
MAX_RATIO = 2.0
OVERHEAD_JUMP = 0.25  # refine where overheads differ by more than this, relative to the smaller
GRID_DECIMALS = 10
INTERIOR_DECIMALS = 6


class SamplingError(ValueError):
    """Budgets a sweep cannot sample. The message is the command line's; `field` (from, to,
    step, ratio), `problem` (number, finite, range, positive, order, count) and `value` say
    what is wrong for a caller that words it its own way (the dashboard's launch form)."""

    def __init__(
        self, message: str, *, field: str, problem: str, value: float | int | None = None
    ) -> None:
        super().__init__(message)
        self.field, self.problem, self.value = field, problem, value


def parse_number(text: str, option: str, field: str = "ratio") -> float:
    """A finite number from text; `option` names it in the message (--grid, --ratios)."""
    try:
        value = float(text)
    except ValueError:
        raise SamplingError(
            f"{option}: expected a number, got {text!r}", field=field, problem="number"
        ) from None
    if not math.isfinite(value):
        raise SamplingError(
            f"{option}: expected a finite number, got {text!r}", field=field, problem="finite"
        )
    return value


def check_ratio(value: float, option: str, field: str = "ratio") -> float:
    if not 0 < value <= MAX_RATIO:
        raise SamplingError(
            f"{option}: ratios must be in (0, {MAX_RATIO:g}], got {value:g}",
            field=field,
            problem="range",
            value=value,
        )
    return value


def check_count(count: int, what: str) -> int:
    if count > MAX_BUDGETS:
        raise SamplingError(
            f"{what} gives {count} budgets; at most {MAX_BUDGETS} per sweep (use a larger step)",
            field="ratio",
            problem="count",
            value=count,
        )
    return count


def check_range(start: float, stop: float, option: str) -> tuple[float, float]:
    """A range of ratios FROM < TO, both in (0, MAX_RATIO] (grids, walks, refined ranges)."""
    check_ratio(start, option, "from")
    check_ratio(stop, option, "to")
    if not start < stop:
        raise SamplingError(
            f"{option}: FROM must be below TO, got {start:g} and {stop:g}",
            field="from",
            problem="order",
        )
    return start, stop


def grid_steps(start: float, stop: float, step: float) -> list[float]:
    """start, start+step, ... up to stop inclusive (when stop is on the grid)."""
    # An integer count, then each ratio from its index: no accumulated float error.
    count = math.floor((stop - start) / step + 1e-9) + 1
    return [round(start + i * step, GRID_DECIMALS) for i in range(count)]


def grid(start: float, stop: float, step: float, option: str = "--grid") -> list[float]:
    """The ratios of the grid FROM:TO:STEP, checked as `sweep --grid` checks them."""
    if not step > 0:
        raise SamplingError(
            f"{option}: STEP must be positive, got {step:g}",
            field="step",
            problem="positive",
            value=step,
        )
    check_range(start, stop, option)
    check_count(
        math.floor((stop - start) / step + 1e-9) + 1, f"{option} {start:g}:{stop:g}:{step:g}"
    )
    return grid_steps(start, stop, step)


def parse_grid(text: str) -> list[float]:
    """`FROM:TO:STEP` -> the grid's ratios."""
    parts = text.split(":")
    if len(parts) != 3:
        raise ValueError(f"--grid: expected FROM:TO:STEP like 0.095:0.110:0.001, got {text!r}")
    start, stop, step = (
        parse_number(p, "--grid", field)
        for p, field in zip(parts, ("from", "to", "step"), strict=True)
    )
    return grid(start, stop, step)


def ratio_set(values: Sequence[float], option: str = "--ratios") -> list[float]:
    """Sorted distinct ratios (rounded as grids are), checked as `sweep --ratios` checks them."""
    ratios = sorted({round(value, GRID_DECIMALS) for value in values})
    for ratio in ratios:
        check_ratio(ratio, option)
    check_count(len(ratios), option)
    return ratios


def parse_ratios(text: str) -> list[float]:
    """`a,b,c` -> sorted distinct ratios."""
    items = [item.strip() for item in text.split(",") if item.strip()]
    if not items:
        raise ValueError(f"--ratios: expected ratios like 0.1,0.2,0.3, got {text!r}")
    return ratio_set([parse_number(item, "--ratios") for item in items])


def spaced(start: float, stop: float, points: int, option: str = "--ratios") -> list[float]:
    """`points` evenly spaced ratios from FROM to TO, both included (a refined range)."""
    check_range(start, stop, option)
    if not 2 <= points <= MAX_BUDGETS:
        raise SamplingError(
            f"{option}: expected 2 to {MAX_BUDGETS} points, got {points}",
            field="points",
            problem="count",
            value=points,
        )
    return ratio_set([start + (stop - start) * i / (points - 1) for i in range(points)], option)


def interior(ratios: Sequence[float], per_interval: int, seed: int) -> list[float]:
    """`per_interval` seeded random ratios strictly inside each interval of sorted `ratios`.

    One generator walks the intervals in order, so the same ratios and seed always give the
    same samples. A draw that rounds onto an end (intervals narrower than 1e-6) is dropped.
    """
    rng = random.Random(seed)
    out: list[float] = []
    for lo, hi in zip(ratios, ratios[1:], strict=False):
        for _ in range(per_interval):
            ratio = round(rng.uniform(lo, hi), INTERIOR_DECIMALS)
            if lo < ratio < hi:
                out.append(ratio)
    return out


@dataclass(frozen=True)
class Sample:
    """One stored outcome at a ratio (the refinement reads these)."""

    ratio: float
    status: str
    overhead: float | None


def differ(a: Sample, b: Sample) -> bool:
    """Do two neighbouring samples disagree enough to look between them?"""
    if a.status != b.status:
        return True
    if a.status == "ok" and a.overhead is not None and b.overhead is not None:
        low, high = sorted((a.overhead, b.overhead))
        return low > 0 and (high - low) / low > OVERHEAD_JUMP
    return False


def refine(samples: Sequence[Sample], step: float) -> list[float]:
    """A `step` grid strictly inside every interval between neighbouring samples that differ.

    Timeouts are set aside first (they are unresolved, so they neither start nor end an
    interval); samples at one ratio (repeats) are one sample.
    """
    by_ratio: dict[float, Sample] = {}
    for sample in sorted(samples, key=lambda s: s.ratio):
        if sample.status != "timeout":
            by_ratio.setdefault(sample.ratio, sample)
    ordered = list(by_ratio.values())
    out: list[float] = []
    for a, b in zip(ordered, ordered[1:], strict=False):
        if not differ(a, b):
            continue
        i = 1
        while (ratio := round(a.ratio + i * step, GRID_DECIMALS)) < b.ratio:
            out.append(ratio)
            i += 1
            check_count(len(out), f"--refine {step:g}")
    return out


@dataclass
class SweepSpec:
    """Everything a sweep samples (its identity) plus how it runs (not its identity)."""

    trace: TraceRef
    sha256: str
    peak: int
    policies: list[str]  # canonical specs
    ratios: list[float]  # the grid (stage A)
    interior: list[float]  # seeded interior samples (stage C)
    refine_step: float | None  # stage B
    repeats: int
    cap: float
    time_limit: float | None = None
    retry_timeouts: bool = False
    args: dict[str, Any] = field(default_factory=dict)

    @property
    def sweep_id(self) -> str:
        identity = {
            "trace_sha256": self.sha256,
            "policies": self.policies,
            "ratios": self.ratios,
            "interior": self.interior,
            "refine": self.refine_step,
            "repeats": self.repeats,
            "cap": self.cap,
        }
        digest = hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()
        return "sweep-" + digest[:16]

    def tasks(self, ratios: Sequence[float], stage: str, policy: str) -> list[RunTask]:
        return [
            RunTask(policy, r, budget_for(r, self.peak), k, stage, self.cap, self.time_limit)
            for r in ratios
            for k in range(self.repeats)
        ]


def plan_sweep(
    trace: str,
    *,
    traces: str | None = None,
    policies: Sequence[str] = ("DTR",),
    grid: str | None = None,
    ratios: str | None = None,
    interior_per_interval: int = 0,
    seed: int | None = None,
    refine_step: float | None = None,
    repeats: int = 1,
    cap: float = DEFAULT_CAP,
    time_limit: float | None = None,
    retry_timeouts: bool = False,
) -> SweepSpec:
    """Validate a sweep's arguments (ValueError with one line on bad input) and plan it."""
    if (grid is None) == (ratios is None):
        raise ValueError("give exactly one of --grid FROM:TO:STEP or --ratios a,b,c")
    samples = parse_grid(grid) if grid is not None else parse_ratios(ratios or "")
    if interior_per_interval < 0:
        raise ValueError(f"--interior: expected a positive count, got {interior_per_interval}")
    if seed is not None and not interior_per_interval:
        raise ValueError("--seed only applies with --interior N")
    count = len(samples) + (len(samples) - 1) * interior_per_interval
    if count > MAX_BUDGETS:  # checked before drawing: N can be anything the user typed
        raise ValueError(
            f"--interior {interior_per_interval} gives {count} budgets; "
            f"at most {MAX_BUDGETS} per sweep"
        )
    inside = interior(samples, interior_per_interval, seed or 0) if interior_per_interval else []
    if refine_step is not None and not refine_step > 0:
        raise ValueError(f"--refine: STEP must be positive, got {refine_step:g}")
    if not 1 <= repeats <= 1000:
        raise ValueError(f"--repeats: expected a count from 1 to 1000, got {repeats}")
    if not cap > 1:
        raise ValueError(f"--cap: expected a number greater than 1, got {cap:g}")
    specs = list(dict.fromkeys(make_policy(p).spec for p in policies))
    ref, program = load(resolve(trace, traces))
    args = {
        "trace": ref.name,
        "path": str(ref.path),
        "policies": specs,
        "grid": grid,
        "ratios": ratios,
        "interior": interior_per_interval,
        "seed": seed,
        "refine": refine_step,
        "repeats": repeats,
        "cap": cap,
        "time_limit": time_limit,
    }
    return SweepSpec(
        ref,
        program.sha256,
        baseline(program).peak,
        specs,
        samples,
        inside,
        refine_step,
        repeats,
        float(cap),
        time_limit,
        retry_timeouts,
        args,
    )
