"""The event log of one run (`--events FILE.parquet`): what the runtime did, in order.

One Parquet table, one row per event, `kind` saying which:
- `evict_policy` / `evict_eager`: seq (1-based eviction number), operator, depth, storage,
  size, score (policy evictions), pool_size, pinned (bytes before the eviction), and for
  policy evictions the runner-up: the storage the same scan picks without the victim, and
  its score (null when the pool held only the victim);
- `remat`: operator, storage, depth;
- `operator`: per model operator, max_pinned and max_depth over its allocation checks.
Recording only reads the runtime's state; it never changes a decision.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from engine.sim.trace import Program

if TYPE_CHECKING:
    from engine.sim.state import SimulationState

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
    "runner_up",
    "runner_up_score",
)
_NATIVE_KINDS = ("evict_policy", "evict_eager", "remat")  # engine/sim/_native/events.h's codes


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
        self,
        sim: SimulationState,
        s: int,
        score: float | None,
        by_policy: bool,
        pool_size: int,
        runner_up: tuple[int, float],
    ) -> None:
        self.seq += 1
        runner, runner_score = runner_up
        self._row(
            runner_up=runner if runner >= 0 else None,
            runner_up_score=runner_score if runner >= 0 else None,
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

    def remat(self, sim: SimulationState, s: int) -> None:
        self._row(kind="remat", operator=sim.operators, storage=s, depth=sim.depth)

    def check(self, sim: SimulationState, pinned: int) -> None:
        op = sim.operators
        if pinned > self.op_max_pinned[op]:
            self.op_max_pinned[op] = pinned
        if sim.depth > self.op_max_depth[op]:
            self.op_max_depth[op] = sim.depth

    def load_native(self, columns: dict[str, list]) -> None:
        """Take the event log the C runtime recorded (the same rows, see _native/events.h)."""
        for i, code in enumerate(columns["kind"]):
            kind = _NATIVE_KINDS[code]
            if kind == "remat":
                self._row(
                    kind=kind,
                    operator=columns["operator"][i],
                    storage=columns["storage"][i],
                    depth=columns["depth"][i],
                )
                continue
            runner = columns["runner_up"][i]
            policy = kind == "evict_policy"
            self._row(
                kind=kind,
                seq=columns["seq"][i],
                operator=columns["operator"][i],
                depth=columns["depth"][i],
                storage=columns["storage"][i],
                size=columns["size"][i],
                score=columns["score"][i] if policy else None,
                pool_size=columns["pool_size"][i],
                pinned=columns["pinned"][i],
                runner_up=runner if policy and runner >= 0 else None,
                runner_up_score=columns["runner_up_score"][i] if policy and runner >= 0 else None,
            )
        self.seq = len([k for k in columns["kind"] if k != 2])
        for op, (pinned, depth) in enumerate(
            zip(columns["op_max_pinned"], columns["op_max_depth"], strict=True), start=1
        ):
            self.op_max_pinned[op] = pinned
            self.op_max_depth[op] = depth

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
            "runner_up_score": pa.float64(),
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
