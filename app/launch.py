"""What the launch form asks for, checked, and the engine commands that do it. Pure functions.

`validate(form, ...)` turns the form's raw values into a job spec (a plain dict stored in the
jobs table) or one message saying what is wrong; nothing is launched on a message.
`plan(spec, ...)` turns a spec into the engine command lines the runner starts: a sweep,
walk or edge search is one engine command that stores its own runs; single runs (and lists
or grids when the engine has no `sweep` yet) are `run` commands whose JSON records the runner
stores.
"""

from __future__ import annotations

import hashlib
import re
import sys
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.landscape.ids import check_run_id, inside
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


# -- planning: spec -> engine command lines ---------------------------------------------------
class PlanError(RuntimeError):
    pass


@dataclass(frozen=True)
class Step:
    """One engine subprocess. `stores`: the runner stores the JSON record it prints (a `run`);
    otherwise the engine command stores its runs itself (--db)."""

    argv: list[str]
    current: str
    stores: bool


@dataclass(frozen=True)
class Plan:
    steps: list[Step] = field(default_factory=list)
    total: int | None = None
    # events jobs: where the log goes (events/<run_id>.parquet, where the run page looks)
    events_path: str | None = None


def engine(*args: str) -> list[str]:
    return [sys.executable, "-m", "engine.cli.main", *args]


def _run_argv(spec: Mapping[str, Any], *, ratio: float | None = None) -> list[str]:
    budget = ["--ratio", repr(ratio)] if ratio is not None else ["--budget", str(spec["budget"])]
    argv = engine("run", spec["trace"], *budget, "--policy", spec["policy"])
    argv += ["--cap", f"{float(spec['cap']):g}"]
    if spec.get("retain"):
        argv += ["--retain", str(spec["retain"])]
    return argv


