"""Compare (/compare?a=<run_id>&b=<run_id>): why one budget fails where another succeeds.

The analysis is engine/landscape/diverge.py's, computed by an engine subprocess (a `diverge`
job: `dtr-landscape diverge --runs A B --out compare/<a>__<b>.json`), which first records
the event log of each run that has none. The page never simulates: it queues that job once,
polls the jobs table and the cache file, and shows the analysis when the file is there. The
retention what-if queues a `run` job at the failing run's budget with one more storage
retained; its stored run appears as a third column of the outcomes table, without a reload.
"""

from __future__ import annotations

from typing import Any

import dash
from dash import ALL, Input, Output, State, callback, ctx, dcc, html, no_update

from app import data, ids
from app.components.compare import (
    compare_chart,
    counts_table,
    divergence_view,
    failures_view,
    outcomes_table,
    retain_buttons,
    run_label,
)
from app.components.export import export_links
from app.components.not_found import not_found
from app.components.outcomes import fmt_bytes
from app.components.run_detail import status_badge
from app.jobs import ACTIVE, Job
from app.launch import DEFAULT_CAP

dash.register_page(__name__, path="/compare", title="Compare - DTR landscape", name="Compare")

POLL_MS = 1500


def pair_key(run_a: str, run_b: str) -> str:
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


def layout(a: str = "", b: str = "", **_query: object) -> html.Div:
    found = problem(a, b)
    if found is not None:
        return not_found(*found)
    record_a, record_b = data.run(a), data.run(b)
    assert record_a is not None and record_b is not None  # problem() checked
    trace = str(record_a["trace"])
    policies = {str(record_a["policy"]), str(record_b["policy"])}

    def side_line(side: str, record: dict[str, Any]) -> html.Li:
        return html.Li(
            [
                f"run {side}: ",
                dcc.Link(html.Code(str(record["run_id"])[:12]), href=f"/run/{record['run_id']}"),
                " ",
                status_badge(str(record["status"])),
                f" at {run_label(record)}",
            ]
        )

    return html.Div(
        [
            dcc.Store(id=ids.COMPARE_PAIR, data={"a": a, "b": b}),
            dcc.Store(id=ids.COMPARE_SHOWN, data=False),
            html.H2(["Compare two runs of ", dcc.Link(trace, href=f"/trace/{trace}")]),
            html.Ul(
                [side_line("a", record_a), side_line("b", record_b)],
                className="compare-runs",
            ),
            html.P(
                f"policy {' vs '.join(sorted(policies))}"
                + ("" if len(policies) == 1 else " (different policies)"),
                className="run-headline",
            ),
            html.Div(id=ids.COMPARE_STATUS, role="status", className="message"),
            html.Button("Compute again", id=ids.COMPARE_RETRY, n_clicks=0, hidden=True),
            html.Div(id=ids.COMPARE_CONTENT),
            html.H3("Outcomes side by side"),
            html.Div(id=ids.COMPARE_MESSAGE, role="status", className="message"),
            html.Div(outcomes(record_a, record_b, None), id=ids.COMPARE_OUTCOMES),
            dcc.Interval(id=ids.COMPARE_INTERVAL, interval=POLL_MS),
        ]
    )


def content(analysis: dict[str, Any], run_a: str, run_b: str) -> list[Any]:
    return [
        html.H3("Where the runs part"),
        divergence_view(analysis),
        html.H3("Per operator: pinned memory and nesting depth"),
        dcc.Graph(
            id=ids.COMPARE_CHART,
            figure=compare_chart(analysis, uirevision=f"compare-{run_a}-{run_b}"),
            config={"displaylogo": False},
        ),
        export_links("compare", {"a": run_a, "b": run_b}),
        html.H3("Evictions and rematerializations after they part"),
        counts_table(analysis),
        html.H3("Failure snapshots"),
        failures_view(analysis),
        html.H3("Retention what-if"),
        retain_buttons(analysis, ids.COMPARE_RETAIN),
    ]


def _diverge_job(key: str) -> Job | None:
    return data.jobs().latest_for("diverge", "key", key)


