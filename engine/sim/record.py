"""The run record: the one declaration of what every run reports.

The CLI prints these fields as one JSON object; the reference backend (simrd) and the
store read the same declaration, so a field added here reaches all of them.
"""

from __future__ import annotations

from typing import Any

# (name, meaning) in output order.
RUN_FIELDS: tuple[tuple[str, str], ...] = (
    ("trace", "short trace name"),
    ("trace_sha256", "SHA-256 of the trace file: its identity"),
    ("policy", "eviction policy spec, e.g. DTR or NbhdPenalty@b=0.25"),
    ("budget", "memory budget in bytes"),
    ("ratio", "budget ratio (budget = floor(ratio * peak)); null when given in bytes"),
    ("peak", "unconstrained peak memory (infinite budget, same runtime)"),
    ("model_compute", "total compute of the model's operators"),
    ("status", "ok | oom | thrashed | timeout"),
    ("overhead", "(model + rematerialization compute) / model compute, for ok runs"),
    ("clock", "1 + compute of every operator executed"),
    ("remat_compute", "compute spent rematerializing"),
    ("evictions", "every storage freed, by the policy or eagerly"),
    ("policy_evictions", "storages the policy chose under memory pressure"),
    ("rematerializations", "rebuilds of tensors that are not a first computation"),
    ("operators", "model operators started, constants included"),
    ("max_memory", "largest memory in use at any point"),
    ("peak_pinned", "max pinned bytes over every allocation check"),
    ("depth_at_peak_pinned", "nesting depth where peak pinned was first reached"),
    ("max_nesting_depth", "deepest nesting of materializations"),
    ("failure", "{operator, request, pinned, depth, over_by} for oom runs, else null"),
    ("same_execution", "{lo, hi}: every budget in [lo, hi] gives this identical execution"),
    ("retained", "storage ids never offered for eviction (what-if)"),
    ("engine_version", "version of the engine that produced the record"),
    ("wall_s", "wall-clock seconds of the constrained run"),
)

FIELD_NAMES: tuple[str, ...] = tuple(name for name, _ in RUN_FIELDS)

# Fields that must equal simrd's exactly (the golden and differential comparisons).
EXACT_FIELDS: tuple[str, ...] = (
    "status",
    "budget",
    "peak",
    "model_compute",
    "clock",
    "remat_compute",
    "evictions",
    "rematerializations",
    "operators",
    "max_memory",
    "peak_pinned",
    "depth_at_peak_pinned",
    "max_nesting_depth",
    "failure",
    "same_execution",
)

STATUSES: tuple[str, ...] = ("ok", "oom", "thrashed", "timeout")


def ordered(record: dict[str, Any]) -> dict[str, Any]:
    """The record with its fields in declaration order (missing ones as null)."""
    return {name: record.get(name) for name in FIELD_NAMES}
