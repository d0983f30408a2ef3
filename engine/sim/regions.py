"""Maintained evicted neighbourhoods (h_DTR's e*), as simrd maintains them.

For every storage we keep a forward (children direction) and a reverse (parents direction)
neighbourhood: the interior (evicted storages reached through evicted storages), the frontier
(resident storages bordering it, the storage itself excluded) and the compute of the interior.

simrd maintains them incrementally, and the maintained values are not always what a fresh
search finds (docs/DOMAIN.md), so exactness means replaying the same maintenance:
- after a computation makes storages resident, their neighbourhoods are searched afresh,
  and so are those of the storages on their frontiers (forward ones for the reverse
  frontier, reverse ones for the forward frontier);
- after an eviction, the evicted storage's neighbourhoods are folded into those of the
  storages on its frontiers (`absorb`), then cleared.
Pinned storages are skipped: a pinned storage is never scored nor evicted again, so its
neighbourhood is never read (this changes no decision).

`PyRegions` is the reference implementation, used by the Python runtime; the C runtime
(engine/sim/_native/regions.h) does the same over bitsets, and the tests hold them equal.
"""

from __future__ import annotations


class NeighbourhoodInconsistent(RuntimeError):
    """A maintained frontier lacks the storage being absorbed: simrd stops on an assertion."""


class PyRegions:
    def __init__(
        self,
        n: int,
        material: bytearray,
        pinned: bytearray,
        fwd_compute: list[int],
        rev_compute: list[int],
    ) -> None:
        self.material = material
        self.pinned = pinned
        self.fwd_compute = fwd_compute
        self.rev_compute = rev_compute
        self.compute = [0] * n
        self.children: list[list[int]] = [[] for _ in range(n)]
        self.parents: list[list[int]] = [[] for _ in range(n)]
        self.fwd_interior: list[set[int]] = [set() for _ in range(n)]
        self.fwd_frontier: list[set[int]] = [set() for _ in range(n)]
        self.rev_interior: list[set[int]] = [set() for _ in range(n)]
        self.rev_frontier: list[set[int]] = [set() for _ in range(n)]

    def add_edge(self, parent: int, child: int) -> None:
        if child not in self.children[parent]:
            self.children[parent].append(child)
        if parent not in self.parents[child]:
            self.parents[child].append(parent)

    def set_compute(self, s: int, value: int) -> None:
        self.compute[s] = value

    def _search(self, base: int, forward: bool) -> None:
        adjacency = self.children if forward else self.parents
        material = self.material
        compute = self.compute
        interior: set[int] = set()
        frontier: set[int] = set()
        total = 0
        stack = [base]
        while stack:
            for u in adjacency[stack.pop()]:
                if material[u]:
                    if u != base:
                        frontier.add(u)
                elif u not in interior:
                    total += compute[u]
                    interior.add(u)
                    stack.append(u)
        if forward:
            self.fwd_interior[base], self.fwd_frontier[base] = interior, frontier
            self.fwd_compute[base] = total
        else:
            self.rev_interior[base], self.rev_frontier[base] = interior, frontier
            self.rev_compute[base] = total

    def after_compute(self, storages: list[int]) -> None:
        affected_fwd: set[int] = set()
        affected_rev: set[int] = set()
        for s in storages:
            self._search(s, True)
            self._search(s, False)
            affected_fwd |= self.rev_frontier[s]
            affected_rev |= self.fwd_frontier[s]
        pinned = self.pinned
        for s in affected_fwd:
            if not pinned[s]:
                self._search(s, True)
        for s in affected_rev:
            if not pinned[s]:
                self._search(s, False)

    def _absorb(self, s: int, forward: bool) -> None:
        if forward:
            drivers, interiors, frontiers, sums = (
                self.rev_frontier[s],
                self.fwd_interior,
                self.fwd_frontier,
                self.fwd_compute,
            )
        else:
            drivers, interiors, frontiers, sums = (
                self.fwd_frontier[s],
                self.rev_interior,
                self.rev_frontier,
                self.rev_compute,
            )
        compute = self.compute
        for p in drivers:
            if self.pinned[p]:
                continue
            front = frontiers[p]
            if s not in front:
                raise NeighbourhoodInconsistent(
                    f"maintained neighbourhood of storage {p} lacks evicted storage {s} "
                    "on its frontier (simrd stops on an assertion here)"
                )
            front.remove(s)
            front |= frontiers[s]
            interior = interiors[p]
            diff = interiors[s] - interior
            diff.add(s)
            sums[p] += sum([compute[x] for x in diff])
            interior |= diff

    def absorb_evicted(self, s: int) -> None:
        self._absorb(s, True)
        self._absorb(s, False)
        self.fwd_interior[s] = set()
        self.fwd_frontier[s] = set()
        self.rev_interior[s] = set()
        self.rev_frontier[s] = set()
        self.fwd_compute[s] = 0
        self.rev_compute[s] = 0

    def e_star_size(self, s: int) -> int:
        return len(self.fwd_interior[s] | self.rev_interior[s])

    def region(self, s: int, forward: bool) -> tuple[set[int], set[int], int]:
        if forward:
            return set(self.fwd_interior[s]), set(self.fwd_frontier[s]), self.fwd_compute[s]
        return set(self.rev_interior[s]), set(self.rev_frontier[s]), self.rev_compute[s]
