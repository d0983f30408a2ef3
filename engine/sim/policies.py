"""Eviction policies: a registry where a new policy is one class.

A policy scans the evictable pool in the order storages became evictable and returns the
victim and its score. The scan rule is simrd's: keep the LAST candidate whose score is <= the
best so far, and stop at the first score equal to 0. Scores are Python `int / int` true
divisions (correctly rounded doubles), exactly as simrd computes them, because ties between
equal doubles are real and decide runs.

simrd's heuristics: DTR, DTREqClass, DTRLocal, MSPS, LRU, LargestStorage, RandomStorage.
The paper's variants: NbhdPenalty, TwoPhase, HEStar, CostStale.
"""

from __future__ import annotations

import math
import random
from typing import TYPE_CHECKING, ClassVar

if TYPE_CHECKING:
    from engine.sim.state import SimulationState

INF = math.inf


class PolicyError(ValueError):
    pass


class Policy:
    """Base class. Subclasses set `name`, the neighbourhood features they read, their
    parameters with defaults, and implement `score` (or `choose` for non-scoring rules)."""

    name: ClassVar[str] = ""
    uses_regions: ClassVar[bool] = False  # maintained evicted neighbourhoods (h_DTR's e*)
    uses_eqclass: ClassVar[bool] = False  # union-find classes of evicted storages
    reads_budget: ClassVar[bool] = False  # decisions compare against the budget itself
    # ... and every such comparison goes through SimulationState._exceeds, so it narrows the
    # same-execution interval (without that, a budget-reading policy's intervals are not
    # certified: engine/landscape/walk.py reports them as such).
    records_budget_reads: ClassVar[bool] = False
    defaults: ClassVar[dict[str, float]] = {}

    def __init__(self, **params: float) -> None:
        unknown = set(params) - set(self.defaults)
        if unknown:
            known = ", ".join(sorted(self.defaults)) or "none"
            names = ", ".join(sorted(unknown))
            raise PolicyError(f"policy {self.name} has no parameter {names} (parameters: {known})")
        self.params = {**self.defaults, **params}

    @property
    def spec(self) -> str:
        """The canonical spelling, e.g. `NbhdPenalty@b=0.25`."""
        if not self.params:
            return self.name
        return self.name + "@" + ",".join(f"{k}={_fmt(v)}" for k, v in sorted(self.params.items()))

    def score(self, sim: SimulationState, s: int) -> float:
        raise NotImplementedError

    def choose(self, sim: SimulationState, request: int) -> tuple[int, float]:
        score = self.score
        best = second = INF
        victim = runner_up = -1
        evaluated = 0
        for s in sim.pool:
            evaluated += 1
            cost = score(sim, s)
            if cost <= best:
                second, runner_up = best, victim
                best = cost
                victim = s
            elif cost <= second:
                second, runner_up = cost, s
            if cost == 0:
                break
        sim.heuristic_evals += evaluated
        sim.runner_up = (runner_up, second)
        return victim, best


