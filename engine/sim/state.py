"""The runtime's bookkeeping (engine/sim/runtime.py is the frame machine that drives it):
per-tensor and per-storage state in flat lists, the evictable pool and its locks, eviction,
DTREqClass's equivalence classes, and the one place the budget is compared.

The outcomes that end a run early are exceptions raised from here and from the frame
machine: `OutOfMemory`, `Thrashed`, `TimedOut`.
"""

from __future__ import annotations

import math
import time
from typing import TYPE_CHECKING

from engine.sim.regions import PyRegions

if TYPE_CHECKING:
    from engine.sim.events import EventLog
    from engine.sim.policies import Policy
    from engine.sim.trace import Program

INF = math.inf


class OutOfMemory(Exception):
    """An allocation could not be satisfied with the evictable pool empty."""


class Thrashed(Exception):
    """Rematerialization compute exceeded (cap - 1) x model compute."""


class TimedOut(Exception):
    """The wall-clock limit stopped the run."""


class SimulationState:
    """The state of one replay of a program under one budget with one policy, and the
    operations on it; `Simulation` (engine/sim/runtime.py) drives them through the trace."""

    def __init__(
        self,
        program: Program,
        budget: int | None,
        policy: Policy,
        *,
        remat_limit: float = INF,
        retain: frozenset[int] = frozenset(),
        time_limit: float | None = None,
        events: EventLog | None = None,
    ) -> None:
        self.program = program
        self.budget: float = INF if budget is None else budget
        self.policy = policy
        self.remat_limit = remat_limit
        self.retain = retain
        self.time_limit = time_limit
        self.events = events
        self.track_regions = budget is not None and policy.uses_regions
        self.track_eqclass = budget is not None and policy.uses_eqclass

        n = program.n_tensors
        # Per tensor.
        self.tensor_storage = [0] * n
        self.tensor_op = [0] * n
        self.tensor_index = [0] * n
        self.defined = [False] * n
        # Per storage (indexed by the storage's root tensor id).
        self.size = [0] * n
        self.material = bytearray(n)  # 1 = resident
        self.ref_int = [0] * n
        self.ref_ext = [0] * n
        self.pinned = bytearray(n)
        self.last_access = [-INF] * n  # simrd's last_access_int: staleness is measured from it
        self.compute = [0] * n  # compute of the distinct operators whose outputs live here
        self.storage_ops: list[set[int] | None] = [None] * n
        self.storage_tensors: list[list[int]] = [[] for _ in range(n)]
        # Storage graph, grown as operators are created: children's and parents' storages.
        self.children: list[list[int]] = [[] for _ in range(n)]
        self.parents: list[list[int]] = [[] for _ in range(n)]
        # Compute of each storage's maintained forward and reverse evicted neighbourhoods.
        self.fwd_compute = [0] * n
        self.rev_compute = [0] * n
        self.regions: PyRegions | None = None
        if self.track_regions:
            self.regions = PyRegions(
                n, self.material, self.pinned, self.fwd_compute, self.rev_compute
            )
        # Equivalence classes of evicted storages (DTREqClass): union-find over nodes.
        self.ecn: list[int | None] = [None] * n
        self.ec_parent: list[int] = []
        self.ec_value: list[int] = []

        for op, first in enumerate(program.op_first_tensor):
            args = program.op_args[op]
            for i, alias in enumerate(program.op_aliases[op]):
                t = first + i
                self.tensor_op[t] = op
                self.tensor_index[t] = i
                s = t if alias == -1 else self.tensor_storage[args[alias]]
                self.tensor_storage[t] = s
                if alias == -1:
                    self.size[s] = program.op_sizes[op][i]

        # The evictable pool, ordered by when each storage became evictable.
        self.pool: dict[int, None] = {}
        self.pool_bytes = 0
        self.memory = 0
        self.clock = 1
        self.model_compute = 0
        self.remat_compute = 0
        self.evictions = 0
        self.policy_evictions = 0
        self.rematerializations = 0
        self.operators = 0
        self.max_memory = 0
        self.peak_pinned = -1  # below any sample: the first check sets it, with its depth
        self.depth_at_peak_pinned = 0
        self.max_depth = 0
        self.depth = 0
        self.heuristic_evals = 0
        # Same-execution interval: largest compared value <= budget, smallest > budget.
        self.fits_max = 0
        self.exceeds_min: float = INF
        self.failure: dict[str, int] | None = None
        self.deadline = INF
        self.runner_up: tuple[int, float] = (-1, INF)  # set by each policy scan, for the event log

    # -- the pool and locks -------------------------------------------------------------
    def _make_evictable(self, s: int) -> None:
        if s not in self.pool and s not in self.retain:
            self.pool[s] = None
            self.pool_bytes += self.size[s]

    def _make_unevictable(self, s: int) -> None:
        if s in self.pool:
            del self.pool[s]
            self.pool_bytes -= self.size[s]

    def _lock(self, s: int) -> None:
        if self.ref_int[s] == 0:
            self._make_unevictable(s)
        self.ref_int[s] += 1

    def _unlock(self, s: int) -> None:
        self.ref_int[s] -= 1
        if self.ref_int[s] == 0:
            self._make_evictable(s)

    # -- eviction -------------------------------------------------------------------------
    def _evict(self, s: int, by_policy: bool, score: float | None = None) -> None:
        if self.events is not None:
            runner_up = self.runner_up if by_policy else (-1, INF)
            self.events.eviction(self, s, score, by_policy, len(self.pool), runner_up)
        self.material[s] = False
        self.memory -= self.size[s]
        self._make_unevictable(s)
        defined = self.defined
        for t in self.storage_tensors[s]:
            defined[t] = False
        self.evictions += 1
        if by_policy:
            self.policy_evictions += 1
        if self.regions is not None:
            self.regions.absorb_evicted(s)
        if self.track_eqclass:
            self._eqclass_evicted(s)

    # -- equivalence classes (DTREqClass) ------------------------------------------------
    def _ec_new(self, value: int) -> int:
        self.ec_parent.append(-1)
        self.ec_value.append(value)
        return len(self.ec_parent) - 1

    def ec_root(self, node: int) -> int:
        parent = self.ec_parent
        root = node
        while parent[root] != -1:
            root = parent[root]
        while parent[node] != -1 and parent[node] != root:  # path compression
            parent[node], node = root, parent[node]
        return root

    def evicted_neighbours(self, s: int) -> set[int]:
        material = self.material
        out = {u for u in self.children[s] if not material[u]}
        out.update(u for u in self.parents[s] if not material[u])
        out.discard(s)
        return out

    def _eqclass_evicted(self, s: int) -> None:
        node = self._ec_new(self.compute[s])
        self.ecn[s] = node
        for n in self.evicted_neighbours(s):
            other = self.ecn[n]
            assert other is not None
            left, right = self.ec_root(other), self.ec_root(node)
            if left != right:
                self.ec_parent[left] = right
                self.ec_value[right] += self.ec_value[left]

    # -- budget checks ---------------------------------------------------------------------
    def _exceeds(self, value: int) -> bool:
        """The one place the budget is read: `used + request > budget`."""
        if value > self.budget:
            if value < self.exceeds_min:
                self.exceeds_min = value
            return True
        if value > self.fits_max:
            self.fits_max = value
        return False

    def _free(self, request: int) -> None:
        pool = self.pool
        policy = self.policy
        while self._exceeds(self.memory + request):
            if not pool:
                pinned = self.memory - self.pool_bytes
                self.failure = {
                    "operator": self.operators,
                    "request": request,
                    "pinned": pinned,
                    "depth": self.depth,
                    "over_by": self.memory + request - int(self.budget),
                }
                raise OutOfMemory
            victim, score = policy.choose(self, request)
            self._evict(victim, True, score)
            if self.deadline != INF and time.monotonic() > self.deadline:
                raise TimedOut
