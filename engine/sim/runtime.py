"""The DTR runtime in Python: replays a Program under a memory budget, decision for decision as
simrd's RuntimeV2EagerOptimized does (docs/DOMAIN.md: the semantics that decide outcomes).

This is the reference implementation; engine/sim/_native/core.c is the same runtime in C
(engine/sim/native.py), which runs whenever it is built and supports the policy. The tests
hold the two to identical records.

State lives in flat lists indexed by storage id (a storage is named by its first tensor's id)
and by tensor id. Materializations nest without Python recursion: an explicit stack of frames
replaces the recursive rebuild of evicted ancestors, so no recursion limit can end a run.

Instrumentation (pinned bytes, nesting depth, the same-execution interval, event log) only
reads state; it never feeds back into a decision.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from engine.sim.regions import PyRegions
from engine.sim.trace import COMPUTE, GET, PIN, RELEASE, Program

if TYPE_CHECKING:
    from engine.sim.events import EventLog
    from engine.sim.policies import Policy

INF = math.inf


class OutOfMemory(Exception):
    """An allocation could not be satisfied with the evictable pool empty."""


class Thrashed(Exception):
    """Rematerialization compute exceeded (cap - 1) x model compute."""


class TimedOut(Exception):
    """The wall-clock limit stopped the run."""


@dataclass
class RunResult:
    status: str
    budget: int | None
    clock: int
    model_compute: int
    remat_compute: int
    evictions: int
    policy_evictions: int
    rematerializations: int
    operators: int
    max_memory: int
    peak_pinned: int
    depth_at_peak_pinned: int
    max_nesting_depth: int
    failure: dict[str, int] | None
    same_execution: dict[str, int | None]
    heuristic_evals: int
    wall_s: float
    extra: dict[str, Any] = field(default_factory=dict)


class Simulation:
    """One replay of a program under one budget with one policy."""

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

    # -- materialization -----------------------------------------------------------------
    def _enter(self, t: int, remat: bool) -> list[Any]:
        """Start materializing tensor t: touch and lock its parents. Returns the frame."""
        self.depth += 1
        if self.depth > self.max_depth:
            self.max_depth = self.depth
        if remat:
            self.rematerializations += 1
            if self.events is not None:
                self.events.remat(self, self.tensor_storage[t])
        args = self.program.op_args[self.tensor_op[t]]
        storage = self.tensor_storage
        last_access = self.last_access
        clock = self.clock
        for p in args:
            last_access[storage[p]] = clock
        defined = self.defined
        undefined: list[int] = []
        for p in args:
            if defined[p]:
                self._lock(storage[p])
        for p in args:
            if not defined[p]:
                undefined.append(p)
        return [t, remat, undefined, 0, False]

    def materialize(self, t0: int, remat0: bool) -> None:
        stack = [self._enter(t0, remat0)]
        storage = self.tensor_storage
        defined = self.defined
        while stack:
            frame = stack[-1]
            undefined = frame[2]
            i = frame[3]
            if frame[4]:  # returning from the rebuild of undefined[i]
                self._lock(storage[undefined[i]])
                i += 1
                frame[4] = False
            descended = False
            while i < len(undefined):
                p = undefined[i]
                if not defined[p]:  # a sibling's rebuild may have defined it meanwhile
                    frame[3] = i
                    frame[4] = True
                    stack.append(self._enter(p, True))
                    descended = True
                    break
                self._lock(storage[p])
                i += 1
            if descended:
                continue
            t = frame[0]
            op = self.tensor_op[t]
            request = self.program.op_sizes_total[op]
            pinned = self.memory - self.pool_bytes
            if pinned > self.peak_pinned:
                self.peak_pinned = pinned
                self.depth_at_peak_pinned = self.depth
            if self.events is not None:
                self.events.check(self, pinned)
            if self._exceeds(self.memory + request):
                self._free(request)
            self._compute(t, frame[1])
            for p in self.program.op_args[op]:
                self._unlock(storage[p])
            if self.remat_compute > self.remat_limit:
                raise Thrashed
            stack.pop()
            self.depth -= 1

    def _compute(self, t: int, remat: bool) -> None:
        program = self.program
        op = self.tensor_op[t]
        first = program.op_first_tensor[op]
        sizes = program.op_sizes[op]
        n_out = len(sizes)
        defined = self.defined
        material = self.material
        storage = self.tensor_storage
        # Outputs other than t, then t: the order in which new storages join the pool.
        order = [u for u in range(first, first + n_out) if u != t]
        duplicates = [u for u in order if defined[u]]
        rebuilt = [u for u in order if not defined[u]]
        order.append(t)
        new_storages = [storage[u] for u in order if not material[storage[u]]]

        cost = program.op_compute[op]
        self.clock += cost
        self.memory += program.op_sizes_total[op]
        if self.memory > self.max_memory:
            self.max_memory = self.memory
        material[storage[t]] = True
        defined[t] = True
        if remat:
            self.remat_compute += cost
        else:
            self.model_compute += cost
        for u in rebuilt:
            material[storage[u]] = True
            defined[u] = True
        # Outputs that were already resident were computed twice; the copies are dropped.
        for u in duplicates:
            self.memory -= sizes[u - first]
        for s in new_storages:
            if self.ref_int[s] == 0:
                self._make_evictable(s)

        if self.regions is not None:
            self.regions.after_compute(new_storages)
        if self.track_eqclass:
            for s in new_storages:
                node = self.ecn[s]
                assert node is not None
                root = self.ec_root(node)
                self.ec_value[root] -= self.compute[s]
                self.ecn[s] = None

    # -- the model's steps ---------------------------------------------------------------
    def _new_operator(self, op: int) -> int:
        """Create op's output tensors (before materializing them), as the trace defines."""
        program = self.program
        first = program.op_first_tensor[op]
        args = program.op_args[op]
        cost = program.op_compute[op]
        storage = self.tensor_storage
        arg_storages = [storage[a] for a in args]
        regions = self.regions
        for i in range(len(program.op_sizes[op])):
            t = first + i
            s = storage[t]
            self.storage_tensors[s].append(t)
            self.ref_ext[s] += 1
            ops = self.storage_ops[s]
            if ops is None:
                self.storage_ops[s] = {op}
                self.compute[s] = cost
                if self.track_eqclass:
                    self.ecn[s] = self._ec_new(0)
                if regions is not None:
                    regions.set_compute(s, cost)
            elif op not in ops:
                ops.add(op)
                self.compute[s] += cost
                if regions is not None:
                    regions.set_compute(s, self.compute[s])
            for a in arg_storages:
                if a != s:
                    if s not in self.children[a]:
                        self.children[a].append(s)
                        if regions is not None:
                            regions.add_edge(a, s)
                    if a not in self.parents[s]:
                        self.parents[s].append(a)
        return first

    def run(self) -> RunResult:
        program = self.program
        kinds = program.schedule_kind
        args = program.schedule_arg
        storage = self.tensor_storage
        start = time.monotonic()
        if self.time_limit is not None:
            self.deadline = start + self.time_limit
        status = "ok"
        try:
            for step in range(len(kinds)):
                kind = kinds[step]
                x = args[step]
                if kind == COMPUTE:
                    self.operators += 1
                    first = self._new_operator(x)
                    self.materialize(first, False)
                    clock = self.clock
                    for i in range(len(program.op_sizes[x])):
                        self.last_access[storage[first + i]] = clock
                    if self.deadline != INF and time.monotonic() > self.deadline:
                        raise TimedOut
                elif kind == GET:
                    self.ref_ext[storage[x]] += 1
                elif kind == RELEASE:
                    s = storage[x]
                    self.ref_ext[s] -= 1
                    if self.ref_ext[s] == 0 and self.material[s] and not self.pinned[s]:
                        self._evict(s, False)
                elif kind == PIN:
                    if not self.defined[x]:
                        self.materialize(x, True)
                    s = storage[x]
                    if not self.pinned[s]:
                        self._lock(s)
                        self.pinned[s] = True
        except OutOfMemory:
            status = "oom"
        except Thrashed:
            status = "thrashed"
        except TimedOut:
            status = "timeout"
        wall = time.monotonic() - start
        if status == "oom" and self.failure is not None:
            pinned = self.failure["pinned"]
            if pinned > self.peak_pinned:
                self.peak_pinned = pinned
                self.depth_at_peak_pinned = self.failure["depth"]
        hi = None if self.exceeds_min == INF else int(self.exceeds_min) - 1
        return RunResult(
            status=status,
            budget=None if self.budget == INF else int(self.budget),
            clock=self.clock,
            model_compute=self.model_compute,
            remat_compute=self.remat_compute,
            evictions=self.evictions,
            policy_evictions=self.policy_evictions,
            rematerializations=self.rematerializations,
            operators=self.operators,
            max_memory=self.max_memory,
            peak_pinned=max(self.peak_pinned, 0),
            depth_at_peak_pinned=self.depth_at_peak_pinned,
            max_nesting_depth=self.max_depth,
            failure=self.failure,
            same_execution={"lo": self.fits_max, "hi": hi},
            heuristic_evals=self.heuristic_evals,
            wall_s=wall,
        )
