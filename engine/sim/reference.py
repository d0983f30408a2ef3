"""The `--backend simrd` reference: run one point through unmodified simrd.

simrd (uwsampl/dtr-prototype, folder ``simrd/``, commit eff53cc4) is used strictly as a
library: it is imported lazily from ``SIMRD_DIR`` (or ``simrd_dir=``), its own parser builds
the schedule, and its own ``RuntimeV2EagerOptimized`` replays it. What we add is observation
only (engine/sim/reference_probes.py): a subclass whose overrides count and sample and then
hand control back to simrd unchanged, and a budget object that remembers every value simrd
compares it with. No decision of the simulator depends on them (the only deliberate changes
are the what-if ``retain`` set and the wall-clock ``time_limit``, both opt-in).

The result is a record with exactly the fields of :mod:`engine.sim.record`.

The counting rules of the record's fields are in engine/sim/reference_probes.py, with the
observers that apply them.
"""

from __future__ import annotations

import hashlib
import math
import os
import random
import sys
import threading
import time
from pathlib import Path
from typing import Any

from engine.sim.record import ordered
from engine.sim.reference_probes import RecordingBudget, TimeLimitReached, observed_runtime_class

ENGINE_VERSION = "simrd-eff53cc4"

POLICIES: tuple[str, ...] = (
    "DTR",
    "DTREqClass",
    "DTRLocal",
    "MSPS",
    "LRU",
    "LargestStorage",
    "RandomStorage",
)

_HOW_TO = (
    "the simrd backend needs unmodified simrd: set SIMRD_DIR to the simrd/ folder of a "
    "checkout of uwsampl/dtr-prototype (commit eff53cc4), the folder that contains the "
    "`simrd` package, or pass simrd_dir="
)

_STACK_BYTES = 512 * 1024 * 1024
_RECURSION_LIMIT = 1_000_000


class ReferenceUnavailable(RuntimeError):
    """simrd cannot be imported: the reference backend is not available here."""


class ReferenceFailed(RuntimeError):
    """simrd stopped with an error that is not one of the run's outcomes."""


# --------------------------------------------------------------------------- locating simrd


def _simrd_root(simrd_dir: str | None) -> Path:
    where = simrd_dir if simrd_dir is not None else os.environ.get("SIMRD_DIR")
    if not where:
        raise ReferenceUnavailable(_HOW_TO)
    root = Path(where).expanduser().resolve()
    if not (root / "simrd" / "__init__.py").is_file():
        raise ReferenceUnavailable(f"no `simrd` package in {root}: {_HOW_TO}")
    return root


def reference_available(simrd_dir: str | None = None) -> bool:
    """True when unmodified simrd can be found (``simrd_dir`` or env ``SIMRD_DIR``)."""
    try:
        _simrd_root(simrd_dir)
    except ReferenceUnavailable:
        return False
    return True


def _import_simrd(simrd_dir: str | None):
    root = _simrd_root(simrd_dir)
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    try:
        import simrd  # noqa: F401
        import simrd.heuristic
        import simrd.parse
        import simrd.runtime
    except ImportError as exc:  # e.g. attrs missing
        raise ReferenceUnavailable(
            f"importing simrd from {root} failed ({exc}): {_HOW_TO}"
        ) from exc
    loaded = Path(simrd.__file__).resolve().parent.parent
    if loaded != root:
        raise ReferenceUnavailable(
            f"a different simrd is already imported from {loaded}; expected {root}"
        )
    return simrd


# --------------------------------------------------------------------------- running


def _in_big_stack(fn):
    """Run fn() in a thread with a large stack and recursion limit; return or re-raise."""
    box: dict[str, Any] = {}

    def target():
        try:
            box["value"] = fn()
        except BaseException as exc:  # handed to the caller below
            box["error"] = exc

    old_limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(old_limit, _RECURSION_LIMIT))
    try:
        old_stack = threading.stack_size(_STACK_BYTES)
        try:
            worker = threading.Thread(target=target, name="simrd-reference", daemon=True)
            worker.start()
        finally:
            threading.stack_size(old_stack)
        worker.join()
    finally:
        sys.setrecursionlimit(old_limit)
    if "error" in box:
        raise box["error"]
    return box["value"]


_BASELINE_CACHE: dict[tuple[str, str], tuple[Any, int, int]] = {}
_BASELINE_CACHE_SIZE = 4


def _graph_and_baseline(simrd, path: Path, sha: str):
    """simrd's parse of the trace and its unconstrained peak and model compute (cached)."""
    key = (str(simrd.__file__), sha)
    hit = _BASELINE_CACHE.get(key)
    if hit is not None:
        return hit
    with open(path) as f:
        graph = simrd.parse.parse_file(f, start=True)

    def baseline():
        rt = simrd.runtime.RuntimeV2EagerOptimized(
            math.inf, simrd.heuristic.HEURISTICS["DTR"](), stats=False, trace=False
        )
        graph.get_closure()(rt)
        return rt.telemetry.summary["max_memory"], rt.telemetry.summary["model_compute"]

    peak, model_compute = _in_big_stack(baseline)
    value = (graph, int(peak), model_compute)
    if len(_BASELINE_CACHE) >= _BASELINE_CACHE_SIZE:
        _BASELINE_CACHE.pop(next(iter(_BASELINE_CACHE)))
    _BASELINE_CACHE[key] = value
    return value


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def run_reference(trace_path: str, **kwargs: Any) -> dict:
    """Run one point (trace, budget or ratio, policy) through unmodified simrd.

    Keyword arguments are those of :func:`run_reference_observed`. Returns a record with
    exactly the fields of :data:`engine.sim.record.RUN_FIELDS`.
    """
    record, _extra = run_reference_observed(trace_path, **kwargs)
    return record