def _fmt(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(value)


POLICIES: dict[str, type[Policy]] = {}


def register(cls: type[Policy]) -> type[Policy]:
    POLICIES[cls.name] = cls
    return cls


def _e_star_compute(sim: SimulationState, s: int) -> int:
    """c(e*): the storage's own compute and its maintained evicted neighbourhood's."""
    return sim.compute[s] + sim.fwd_compute[s] + sim.rev_compute[s]


def _h_dtr(sim: SimulationState, s: int) -> float:
    """h_DTR = c(e*) / (size * staleness); INF when that product is not positive."""
    denominator = sim.size[s] * (sim.clock - sim.last_access[s])
    return _e_star_compute(sim, s) / denominator if denominator > 0 else INF


def _e_star_size(sim: SimulationState, s: int) -> int:
    """|e*|: how many distinct evicted storages the maintained neighbourhood holds."""
    assert sim.regions is not None
    return sim.regions.e_star_size(s)


@register
class DTR(Policy):
    """h_DTR = c(e*) / (size * staleness), with simrd's maintained neighbourhoods."""

    name = "DTR"
    uses_regions = True

    def choose(self, sim: SimulationState, request: int) -> tuple[int, float]:
        # The hot loop of every run: inlined for speed, same arithmetic as `score`.
        clock = sim.clock
        size = sim.size
        last_access = sim.last_access
        compute = sim.compute
        fwd = sim.fwd_compute
        rev = sim.rev_compute
        best = second = INF
        victim = runner_up = -1
        evaluated = 0
        for s in sim.pool:
            evaluated += 1
            denominator = size[s] * (clock - last_access[s])
            cost = (compute[s] + fwd[s] + rev[s]) / denominator if denominator > 0 else INF
            if cost <= best:
                second, runner_up = best, victim
                best = cost
                victim = s
            elif cost <= second:
                second, runner_up = cost, s
            if cost == 0:
                break
        sim.heuristic_evals += evaluated
        sim.runner_up = (runner_up, second)
        return victim, best

    def score(self, sim: SimulationState, s: int) -> float:
        return _h_dtr(sim, s)


@register
class DTREqClass(Policy):
    """h_DTR with e* approximated by union-find classes of evicted storages."""

    name = "DTREqClass"
    uses_eqclass = True

    def score(self, sim: SimulationState, s: int) -> float:
        roots = {sim.ec_root(sim.ecn[n]) for n in sim.evicted_neighbours(s)}  # type: ignore[arg-type]
        numerator = sim.compute[s] + sum(sim.ec_value[r] for r in roots)
        denominator = sim.size[s] * (sim.clock - sim.last_access[s])
        return numerator / denominator if denominator > 0 else INF


@register
class DTRLocal(Policy):
    """h_DTR without the neighbourhood: own compute / (size * staleness)."""

    name = "DTRLocal"

    def score(self, sim: SimulationState, s: int) -> float:
        denominator = sim.size[s] * (sim.clock - sim.last_access[s])
        return sim.compute[s] / denominator if denominator > 0 else INF


@register
class MSPS(Policy):
    """Compute of the storage and its evicted ancestors per byte."""

    name = "MSPS"
    uses_regions = True

    def score(self, sim: SimulationState, s: int) -> float:
        size = sim.size[s]
        return (sim.compute[s] + sim.rev_compute[s]) / size if size > 0 else INF


@register
class LRU(Policy):
    name = "LRU"

    def score(self, sim: SimulationState, s: int) -> float:
        return sim.last_access[s]


@register
class LargestStorage(Policy):
    name = "LargestStorage"

    def score(self, sim: SimulationState, s: int) -> float:
        size = sim.size[s]
        return 1 / size if size > 0 else INF


@register
class RandomStorage(Policy):
    """A uniformly random pool member, from a generator seeded per run (`seed`): the same
    sequence Python's `random.seed(seed)` gives simrd's global generator."""

    name = "RandomStorage"
    defaults = {"seed": 0}

    def __init__(self, **params: float) -> None:
        super().__init__(**params)
        self.rng = random.Random(int(self.params["seed"]))

    def choose(self, sim: SimulationState, request: int) -> tuple[int, float]:
        sim.heuristic_evals += 1
        k = self.rng.randrange(0, len(sim.pool))
        sim.runner_up = (-1, INF)  # no ranking: every member was as likely
        for i, s in enumerate(sim.pool):
            if i == k:
                return s, INF
        raise AssertionError("unreachable: k < len(pool)")


@register
class NbhdPenalty(Policy):
    """The paper's variant: h_DTR * (1 + b * |e*|)."""

    name = "NbhdPenalty"
    uses_regions = True
    defaults = {"b": 0.25}

    def score(self, sim: SimulationState, s: int) -> float:
        h = _h_dtr(sim, s)
        if h == INF:  # no size or no staleness: INF whatever b and |e*| (INF * 0 is NaN)
            return INF
        return h * (1 + self.params["b"] * _e_star_size(sim, s))


@register
class HEStar(Policy):
    """The paper's variant: the smallest evicted neighbourhood |e*|."""

    name = "HEStar"
    uses_regions = True

    def score(self, sim: SimulationState, s: int) -> float:
        return _e_star_size(sim, s)


def _cost_stale(sim: SimulationState, s: int) -> float:
    staleness = sim.clock - sim.last_access[s]
    return _e_star_compute(sim, s) / staleness if staleness > 0 else INF


@register
class CostStale(Policy):
    """The paper's variant: c(e*) / staleness (h_DTR without the size term)."""

    name = "CostStale"
    uses_regions = True

    def score(self, sim: SimulationState, s: int) -> float:
        return _cost_stale(sim, s)


@register
class TwoPhase(Policy):
    """The paper's variant: keep the candidates whose size covers the current shortfall, or
    else the k largest; among them take the lowest c(e*) / staleness, ties going to the
    larger size, then the smaller id. It reads the budget (the shortfall), so every
    `size >= shortfall` test is a budget comparison recorded for the same-execution interval.
    """

    name = "TwoPhase"
    uses_regions = True
    reads_budget = True
    records_budget_reads = True  # the shortfall tests below call sim._exceeds
    defaults = {"k": 8}

    def choose(self, sim: SimulationState, request: int) -> tuple[int, float]:
        needed = sim.memory + request  # size >= needed - budget  <=>  needed - size <= budget
        size = sim.size
        covering = [s for s in sim.pool if not sim._exceeds(needed - size[s])]
        if not covering:
            k = int(self.params["k"])
            covering = sorted(sim.pool, key=lambda s: (-size[s], s))[:k]
        sim.heuristic_evals += len(covering)
        scored = sorted((_cost_stale(sim, s), -size[s], s) for s in covering)
        best = scored[0]
        sim.runner_up = (scored[1][2], scored[1][0]) if len(scored) > 1 else (-1, INF)
        return best[2], best[0]


def make_policy(spec: str) -> Policy:
    """`NAME` or `NAME@k=v,...` -> a policy instance; unknown names and parameters raise
    PolicyError with what was expected."""
    name, _, rest = spec.strip().partition("@")
    cls = POLICIES.get(name)
    if cls is None:
        raise PolicyError(f"unknown policy {name!r} (known: {', '.join(POLICIES)})")
    params: dict[str, float] = {}
    if rest:
        for item in rest.split(","):
            key, eq, value = item.partition("=")
            if not eq or not key.strip():
                raise PolicyError(f"policy parameter {item!r} must look like name=value")
            try:
                params[key.strip()] = float(value)
            except ValueError:
                raise PolicyError(
                    f"policy parameter {key.strip()} must be a number, got {value!r}"
                ) from None
    return cls(**params)
