"""The engine command lines that do a job (`plan`): a validated spec (app/launch.py) ->
the subprocesses the runner starts. A sweep, walk or edge search is one engine command that
stores its own runs; single runs (and lists or grids when the engine has no `sweep` yet) are
`run` commands whose JSON records the runner stores. Pure functions."""

from __future__ import annotations

import hashlib
import re
import sys
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from app.launch import DEFAULT_CAP, ESTIMATE_SAMPLE_S, ESTIMATE_STRATA, grid_ratios
from engine.landscape.ids import check_run_id, inside


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
