"""The event log of one run (`--events FILE.parquet`): what the runtime did, in order.

One Parquet table, one row per event, `kind` saying which:
- `evict_policy` / `evict_eager`: seq (1-based eviction number), operator, depth, storage,
  size, score (policy evictions), pool_size, pinned (bytes before the eviction);
- `remat`: operator, storage, depth;
- `operator`: per model operator, max_pinned and max_depth over its allocation checks.
Recording only reads the runtime's state; it never changes a decision.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from engine.trace import Program

if TYPE_CHECKING:
    from engine.runtime import Simulation

COLUMNS = (
    "kind",
    "seq",
    "operator",
    "depth",
    "storage",
    "size",
    "score",
    "pool_size",
    "pinned",
    "max_pinned",
    "max_depth",
)


class EventLog:
    def __init__(self, program: Program) -> None:
        self.rows: dict[str, list] = {name: [] for name in COLUMNS}
        self.op_max_pinned = [0] * (program.n_ops + 1)
        self.op_max_depth = [0] * (program.n_ops + 1)
        self.seq = 0

    def _row(self, **values: object) -> None:
        for name in COLUMNS:
            self.rows[name].append(values.get(name))

    def eviction(
        self, sim: Simulation, s: int, score: float | None, by_policy: bool, pool_size: int
    ) -> None:
        self.seq += 1
        self._row(
            kind="evict_policy" if by_policy else "evict_eager",
            seq=self.seq,
            operator=sim.operators,
            depth=sim.depth,
            storage=s,
            size=sim.size[s],
            score=score,
            pool_size=pool_size,
            pinned=sim.memory - sim.pool_bytes,
        )

    def remat(self, sim: Simulation, s: int) -> None:
        self._row(kind="remat", operator=sim.operators, storage=s, depth=sim.depth)

    def check(self, sim: Simulation, pinned: int) -> None:
        op = sim.operators
        if pinned > self.op_max_pinned[op]:
            self.op_max_pinned[op] = pinned
        if sim.depth > self.op_max_depth[op]:
            self.op_max_depth[op] = sim.depth

    def finish(self, operators: int) -> None:
        for op in range(1, operators + 1):
            self._row(
                kind="operator",
                operator=op,
                max_pinned=self.op_max_pinned[op],
                max_depth=self.op_max_depth[op],
            )

    def write(self, path: str | os.PathLike[str]) -> None:
        """Write atomically: a temporary file renamed into place."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        types = {
            "kind": pa.string(),
            "score": pa.float64(),
        }
        table = pa.table(
            {
                name: pa.array(values, type=types.get(name, pa.int64()))
                for name, values in self.rows.items()
            }
        )
        target = Path(path)
        tmp = target.with_name(target.name + ".tmp")
        pq.write_table(table, tmp)
        os.replace(tmp, target)
