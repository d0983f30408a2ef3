"""The compare page's work: which pairs can be compared, the `diverge` job that computes and
caches an analysis, and the retention what-if jobs with their stored runs. Reads through
app/data.py and queues through app/jobs.py; nothing here simulates or builds components.
"""

from __future__ import annotations

from typing import Any

from app import data
from app.components.outcomes import fmt_bytes
from app.jobs import ACTIVE, Job
from app.launch import DEFAULT_CAP


def pair_key(run_a: str, run_b: str) -> str:
    """How the pair's jobs are found again (spec["key"] of its diverge job, spec["compare"]
    of its what-ifs)."""
    return f"{run_a}__{run_b}"


def compare_href(run_a: str, run_b: str) -> str:
    return f"/compare?a={run_a}&b={run_b}"


def problem(run_a: str, run_b: str) -> tuple[str, str] | None:
    """(what, detail) when the pair cannot be compared, else None."""
    if not run_a or not run_b:
        return "a pair of runs", "Open this page as /compare?a=<run_id>&b=<run_id>."
    if run_a == run_b:
        return "a pair of runs", f"Run a and run b are the same run ({run_a}): nothing to compare."
    records = {}
    for side, run_id in (("a", run_a), ("b", run_b)):
        record = data.run(run_id)
        if record is None:
            return f"run {run_id!r}", f"No run with this id (run {side}) is in the store."
        records[side] = record
    a, b = records["a"], records["b"]
    sha_a, sha_b = a.get("trace_sha256"), b.get("trace_sha256")
    if (sha_a and sha_b and sha_a != sha_b) or a["trace"] != b["trace"]:
        return (
            "a comparable pair",
            f"The runs are of different traces: a is {a['trace']}, b is {b['trace']}.",
        )
    return None


def without_event_log(record_a: dict[str, Any], record_b: dict[str, Any]) -> list[str]:
    """The sides ("a", "b") that have no event log yet."""
    return [s for s, r in (("a", record_a), ("b", record_b)) if not data.has_event_log(r)]


def diverge_job(run_a: str, run_b: str) -> Job | None:
    return data.jobs().latest_for("diverge", "key", pair_key(run_a, run_b))


def submit_diverge(record_a: dict[str, Any], record_b: dict[str, Any]) -> int:
    """Queue the engine job that records the missing event logs and caches the analysis."""
    from app.runner import ensure_runner

    run_a, run_b = str(record_a["run_id"]), str(record_b["run_id"])
    spec = {
        "kind": "diverge",
        "trace": record_a["trace"],
        "policy": record_a["policy"],
        "cap": float(record_b.get("cap") or DEFAULT_CAP),
        "a": run_a,
        "b": run_b,
        "key": pair_key(run_a, run_b),
        "total": len(without_event_log(record_a, record_b)) + 1,  # each replay, the analysis
    }
    label = (
        f"compare {fmt_bytes(record_a['budget'])} ({record_a['status']}) with "
        f"{fmt_bytes(record_b['budget'])} ({record_b['status']})"
    )
    job_id = data.jobs().submit(spec, label)
    ensure_runner(data.store_path())
    return job_id


def what_if_jobs(run_a: str, run_b: str) -> dict[str, Job]:
    """The newest what-if job of this pair per retained set ("3131")."""
    key = pair_key(run_a, run_b)
    found: dict[str, Job] = {}
    for job in data.jobs().recent(limit=200):
        if job.kind == "run" and job.spec.get("compare") == key:
            found.setdefault(str(job.spec.get("retain")), job)
    return found


def outcome_columns(
    record_a: dict[str, Any], record_b: dict[str, Any], analysis: dict[str, Any] | None
) -> tuple[list[tuple[str, dict[str, Any]]], bool]:
    """(heading, run) for a, b and each what-if with a stored run or a job; and whether a
    what-if job is still queued or running. A pending what-if is {budget, retained, pending}."""
    columns: list[tuple[str, dict[str, Any]]] = [("run a", record_a), ("run b", record_b)]
    active = False
    jobs = what_if_jobs(str(record_a["run_id"]), str(record_b["run_id"]))
    for candidate in (analysis or {}).get("retain") or []:
        base = record_a if candidate["run"] == "a" else record_b
        retain = [int(s) for s in candidate["retain"]]
        heading = f"{candidate['run']} retaining {candidate['storage']}"
        job = jobs.get(",".join(map(str, retain)))
        running = job is not None and job.status in ACTIVE
        stored = data.what_if_run(base, retain)
        if stored is not None and not running:
            columns.append((heading, stored))
        elif job is not None:
            active = active or running
            pending = f"job #{job.id} {job.status}" + (f": {job.error}" if job.error else "")
            columns.append(
                (heading, {"budget": base["budget"], "retained": retain, "pending": pending})
            )
    return columns, active


def submit_what_if(
    analysis: dict[str, Any], storage: int, run_a: str, run_b: str
) -> tuple[str, bool]:
    """Queue the rerun of the failing budget with `storage` retained; (message, queued)."""
    from app.runner import ensure_runner

    candidate = next(
        (c for c in analysis.get("retain") or [] if int(c["storage"]) == storage), None
    )
    record = data.run(str(candidate["run_id"])) if candidate else None
    if candidate is None or record is None:
        return f"Storage {storage} is not a what-if of this pair.", False
    if record["trace"] not in data.catalog():
        return (
            f"Trace {record['trace']!r} is not available to the engine here (set "
            "DTR_LANDSCAPE_TRACES); nothing was launched.",
            False,
        )
    retain = ",".join(str(s) for s in candidate["retain"])
    existing = what_if_jobs(run_a, run_b).get(retain)
    if existing is not None and existing.status in ACTIVE:
        return f"Job #{existing.id} is already running this what-if.", True
    spec = {
        "kind": "run",
        "trace": record["trace"],
        "policy": record["policy"],
        "cap": float(record.get("cap") or DEFAULT_CAP),
        "budget": int(record["budget"]),
        "retain": retain,
        "total": 1,
        "compare": pair_key(run_a, run_b),
    }
    label = f"what-if: run {candidate['run']} at {fmt_bytes(record['budget'])} retaining {retain}"
    job_id = data.jobs().submit(spec, label)
    ensure_runner(data.store_path())
    return f"Queued job #{job_id}: {label}.", True