def _what_if_jobs(key: str) -> dict[str, Job]:
    """The newest what-if job of this pair per retained set ("3131")."""
    found: dict[str, Job] = {}
    for job in data.jobs().recent(limit=200):
        if job.kind == "run" and job.spec.get("compare") == key:
            found.setdefault(str(job.spec.get("retain")), job)
    return found


def outcomes(
    record_a: dict[str, Any], record_b: dict[str, Any], analysis: dict[str, Any] | None
) -> Any:
    """The outcomes table: a, b and every what-if of this pair (stored, or its job)."""
    columns: list[tuple[str, dict[str, Any]]] = [("run a", record_a), ("run b", record_b)]
    active = False
    key = pair_key(str(record_a["run_id"]), str(record_b["run_id"]))
    jobs = _what_if_jobs(key)
    for candidate in (analysis or {}).get("retain") or []:
        base = record_a if candidate["run"] == "a" else record_b
        retain = [int(s) for s in candidate["retain"]]
        heading = f"{candidate['run']} retaining {candidate['storage']}"
        job = jobs.get(",".join(map(str, retain)))
        stored = data.what_if_run(base, retain)
        if stored is not None and not (job is not None and job.status in ACTIVE):
            columns.append((heading, stored))
        elif job is not None:
            active = active or job.status in ACTIVE
            pending = f"job #{job.id} {job.status}" + (f": {job.error}" if job.error else "")
            columns.append(
                (heading, {"budget": base["budget"], "retained": retain, "pending": pending})
            )
    return outcomes_table(columns), active


def _status(record_a: dict[str, Any], record_b: dict[str, Any], job: Job | None) -> Any:
    """What the page is waiting for, in words (which runs have no event log yet)."""
    lacking = [
        side
        for side, record in (("a", record_a), ("b", record_b))
        if not data.has_event_log(record)
    ]
    parts: list[Any] = []
    if lacking:
        parts.append(
            " and ".join(f"run {s}" for s in lacking)
            + (" has" if len(lacking) == 1 else " have")
            + " no event log yet: the job records it by replaying the run. "
        )
    if job is None:
        parts.append("Queuing the comparison\u2026")
    else:
        progress = f"{job.done}/{job.total}" if job.total else ""
        last = (job.log_tail or "").strip().splitlines()[-1:] or [""]
        parts.append(
            f"Computing the comparison: job #{job.id} {job.status} {progress}"
            + (f" \u2014 {last[0].removeprefix('diverge: ')}" if last[0] else "")
        )
    return html.Span(parts, className="pending")


def _submit_diverge(record_a: dict[str, Any], record_b: dict[str, Any]) -> int:
    from app.runner import ensure_runner

    run_a, run_b = str(record_a["run_id"]), str(record_b["run_id"])
    missing = sum(1 for r in (record_a, record_b) if not data.has_event_log(r))
    spec = {
        "kind": "diverge",
        "trace": record_a["trace"],
        "policy": record_a["policy"],
        "cap": float(record_b.get("cap") or DEFAULT_CAP),
        "a": run_a,
        "b": run_b,
        "key": pair_key(run_a, run_b),
        "total": missing + 1,
    }
    label = (
        f"compare {fmt_bytes(record_a['budget'])} ({record_a['status']}) with "
        f"{fmt_bytes(record_b['budget'])} ({record_b['status']})"
    )
    job_id = data.jobs().submit(spec, label)
    ensure_runner(data.store_path())
    return job_id


