"""`dtr-landscape check-report`: a published landscape report checked from the traces alone.

`holes --all --json` (the project publishes it as docs/landscapes.json) is computed from a
walk store, and the store stays on the machine that walked: the run ids the report names
cannot be opened anywhere else. Its claims can still be checked anywhere, from the trace:
a hole [first, last] has exact edges when

- the run at first - 1 completes, and its same-execution interval ends at first - 1;
- the run at first fails, and its interval starts at first;
- the run at last fails, and its interval ends at last;
- the run at last + 1 completes, and its interval starts at last + 1.

Four runs per hole, whatever its width. With `--interior` the bytes between are walked again
too, from first - 1 to last + 1 (`judge_interior`): every execution inside must fail, as
many as the report counts, and the chain must meet the ok intervals at both edges.
Before any run, the report is read for what it states of itself (`inconsistencies`): holes
sorted, apart and inside certified stretches, widths, ratios and totals that follow from the
bytes. A file that is not such a report is refused with the field and what was expected.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.landscape.intervals import failing
from engine.sim.catalog import TraceRef

# The four runs a hole's claim rests on, in budget order (first - 1, first, last, last + 1).
SIDES = ("ok below", "first failing", "last failing", "ok above")


class ReportError(ValueError):
    """Not a landscape report; the message names the file, the field and what was expected."""


@dataclass(frozen=True)
class Hole:
    first: int  # first failing byte
    last: int  # last failing byte
    statuses: tuple[str, ...]  # the failing statuses the report saw inside it
    executions: int | None = None  # its failing executions, as the report counts them


@dataclass(frozen=True)
class TraceClaims:
    """What a report states of one trace."""

    index: int  # its place in the report's `traces`
    name: str
    sha256: str
    peak: int
    certified: tuple[tuple[int, int | None], ...]
    holes: tuple[Hole, ...]
    raw: dict[str, Any]  # the report's object, for the derived fields `inconsistencies` checks


@dataclass(frozen=True)
class Report:
    path: str
    policy: str
    cap: float
    traces: tuple[TraceClaims, ...]
    data: dict[str, Any]  # the file's JSON, for what reads more than the claims (summary_rows)


@dataclass(frozen=True)
class Edge:
    """One run a hole's claim rests on."""

    hole: Hole
    side: str  # one of SIDES
    budget: int

    @property
    def fails(self) -> bool:
        return self.side in ("first failing", "last failing")

    def expected(self) -> str:
        outcome = "a failing status" if self.fails else "ok"
        end = "starting" if self.side in ("first failing", "ok above") else "ending"
        return f"{outcome} with a same-execution interval {end} at {self.budget:,}"

    def judge(self, record: dict[str, Any]) -> str | None:
        """None when the run is as the report says, else what it was instead."""
        status = str(record.get("status"))
        same = record.get("same_execution") or {}
        lo, hi = same.get("lo"), same.get("hi")
        if self.fails:
            seen = self.hole.statuses
            right_status = failing(status) and (not seen or status in seen)
        else:
            right_status = status == "ok"
        end = lo if self.side in ("first failing", "ok above") else hi
        if right_status and end == self.budget:
            return None
        shown = f"[{lo:,}, {'...' if hi is None else f'{hi:,}'}]" if lo is not None else "none"
        return f"expected {self.expected()}, got {status} with interval {shown}"


def edges(hole: Hole) -> list[Edge]:
    budgets = (hole.first - 1, hole.first, hole.last, hole.last + 1)
    return [Edge(hole, side, b) for side, b in zip(SIDES, budgets, strict=True)]


def load_claimed(
    claims: TraceClaims, path: str, traces: str | os.PathLike[str] | None
) -> tuple[TraceRef, Any]:
    """The trace a report's entry names, as (ref, program), if it is the very file the report
    was made from (its SHA-256); else ValueError naming the report's entry and both hashes."""
    from engine.sim.simulate import load

    ref, program = load(claims.name, traces)
    if program.sha256 != claims.sha256:
        raise ValueError(
            f"{path}: traces[{claims.index}] ({claims.name}) was made from the trace of "
            f"SHA-256 {claims.sha256}; {ref.path} is {program.sha256}"
        )
    return ref, program


# -- reading -------------------------------------------------------------------------------


def read_report(path: str | os.PathLike[str]) -> Report:
    """The report at `path`, or ReportError naming the file, the field and what was expected."""
    name = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ReportError(f"{name}: cannot read it ({exc.strerror or exc})") from None
    except UnicodeDecodeError as exc:
        raise ReportError(f"{name}: not UTF-8 text (byte {exc.start})") from None
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ReportError(f"{name}: not JSON ({exc})") from None
    top = _Fields(name, "", data)
    traces = tuple(
        _trace(k, _Fields(name, f"traces[{k}]", item)) for k, item in enumerate(top.list("traces"))
    )
    policy = top.text("policy")
    return Report(name, policy, top.number("cap"), traces, data)


