"""What the launch form asks for, checked. Pure functions.

`validate(form, ...)` turns the form's raw values into a job spec (a plain dict stored in the
jobs table) or one message saying what is wrong; nothing is launched on a message. The engine
command lines that do a spec are app/plans.py's.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any

from engine.landscape.sampling import (  # the same parsers and limits as `dtr-landscape sweep`
    MAX_BUDGETS,
    MAX_RATIO,
    SamplingError,
    check_range,
    check_ratio,
    grid,
    parse_number,
    ratio_set,
    spaced,
)

DEFAULT_CAP = 60.0
DEFAULT_REFINE_POINTS = 20
DEFAULT_AUDIT_SAMPLE = 20  # `dtr-landscape audit`'s default
# An audit's JSON (a few hundred bytes an execution) is read back for its answer: at most
# this many executions keep it well under app/jobs.py's OUTPUT_LIMIT.
MAX_AUDIT_SAMPLE = 1000
# An estimate job's strata (and as many halvings of the costliest): 24 sample walks of 25
# executions or ESTIMATE_SAMPLE_S seconds each, at most some minutes on any trace.
ESTIMATE_STRATA = 8
ESTIMATE_SAMPLE_S = 15.0
# Modes of the launch form: value -> label.
MODES: dict[str, str] = {
    "ratio": "one budget (ratio)",
    "bytes": "one budget (bytes)",
    "list": "a list of ratios",
    "grid": "a grid (from, to, step)",
    "refine": "refine a range (from, to, points)",
    "walk": "exact walk over a range",
    "estimate": "estimate an exact walk's cost (nothing stored)",
    "edges": "edge search (whole trace)",
    "published": "the published holes' edges (the report's policy and cap)",
    "audit": "audit stored executions: run them again from scratch",
}
# The form's fields each mode reads (validate below reads no other); the form shows only these.
MODE_FIELDS: dict[str, tuple[str, ...]] = {
    "ratio": ("value", "cap"),
    "bytes": ("value", "cap"),
    "list": ("list", "cap"),
    "grid": ("from", "to", "step", "cap"),
    "refine": ("from", "to", "points", "cap"),
    "walk": ("from", "to", "cap"),
    "estimate": ("from", "to", "cap"),
    "edges": ("cap",),
    "published": (),
    "audit": ("from", "to", "points", "cap"),
}


class LaunchError(ValueError):
    """Bad input: the message is shown next to the form, and nothing is launched."""


# How the form names each field of the engine's checks (engine/landscape/sampling.py).
_LABELS = {"from": "'From'", "to": "'To'", "step": "Step", "ratio": "Ratio", "points": "Points"}


def _reworded(exc: SamplingError, label: str | None = None) -> LaunchError:
    """The engine's verdict on the form's budgets, in the form's words."""
    what = label or _LABELS.get(exc.field, exc.field)
    value = exc.value
    if exc.problem == "range":
        return LaunchError(f"{what} must be in (0, {MAX_RATIO:g}], got {value:g}.")
    if exc.problem == "positive":
        return LaunchError(f"{what} must be positive, got {value:g}.")
    if exc.problem == "order":
        return LaunchError("'From' must be below 'To': a range needs two different ends.")
    if exc.problem == "count" and exc.field == "points":
        return LaunchError(f"Points must be a whole number in [2, {MAX_BUDGETS:,}].")
    if exc.problem == "count":
        return LaunchError(f"That is {value:,} budgets; at most {MAX_BUDGETS:,} at once.")
    return LaunchError(f"{what}: {exc}.")


def _number(text: Any, what: str, field: str = "ratio") -> float:
    """A number typed in the form, parsed by the engine's own parser."""
    raw = "" if text is None else str(text).strip()
    if not raw:
        raise LaunchError(f"{what} is missing.")
    try:
        return parse_number(raw, what, field)
    except SamplingError as exc:
        kind = "a finite number" if exc.problem == "finite" else "a number"
        raise LaunchError(f"{what} must be {kind}, got {raw!r}.") from None


def _ratio(text: Any, what: str = "Ratio", field: str = "ratio") -> float:
    value = _number(text, what, field)
    try:
        return check_ratio(value, what, field)
    except SamplingError as exc:
        raise _reworded(exc, what) from None


def _bytes(text: Any, peak: int | None) -> int:
    raw = "" if text is None else str(text).strip().replace("_", "").replace(",", "")
    if not raw:
        raise LaunchError("Budget in bytes is missing.")
    if not raw.isdigit():
        raise LaunchError(f"Budget in bytes must be a whole number, got {text!r}.")
    value = int(raw)
    if value <= 0:
        raise LaunchError("Budget in bytes must be positive.")
    if peak and value > MAX_RATIO * peak:
        raise LaunchError(f"Budget {value:,} is over {MAX_RATIO:g} x the peak ({peak:,} bytes).")
    return value


def parse_retain(text: Any) -> str:
    """`3131, 932` -> `3131,932`; storage ids are whole numbers."""
    items = [item.strip() for item in str(text or "").split(",") if item.strip()]
    for item in items:
        if not item.isdigit():
            raise LaunchError(f"Storage ids are whole numbers like 3131,932; got {item!r}.")
    return ",".join(str(int(i)) for i in items)


def grid_ratios(start: float, stop: float, step: float) -> list[float]:
    """start, start + step, ... up to stop (included when it falls on the grid): the engine's
    grid (`sweep --grid`), with its checks."""
    try:
        return grid(start, stop, step)
    except SamplingError as exc:
        raise _reworded(exc) from None