def run_reference_observed(
    trace_path: str,
    *,
    budget: int | None = None,
    ratio: float | None = None,
    policy: str = "DTR",
    cap: float = 60,
    retain: frozenset[int] = frozenset(),
    seed: int | None = None,
    time_limit: float | None = None,
    simrd_dir: str | None = None,
    name: str | None = None,
    trace_name: str | None = None,
) -> tuple[dict, dict]:
    """Run one point through unmodified simrd; return (record, extra observations).

    Exactly one of ``budget`` (bytes) and ``ratio`` (budget = ``int(peak * ratio)``, as
    simrd's own harness computes it) is given. ``policy`` is one of :data:`POLICIES`;
    ``cap`` the overhead cap (rematerialization compute above ``(cap - 1) x`` model compute
    is thrashing); ``retain`` storage ids never offered for eviction; ``seed`` seeds
    Python's ``random`` for RandomStorage (default 0); ``time_limit`` wall seconds before
    the run stops with status ``timeout``; ``name`` (or ``trace_name``) the record's
    ``trace`` (default: the file's stem).

    The extra observations are diagnostics that are not part of the record: simrd's score
    evaluation count, the number of tensors defined by rebuilds (collateral siblings
    included), the depth at the last time peak pinned was reached, and how many budget
    comparisons were made.
    """
    if policy not in POLICIES:
        raise ValueError(f"unknown simrd policy {policy!r}; choose one of {', '.join(POLICIES)}")
    if (budget is None) == (ratio is None):
        raise ValueError("give exactly one of budget= and ratio=")
    if cap < 1:
        raise ValueError("cap must be at least 1")
    simrd = _import_simrd(simrd_dir)
    heuristic_cls = simrd.heuristic.HEURISTICS[policy]

    path = Path(trace_path)
    sha = _sha256(path)
    graph, peak, model_compute = _graph_and_baseline(simrd, path, sha)

    # a ratio is turned into bytes exactly as simrd's own harness does
    the_budget = int(peak * ratio) if ratio is not None else int(budget or 0)
    if the_budget < 0:
        raise ValueError("budget must be non-negative")
    retained = frozenset(int(i) for i in retain)

    runtime_cls = observed_runtime_class(simrd)
    probe = RecordingBudget(the_budget)
    remat_limit = model_compute * (cap - 1)

    def constrained():
        if policy == "RandomStorage":
            random.seed(0 if seed is None else seed)
        start = time.perf_counter()
        deadline = None if time_limit is None else start + time_limit
        rt = runtime_cls(
            probe,
            heuristic_cls(),
            retain=retained,
            deadline=deadline,
            remat_limit=remat_limit,
            stats=False,
            trace=False,
        )
        callback = graph.get_closure()
        try:
            callback(rt)
            status = "ok"
        except MemoryError:
            status = "oom"
        except simrd.runtime.RematExceededError:
            status = "thrashed"
        except TimeLimitReached:
            status = "timeout"
        except RecursionError as exc:
            raise ReferenceFailed(f"simrd ran out of Python stack: {exc}") from exc
        wall = time.perf_counter() - start
        return rt, status, wall

    rt, status, wall = _in_big_stack(constrained)
    if status == "oom" and rt.obs_failure is None:
        raise ReferenceFailed("simrd raised MemoryError outside its eviction loop")

    summary = rt.telemetry.summary
    remat_compute = summary["remat_compute"]
    record = {
        "trace": name or trace_name or path.stem,
        "trace_sha256": sha,
        "policy": policy,
        "budget": the_budget,
        "ratio": ratio,
        "peak": peak,
        "model_compute": model_compute,
        "status": status,
        "overhead": (model_compute + remat_compute) / model_compute
        if status == "ok" and model_compute
        else None,
        "clock": rt.clock,
        "remat_compute": remat_compute,
        "evictions": rt.obs_evictions,
        "policy_evictions": rt.obs_policy_evictions,
        "rematerializations": rt.obs_remat_calls,
        "operators": rt.obs_operators,
        "max_memory": summary["max_memory"],
        "peak_pinned": rt.obs_peak_pinned if rt.obs_peak_pinned is not None else 0,
        "depth_at_peak_pinned": rt.obs_depth_first_peak
        if rt.obs_depth_first_peak is not None
        else 0,
        "max_nesting_depth": rt.obs_max_depth,
        "failure": rt.obs_failure if status == "oom" else None,
        "same_execution": None if status == "timeout" else probe.interval(),
        "retained": sorted(retained),
        "engine_version": ENGINE_VERSION,
        "wall_s": wall,
    }
    extra = {
        "heuristic_evals": summary["heuristic_eval_count"],
        "remat_tensors": rt.obs_remat_tensors,
        "depth_at_last_peak_pinned": rt.obs_depth_last_peak,
        "budget_comparisons": probe.comparisons,
    }
    return ordered(record), extra