def _trace(index: int, f: _Fields) -> TraceClaims:
    name, sha256, peak = f.text("trace"), f.text("trace_sha256"), f.whole("peak")
    f.whole("executions")  # read by the summary (engine/landscape/report.py, summary_rows)
    certified = []
    for k, item in enumerate(f.list("certified")):
        c = f.child(f"certified[{k}]", item)
        certified.append((c.whole("from_budget"), c.whole("to_budget", nullable=True)))
    holes = []
    for k, item in enumerate(f.list("holes")):
        h = f.child(f"holes[{k}]", item)
        statuses = tuple(
            h.child(f"statuses[{j}]", s).value(str, "a status")
            for j, s in enumerate(h.list("statuses"))
        )
        executions = h.whole("intervals", nullable=True) if "intervals" in h.data else None
        holes.append(
            Hole(h.whole("first_fail_byte"), h.whole("last_fail_byte"), statuses, executions)
        )
    return TraceClaims(
        index,
        name,
        sha256,
        peak,
        tuple(certified),
        tuple(holes),
        f.data,
    )


class _Fields:
    """One JSON object of the report and where it is, for errors that say both."""

    def __init__(self, file: str, where: str, data: Any) -> None:
        self.file, self.where, self.data = file, where, data

    def child(self, key: str, data: Any) -> _Fields:
        return _Fields(self.file, f"{self.where}.{key}" if self.where else key, data)

    def _get(self, key: str) -> Any:
        if not isinstance(self.data, dict):
            self._fail("", "a JSON object", self.data)
        if key not in self.data:
            raise ReportError(f"{self.file}: {self._at(key)}: missing (a landscape report has it)")
        return self.data[key]

    def _at(self, key: str) -> str:
        return f"{self.where}.{key}" if self.where and key else (self.where or key or "top level")

    def _fail(self, key: str, expected: str, got: Any) -> None:
        shown = json.dumps(got)
        shown = shown if len(shown) <= 60 else shown[:57] + "..."
        raise ReportError(f"{self.file}: {self._at(key)}: expected {expected}, got {shown}")

    def value(self, kind: type, expected: str) -> Any:
        if not isinstance(self.data, kind) or isinstance(self.data, bool):
            self._fail("", expected, self.data)
        return self.data

    def list(self, key: str) -> list[Any]:
        value = self._get(key)
        if not isinstance(value, list):
            self._fail(key, "a list", value)
        return value

    def text(self, key: str) -> str:
        value = self._get(key)
        if not isinstance(value, str) or not value:
            self._fail(key, "a non-empty string", value)
        return value

    def number(self, key: str) -> float:
        value = self._get(key)
        if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
            self._fail(key, "a positive number", value)
        return float(value)

    def whole(self, key: str, *, nullable: bool = False) -> Any:
        value = self._get(key)
        if value is None and nullable:
            return None
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            self._fail(key, "a whole number of bytes" + (" or null" if nullable else ""), value)
        return value


# -- what the report states of itself ------------------------------------------------------


def inconsistencies(trace: TraceClaims) -> list[str]:
    """Where the report contradicts itself for this trace (no run needed)."""
    problems: list[str] = []
    where = f"traces[{trace.index}] ({trace.name})"
    last_hi: int | None = -2
    for k, (lo, hi) in enumerate(trace.certified):
        if hi is not None and hi < lo:
            problems.append(f"{where}: certified[{k}] ends at {hi:,}, before it starts at {lo:,}")
        if last_hi is None or lo <= last_hi + 1:
            problems.append(f"{where}: certified[{k}] starts at {lo:,}, not after the one before")
        last_hi = hi
    previous: Hole | None = None
    raw_holes = trace.raw.get("holes", [])
    for k, hole in enumerate(trace.holes):
        at = f"{where}: holes[{k}] [{hole.first:,}, {hole.last:,}]"
        if hole.last < hole.first:
            problems.append(f"{at}: ends before it starts")
            continue
        if previous is not None and hole.first <= previous.last + 1:
            problems.append(f"{at}: not after the hole before it, with an ok byte between")
        previous = hole
        if not any(_inside(hole.first - 1, hole.last + 1, c) for c in trace.certified):
            problems.append(f"{at}: not inside one certified stretch with its ok bytes around it")
        if not hole.statuses or not all(failing(s) for s in hole.statuses):
            problems.append(f"{at}: statuses {list(hole.statuses)} are not failing statuses")
        raw = raw_holes[k] if k < len(raw_holes) else {}
        width = hole.last - hole.first + 1
        derived = {
            "width": width,
            "first_fail_ratio": hole.first / trace.peak if trace.peak else None,
            "last_fail_ratio": hole.last / trace.peak if trace.peak else None,
            "width_ratio": width / trace.peak if trace.peak else None,
        }
        for key, value in derived.items():
            if key in raw and raw[key] != value:
                problems.append(f"{at}: {key} is {raw[key]!r}, its bytes give {value!r}")
    total = sum(h.last - h.first + 1 for h in trace.holes)
    stated = trace.raw.get("failing_bytes_in_holes", total)
    if stated != total:
        problems.append(
            f"{where}: failing_bytes_in_holes is {stated!r}, its holes add to {total!r}"
        )
    return problems