def _range(form: Mapping[str, Any]) -> tuple[float, float]:
    start = _ratio(form.get("from"), "'From'", "from")
    stop = _ratio(form.get("to"), "'To'", "to")
    try:
        return check_range(start, stop, "range")
    except SamplingError as exc:
        if exc.problem == "order":
            raise LaunchError(
                f"'From' ({start:g}) must be below 'To' ({stop:g}): a range needs two ends."
            ) from None
        raise _reworded(exc) from None


def _ratios(values: list[float]) -> list[float]:
    try:
        return ratio_set(values)
    except SamplingError as exc:
        raise _reworded(exc) from None


def _policy(text: Any, policies: Collection[str]) -> str:
    from engine.sim.policies import PolicyError, make_policy  # pure: names and parameters

    name = str(text or "").strip()
    if not name:
        raise LaunchError("Choose a policy.")
    if name.partition("@")[0] not in policies:
        raise LaunchError(f"Unknown policy {name!r}; known: {', '.join(sorted(policies))}.")
    try:
        return make_policy(name).spec
    except PolicyError as exc:
        raise LaunchError(f"{exc}.") from None


def validate(
    form: Mapping[str, Any],
    *,
    traces: Collection[str],
    policies: Collection[str],
    peak: int | None = None,
    report: str | None = None,
    report_traces: Collection[str] = (),
) -> tuple[dict[str, Any], str]:
    """The job spec and a one-line label for the form's values, or LaunchError. `traces`: the
    engine's catalog (app/data.py `catalog`), not every trace the store has runs of;
    `report`, `report_traces`: the published report the server shows (app/published.py) and
    its traces, never a path from the form."""
    trace = str(form.get("trace") or "")
    if trace not in traces:  # the engine's catalog: a trace only the store knows cannot run
        raise LaunchError(
            f"Trace {trace!r} is not in the engine's catalog here (set DTR_LANDSCAPE_TRACES "
            "to the folder of its log); nothing was launched."
        )
    mode = str(form.get("mode") or "")
    if mode not in MODES:
        raise LaunchError(f"Unknown launch mode {mode!r}.")
    policy = _policy(form.get("policy"), policies)
    cap = DEFAULT_CAP  # a mode without the field (the report's own cap) never reads its text
    if "cap" in MODE_FIELDS[mode]:
        cap = _number(form.get("cap") or DEFAULT_CAP, "Cap", "cap")
        if not cap > 1:
            raise LaunchError(f"Cap must be greater than 1, got {cap:g}.")
    spec: dict[str, Any] = {"kind": mode, "trace": trace, "policy": policy, "cap": cap}
    if mode == "ratio":
        ratio = _ratio(form.get("value"))
        spec.update(kind="run", ratio=ratio, total=1, retain="")
        label = f"run at ratio {ratio:g}"
    elif mode == "bytes":
        budget = _bytes(form.get("value"), peak)
        spec.update(kind="run", budget=budget, total=1, retain="")
        label = f"run at {budget:,} bytes"
    elif mode == "list":
        items = [x for x in str(form.get("list") or "").replace(";", ",").split(",") if x.strip()]
        if not items:
            raise LaunchError("The list of ratios is empty.")
        ratios = _ratios([_ratio(x) for x in items])
        spec.update(ratios=ratios, total=len(ratios))
        label = f"list of {len(ratios)} ratios"
    elif mode == "grid":
        start, stop = _range(form)
        step = _number(form.get("step"), "Step", "step")
        ratios = grid_ratios(start, stop, step)
        spec.update(grid=[start, stop, step], ratios=ratios, total=len(ratios))
        label = f"grid {start:g}:{stop:g}:{step:g} ({len(ratios)} budgets)"
    elif mode == "refine":
        start, stop = _range(form)
        points = _number(form.get("points") or DEFAULT_REFINE_POINTS, "Points", "points")
        if points != int(points):
            raise LaunchError(f"Points must be a whole number in [2, {MAX_BUDGETS:,}].")
        try:
            ratios = spaced(start, stop, int(points))
        except SamplingError as exc:
            raise _reworded(exc) from None
        spec.update(range=[start, stop], ratios=ratios, total=len(ratios))
        label = f"refine {start:g}..{stop:g} ({len(ratios)} budgets)"
    elif mode == "walk":
        start, stop = _range(form)
        spec.update(range=[start, stop])
        label = f"exact walk {start:g}..{stop:g}"
    elif mode == "estimate":
        from engine.landscape.estimate import estimable
        from engine.sim.policies import make_policy

        if not estimable(make_policy(policy)):
            raise LaunchError(
                f"An estimate samples walks that share their work, which {policy} walks do not "
                "(its walk replays every execution); nothing was launched."
            )
        start, stop = _range(form)
        spec.update(range=[start, stop])
        label = f"estimate of an exact walk {start:g}..{stop:g}"
    elif mode == "audit":
        start, stop = _range(form)
        sample = _number(form.get("points") or DEFAULT_AUDIT_SAMPLE, "Points", "points")
        if sample != int(sample) or not 1 <= sample <= MAX_AUDIT_SAMPLE:
            raise LaunchError(
                "Points (the executions to run again) must be a whole number in "
                f"[1, {MAX_AUDIT_SAMPLE:,}]."
            )
        spec.update(range=[start, stop], sample=int(sample), total=int(sample))
        label = f"audit of {int(sample)} stored executions {start:g}..{stop:g}"
    elif mode == "published":
        if report is None:
            raise LaunchError("No published report is shown here; nothing was launched.")
        if trace not in report_traces:
            raise LaunchError(
                f"The published report ({report}) has no trace {trace!r}; nothing was launched."
            )
        spec.update(report=report)
        # the report's own policy and cap, whatever the form says
        return spec, f"the published holes' edges of {trace} ({Path(report).name})"
    else:  # edges: the engine's edge search covers the whole trace
        label = "edge search"
    return spec, f"{label}, {policy}, cap {cap:g}"