def plan(
    spec: Mapping[str, Any],
    *,
    db: Path,
    commands: Collection[str],
    workers: int = 2,
    events_dir: Path | None = None,
) -> Plan:
    """The engine command lines for a job. `commands`: the engine CLI's subcommands."""
    kind = spec["kind"]
    trace, policy, cap = spec["trace"], spec["policy"], f"{float(spec['cap']):g}"
    if kind == "run":
        ratio = spec.get("ratio")
        argv = _run_argv(spec, ratio=ratio)
        current = f"ratio {ratio:g}" if ratio is not None else f"{spec['budget']:,} B"
        return Plan([Step(argv, current, stores=True)], total=1)
    if kind == "events":
        try:  # the run id names the file: it must be one, and stay in the folder
            name = f"{check_run_id(spec['run_id'])}.parquet"
            target = inside(events_dir or db.parent / "events", name)
        except ValueError as exc:
            raise PlanError(f"event log of run {spec['run_id']!r}: {exc}") from None
        argv = _run_argv(spec) + ["--events", str(target)]
        return Plan(
            [Step(argv, f"{spec['budget']:,} B", stores=False)], total=1, events_path=str(target)
        )
    if kind == "diverge":
        # the compare page's analysis: engine/cli/diverge.py records the missing event logs
        out = compare_file(db, spec["a"], spec["b"])
        argv = engine("diverge", "--runs", spec["a"], spec["b"], "--db", str(db))
        argv += ["--events-dir", str(events_dir or db.parent / "events"), "--out", str(out)]
        return Plan([Step(argv, "", stores=False)], total=spec.get("total"))
    if kind in ("list", "grid", "refine"):
        ratios: list[float] = list(spec["ratios"])
        if "sweep" in commands:
            if kind == "grid":
                start, stop, step = spec["grid"]
                budgets = ["--grid", f"{start!r}:{stop!r}:{step!r}"]
            else:
                budgets = ["--ratios", ",".join(repr(r) for r in ratios)]
            argv = engine("sweep", trace, *budgets, "--policy", policy, "--cap", cap)
            argv += ["--workers", str(workers), "--db", str(db)]
            return Plan([Step(argv, "", stores=False)], total=len(ratios))
        steps = [Step(_run_argv(spec, ratio=r), f"ratio {r:g}", stores=True) for r in ratios]
        return Plan(steps, total=len(ratios))
    if kind == "walk":
        if "landscape" not in commands:
            raise PlanError("the engine has no `landscape` command (exact walks) yet")
        start, stop = spec["range"]
        argv = engine("landscape", trace, "--from", repr(start), "--to", repr(stop))
        # chunks of the range on `workers` processes, as a sweep's points are
        argv += ["--policy", policy, "--cap", cap, "--workers", str(workers)]
        argv += ["--db", str(db), "--json"]
        return Plan([Step(argv, "", stores=False)])
    if kind == "estimate":
        # short sample walks in strata (engine/landscape/estimate.py); the JSON it prints is
        # the job's output, which the jobs panel reads back (app/jobs.py job_answer)
        start, stop = spec["range"]
        argv = engine("landscape", trace, "--from", repr(start), "--to", repr(stop))
        argv += ["--policy", policy, "--cap", cap, "--estimate", str(ESTIMATE_STRATA)]
        argv += ["--estimate-seconds", f"{ESTIMATE_SAMPLE_S:g}", "--json"]
        return Plan([Step(argv, "", stores=False)])
    if kind == "audit":
        # stored executions drawn and run again (engine/landscape/audit.py); its JSON is the
        # job's output, read back as one sentence (app/jobs.py job_answer)
        start, stop = spec["range"]
        argv = engine("audit", trace, "--from", repr(start), "--to", repr(stop))
        argv += ["--sample", str(spec["sample"]), "--policy", policy, "--cap", cap]
        argv += ["--workers", str(workers), "--db", str(db), "--json"]
        return Plan([Step(argv, "", stores=False)], total=spec["sample"])
    if kind == "published":
        argv = engine("check-report", spec["report"], "--trace", trace)
        argv += ["--workers", str(workers), "--db", str(db), "--json"]
        return Plan([Step(argv, "", stores=False)])
    if kind == "edges":
        if "edges" not in commands:
            raise PlanError("the engine has no `edges` command (edge search) yet")
        argv = engine("edges", trace, "--policy", policy, "--cap", cap, "--db", str(db), "--json")
        return Plan([Step(argv, "", stores=False)])
    raise PlanError(f"unknown job kind {kind!r}")


COMPARE_DIR = "compare"


def compare_file(db: Path, run_a: str, run_b: str) -> Path:
    """Where the compare page's analysis of (a, b) is cached: compare/<a>__<b>.json beside
    the store. Ids that are not plain file names are hashed."""

    def safe(run_id: str) -> str:
        # no underscores: "__" then separates the two ids unambiguously
        if re.fullmatch(r"[A-Za-z0-9.-]{1,64}", run_id) and not run_id.startswith("."):
            return run_id
        return hashlib.sha256(run_id.encode()).hexdigest()[:32]

    return db.parent / COMPARE_DIR / f"{safe(run_a)}__{safe(run_b)}.json"


def seed_specs(traces: Mapping[str, str]) -> list[tuple[dict[str, Any], str]]:
    """The jobs that seed an empty store: a quick grid of each trace (name -> source)."""
    out = []
    for name, source in traces.items():
        start, stop, step = (0.3, 0.8, 0.02) if source == "shipped" else (0.2, 1.0, 0.1)
        ratios = grid_ratios(start, stop, step)
        spec = {
            "kind": "grid",
            "trace": name,
            "policy": "DTR",
            "cap": DEFAULT_CAP,
            "grid": [start, stop, step],
            "ratios": ratios,
            "total": len(ratios),
        }
        out.append((spec, f"seed: grid {start:g}:{stop:g}:{step:g} ({len(ratios)} budgets), DTR"))
    return out
