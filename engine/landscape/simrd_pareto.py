"""simrd's pareto output (simrd_experiments/eval/pareto/run.py), read into `runs` rows.

One JSON file per (model, heuristic): `config` (model {name, log}, heuristic, overhead_limit,
runtime, baseline_memory, baseline_compute, ...) and `results`, one per budget ratio, each with
per-trial lists OOM, remat_exceeded, overhead, total_time. Each trial becomes one run: oom if
OOM, thrashed if remat_exceeded, else ok. Like the evidence reader, every entry is checked
before any row is returned, and problems are reported in one line.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from engine.landscape.record_files import (
    Problems,
    RecordFileError,
    TraceInfo,
    canonical_trace_name,
    file_tag,
    name_from_file,
    policy_columns,
    trace_columns,
)


def read_pareto(
    file: str, data: bytes, traces: Mapping[str, TraceInfo], source: str
) -> list[dict[str, Any]]:
    """One row per (budget, trial) of a simrd pareto JSON file."""
    try:
        doc = json.loads(data)
    except UnicodeDecodeError as exc:
        raise RecordFileError(f"{file}: not UTF-8 text (byte {exc.start})") from None
    except json.JSONDecodeError as exc:
        raise RecordFileError(f"{file}: line {exc.lineno}: invalid JSON ({exc.msg})") from None
    problems = Problems(file)

    def get(obj: Any, path: str, kind: Any, expected: str, ok: Any = lambda v: True) -> Any:
        value = obj.get(path.rsplit(".", 1)[-1]) if isinstance(obj, dict) else None
        # JSON's true/false are Python ints: never accept them as numbers
        if isinstance(value, bool) or not isinstance(value, kind) or not ok(value):
            problems.add(path, f"must be {expected}")
            return None
        return value

    config = get(doc, "config", dict, "an object") or {}
    model = get(config, "config.model", dict, "an object") or {}
    model_name = get(model, "config.model.name", str, "a string")
    heuristic = get(config, "config.heuristic", str, "a heuristic name")
    peak = get(config, "config.baseline_memory", int, "a whole number of bytes", _non_negative)
    compute = get(config, "config.baseline_compute", int, "a positive whole number", _positive)
    cap = get(config, "config.overhead_limit", (int, float), "a number > 1", lambda v: v > 1)
    results = get(doc, "results", list, "a list") or []
    problems.check()
    log = model.get("log")
    trace = canonical_trace_name(model_name) or (
        name_from_file(log) if isinstance(log, str) else model_name
    )
    # The stage records simrd's runtime (and options such as no_dealloc): results of other
    # runtimes (RuntimeV1 in the paper's banishing study) are a different experiment.
    stage = str(config.get("runtime") or "") or None
    options = config.get("kwargs")
    if stage and isinstance(options, dict) and options:
        stage += "@" + ",".join(f"{k}={v}" for k, v in sorted(options.items()))
    common = {
        **trace_columns(trace, traces),
        "peak": peak,  # simrd's own baseline, which its budgets came from
        "model_compute": compute,
        **policy_columns(heuristic),
        "cap": float(cap),
        "stage": stage,
        "source": source,
    }
    tag = file_tag(data)
    rows: list[dict[str, Any]] = []
    for i, result in enumerate(results):
        at = f"results[{i}]"
        ratio = get(result, f"{at}.ratio", (int, float), "a positive number", _positive)
        budget = get(result, f"{at}.budget", int, "a whole number of bytes", _non_negative)
        oom = get(result, f"{at}.OOM", list, "a list of true/false", _booleans)
        thrashed = get(result, f"{at}.remat_exceeded", list, "a list of true/false", _booleans)
        overheads = get(result, f"{at}.overhead", list, "a list of numbers >= 0", _numbers)
        times: Any = []
        if isinstance(result, dict) and "total_time" in result:
            times = get(result, f"{at}.total_time", list, "a list of seconds", _numbers)
        if None in (ratio, budget, oom, thrashed, overheads, times):
            continue
        trials = len(oom)
        if len(thrashed) != trials or len(overheads) != trials or len(times) not in (0, trials):
            problems.add(at, "OOM, remat_exceeded, overhead, total_time need one entry a trial")
            continue
        for trial in range(trials):
            status = "oom" if oom[trial] else "thrashed" if thrashed[trial] else "ok"
            # simrd's overhead is clock / model compute, with a clock that starts at 1: recover
            # the clock (exact below 2**51) and report ours, (model + remat) / model compute.
            clock = round(overheads[trial] * compute)
            if status == "ok" and clock <= compute:
                problems.add(f"{at}.overhead[{trial}]", "must be above 1 for a completed trial")
                continue
            rows.append(
                {
                    **common,
                    "run_id": f"pareto:{tag}:{i}:{trial}",
                    "budget": budget,
                    "ratio": float(ratio),
                    "status": status,
                    "clock": clock,
                    "remat_compute": clock - 1 - compute if status == "ok" else None,
                    "overhead": (clock - 1) / compute if status == "ok" else None,
                    "wall_s": float(times[trial]) if times else None,
                    "repeat": trial,
                }
            )
    problems.check()
    if not rows:
        raise RecordFileError(f"{file}: results: no trials (expected results[].OOM entries)")
    return rows


def _positive(value: float) -> bool:
    return value > 0


def _non_negative(value: float) -> bool:
    return value >= 0


def _booleans(values: list[Any]) -> bool:
    return all(isinstance(v, bool) for v in values)


def _numbers(values: list[Any]) -> bool:
    return all(
        isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) and v >= 0
        for v in values
    )