def _submit_what_if(analysis: dict[str, Any], storage: int, run_a: str, run_b: str) -> Any:
    from app.runner import ensure_runner

    candidate = next(
        (c for c in analysis.get("retain") or [] if int(c["storage"]) == storage), None
    )
    record = data.run(str(candidate["run_id"])) if candidate else None
    if candidate is None or record is None:
        return html.Span(f"Storage {storage} is not a what-if of this pair.", className="error")
    if record["trace"] not in data.catalog():
        return html.Span(
            f"Trace {record['trace']!r} is not available to the engine here (set "
            "DTR_LANDSCAPE_TRACES); nothing was launched.",
            className="error",
            role="alert",
        )
    key = pair_key(run_a, run_b)
    retain = ",".join(str(s) for s in candidate["retain"])
    existing = _what_if_jobs(key).get(retain)
    if existing is not None and existing.status in ACTIVE:
        return html.Span(f"Job #{existing.id} is already running this what-if.", className="ok")
    spec = {
        "kind": "run",
        "trace": record["trace"],
        "policy": record["policy"],
        "cap": float(record.get("cap") or DEFAULT_CAP),
        "budget": int(record["budget"]),
        "retain": retain,
        "total": 1,
        "compare": key,
    }
    label = f"what-if: run {candidate['run']} at {fmt_bytes(record['budget'])} retaining {retain}"
    job_id = data.jobs().submit(spec, label)
    ensure_runner(data.store_path())
    return html.Span(f"Queued job #{job_id}: {label}.", className="ok")


@callback(
    Output(ids.COMPARE_CONTENT, "children"),
    Output(ids.COMPARE_STATUS, "children"),
    Output(ids.COMPARE_OUTCOMES, "children"),
    Output(ids.COMPARE_MESSAGE, "children"),
    Output(ids.COMPARE_RETRY, "hidden"),
    Output(ids.COMPARE_INTERVAL, "disabled"),
    Output(ids.COMPARE_SHOWN, "data"),
    Input(ids.COMPARE_INTERVAL, "n_intervals"),
    Input(ids.COMPARE_RETRY, "n_clicks"),
    Input({"type": ids.COMPARE_RETAIN, "storage": ALL}, "n_clicks"),
    State(ids.COMPARE_PAIR, "data"),
    State(ids.COMPARE_SHOWN, "data"),
)
def refresh(_ticks: Any, retry: int, _retains: Any, pair: dict, shown: bool) -> tuple[Any, ...]:
    """Queue the analysis once, show it when cached, and keep the outcomes current."""
    run_a, run_b = pair["a"], pair["b"]
    record_a, record_b = data.run(run_a), data.run(run_b)
    if record_a is None or record_b is None:
        gone = html.Span("A run of this pair is no longer in the store.", className="error")
        return no_update, gone, no_update, no_update, True, True, shown
    key = pair_key(run_a, run_b)
    trigger = ctx.triggered_id
    message: Any = no_update
    analysis = data.read_compare(run_a, run_b)
    if isinstance(trigger, dict) and ctx.triggered and ctx.triggered[0]["value"] and analysis:
        message = _submit_what_if(analysis, int(trigger["storage"]), run_a, run_b)
    shown_now: Any = no_update
    status: Any = ""
    retry_hidden = True
    if analysis is not None:
        if not shown:
            shown_now = content(analysis, run_a, run_b)
    else:
        job = _diverge_job(key)
        unavailable = [
            side
            for side, r in (("a", record_a), ("b", record_b))
            if not data.has_event_log(r) and r["trace"] not in data.catalog()
        ]
        if unavailable and (job is None or job.status not in ACTIVE):
            status = html.Span(
                f"Run {unavailable[0]} has no event log yet, and its trace "
                f"{record_a['trace']!r} is not available to the engine here to record one "
                "(set DTR_LANDSCAPE_TRACES): nothing to compare from.",
                className="error",
                role="alert",
            )
        elif job is None or (trigger == ids.COMPARE_RETRY and retry and job.status not in ACTIVE):
            job = data.jobs().get(_submit_diverge(record_a, record_b))
            status = _status(record_a, record_b, job)
        elif job.status in ACTIVE:
            status = _status(record_a, record_b, job)
        else:
            why = job.error or "it wrote no analysis" if job.status == "done" else job.error
            status = html.Span(
                f"The comparison failed (job #{job.id}, {job.status}): {why or ''}",
                className="error",
                role="alert",
            )
            retry_hidden = False
    table, active = outcomes(record_a, record_b, analysis)
    done = analysis is not None and not active
    return (
        shown_now,
        status,
        table,
        message,
        retry_hidden,
        done,
        True if analysis is not None else shown,
    )
