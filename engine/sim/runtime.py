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

import time
from dataclasses import dataclass, field
from typing import Any

from engine.sim.state import INF, OutOfMemory, SimulationState, Thrashed, TimedOut
from engine.sim.trace import COMPUTE, GET, PIN, RELEASE

# The outcomes and INF are the runtime's vocabulary; callers import them from here.
__all__ = ["INF", "OutOfMemory", "RunResult", "Simulation", "Thrashed", "TimedOut"]


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


class Simulation(SimulationState):
    """One replay of a program under one budget with one policy: the frame machine over
    the bookkeeping of `SimulationState` (engine/sim/state.py)."""

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