def _inside(lo: int, hi: int, stretch: tuple[int, int | None]) -> bool:
    return stretch[0] <= lo and (stretch[1] is None or hi <= stretch[1])


# -- the runs ------------------------------------------------------------------------------


@dataclass
class EdgeResult:
    edge: Edge
    record: dict[str, Any] | None
    problem: str | None  # None: as the report says

    def as_dict(self) -> dict[str, Any]:
        same = (self.record or {}).get("same_execution") or {}
        return {
            "side": self.edge.side,
            "budget": self.edge.budget,
            "expected": self.edge.expected(),
            "status": (self.record or {}).get("status"),
            "same_lo": same.get("lo"),
            "same_hi": same.get("hi"),
            "run_id": (self.record or {}).get("run_id"),
            "agrees": self.problem is None,
            "problem": self.problem,
        }


def judged(
    holes: Iterable[Hole], records: Iterator[tuple[int, dict[str, Any] | None, str | None]]
) -> list[EdgeResult]:
    """Each hole's edges against the records of their budgets: `records` yields (budget,
    record or None, error) in any order, one per distinct budget of `edge_budgets`."""
    by_budget: dict[int, tuple[dict[str, Any] | None, str | None]] = {
        budget: (record, error) for budget, record, error in records
    }
    results = []
    for hole in holes:
        for edge in edges(hole):
            record, error = by_budget.get(edge.budget, (None, "not run"))
            problem = f"the run failed: {error}" if record is None else edge.judge(record)
            results.append(EdgeResult(edge, record, problem))
    return results


def edge_budgets(holes: Sequence[Hole]) -> list[int]:
    """The distinct budgets of the holes' edges, ascending (two holes one ok interval apart
    share one)."""
    return sorted({edge.budget for hole in holes for edge in edges(hole)})


def run_budgets(
    trace: TraceRef,
    sha256: str,
    budgets: Sequence[int],
    *,
    policy: str,
    cap: float,
    backend: str = "engine",
    workers: int = 1,
    scheduler: str | None = None,
) -> Iterator[tuple[int, dict[str, Any] | None, str | None]]:
    """(budget, record or None, error) for each budget, as the runs finish: on the engine (in
    this process, a process pool or Dask, as a sweep runs) or, one after another, on
    unmodified simrd (SIMRD_DIR)."""
    if backend == "simrd":
        from engine.sim.policies import make_policy
        from engine.sim.reference import ReferenceFailed, run_reference

        spec = make_policy(policy)
        for budget in budgets:
            try:
                record = run_reference(
                    str(trace.path),
                    name=trace.name,
                    budget=budget,
                    policy=spec.name,
                    seed=int(spec.params["seed"]) if "seed" in spec.params else None,
                    cap=cap,
                )
            except ReferenceFailed as exc:
                yield budget, None, str(exc)
                continue
            yield budget, record, None
        return
    from engine.landscape.distributed import RunTask, open_executor

    tasks = [RunTask(policy, None, b, 0, "check", cap, None) for b in budgets]
    executor = open_executor(trace, sha256, workers=workers, scheduler=scheduler)
    try:
        for batch in executor.run(tasks):
            for finished in batch:
                yield finished.task.budget, finished.record, finished.error
    finally:
        executor.close()


def judge_interior(hole: Hole, steps: Sequence[dict[str, Any]]) -> str | None:
    """None when the walked intervals of [first - 1, last + 1] (sorted, touching, as
    walk_landscape returns them) are the hole as the report says: ok up to first - 1, failing
    executions covering [first, last] exactly (as many as it counts), ok from last + 1."""

    def covers(step: dict[str, Any], budget: int) -> bool:
        return bool(step["lo"] <= budget and (step["hi"] is None or budget <= step["hi"]))

    def shown(step: dict[str, Any] | None) -> str:
        if step is None:
            return "no execution"
        hi = "..." if step["hi"] is None else f"{step['hi']:,}"
        return f"{step['status']} [{step['lo']:,}, {hi}]"

    below = next((s for s in steps if covers(s, hole.first - 1)), None)
    above = next((s for s in steps if covers(s, hole.last + 1)), None)
    if below is None or below["status"] != "ok" or below["hi"] != hole.first - 1:
        return f"below the hole the walk found {shown(below)}"
    if above is None or above["status"] != "ok" or above["lo"] != hole.last + 1:
        return f"above the hole the walk found {shown(above)}"
    inside = [
        s for s in steps if s["lo"] >= hole.first and s["hi"] is not None and s["hi"] <= hole.last
    ]
    for step in inside:
        if not failing(str(step["status"])):
            return f"inside the hole the walk found {shown(step)}"
    covered = sum(s["hi"] - s["lo"] + 1 for s in inside)
    if covered != hole.last - hole.first + 1:
        return f"the walk covered {covered:,} of the hole's {hole.last - hole.first + 1:,} bytes"
    if hole.executions is not None and len(inside) != hole.executions:
        return f"the walk found {len(inside):,} failing executions, the report {hole.executions:,}"
    return None
