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
from app.comparisons import (
    diverge_job,
    outcome_columns,
    problem,
    submit_diverge,
    submit_what_if,
    without_event_log,
)
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
from app.components.run_detail import status_badge
from app.jobs import ACTIVE, Job

dash.register_page(__name__, path="/compare", title="Compare - DTR landscape", name="Compare")

POLL_MS = 1500


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
            dcc.Store(id=ids.COMPARE_QUEUED),
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
            html.Div(
                outcomes_table(outcome_columns(record_a, record_b, None)[0]),
                id=ids.COMPARE_OUTCOMES,
            ),
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
        export_links("compare", {"a": run_a, "b": run_b}, graph=ids.COMPARE_CHART),
        html.H3("Evictions and rematerializations after they part"),
        counts_table(analysis),
        html.H3("Failure snapshots"),
        failures_view(analysis),
        html.H3("Retention what-if"),
        retain_buttons(analysis, ids.COMPARE_RETAIN),
    ]


def _status(record_a: dict[str, Any], record_b: dict[str, Any], job: Job | None) -> Any:
    """What the page is waiting for, in words (which runs have no event log yet)."""
    lacking = without_event_log(record_a, record_b)
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


@callback(
    Output(ids.COMPARE_CONTENT, "children"),
    Output(ids.COMPARE_STATUS, "children"),
    Output(ids.COMPARE_OUTCOMES, "children"),
    Output(ids.COMPARE_MESSAGE, "children"),
    Output(ids.COMPARE_RETRY, "hidden"),
    Output(ids.COMPARE_INTERVAL, "disabled"),
    Output(ids.COMPARE_SHOWN, "data"),
    Output(ids.COMPARE_QUEUED, "data"),
    Input(ids.COMPARE_INTERVAL, "n_intervals"),
    Input(ids.COMPARE_RETRY, "n_clicks"),
    Input({"type": ids.COMPARE_RETAIN, "storage": ALL}, "n_clicks"),
    State(ids.COMPARE_PAIR, "data"),
    State(ids.COMPARE_SHOWN, "data"),
    State(ids.COMPARE_QUEUED, "data"),
)
def refresh(
    _ticks: Any, retry: int, _retains: Any, pair: dict, shown: bool, queued: int | None
) -> tuple[Any, ...]:
    """Queue the analysis once, show it when cached, and keep the outcomes current."""
    run_a, run_b = pair["a"], pair["b"]
    record_a, record_b = data.run(run_a), data.run(run_b)
    if record_a is None or record_b is None:
        gone = html.Span("A run of this pair is no longer in the store.", className="error")
        return no_update, gone, no_update, no_update, True, True, shown, queued
    trigger = ctx.triggered_id
    message: Any = no_update
    analysis = data.read_compare(run_a, run_b)
    if isinstance(trigger, dict) and ctx.triggered and ctx.triggered[0]["value"] and analysis:
        text, queued = submit_what_if(analysis, int(trigger["storage"]), run_a, run_b)
        message = html.Span(
            text, className="ok" if queued else "error", role="status" if queued else "alert"
        )
    shown_now: Any = no_update
    status: Any = ""
    retry_hidden = True
    if analysis is not None:
        if not shown:
            shown_now = content(analysis, run_a, run_b)
    else:
        job = diverge_job(run_a, run_b)
        unavailable = [
            side
            for side in without_event_log(record_a, record_b)
            if record_a["trace"] not in data.catalog()
        ]
        # a job that succeeded before this page asked, yet no analysis of today's format:
        # the cache was removed or is of an older format, so compute it again
        stale = job is not None and job.status == "done" and job.id != queued
        retried = trigger == ids.COMPARE_RETRY and retry
        if unavailable and (job is None or job.status not in ACTIVE):
            status = html.Span(
                f"Run {unavailable[0]} has no event log yet, and its trace "
                f"{record_a['trace']!r} is not available to the engine here to record one "
                "(set DTR_LANDSCAPE_TRACES): nothing to compare from.",
                className="error",
                role="alert",
            )
        elif job is None or stale or (retried and job.status not in ACTIVE):
            queued = submit_diverge(record_a, record_b)
            job = data.jobs().get(queued)
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
    columns, active = outcome_columns(record_a, record_b, analysis)
    done = analysis is not None and not active
    return (
        shown_now,
        status,
        outcomes_table(columns),
        message,
        retry_hidden,
        done,
        True if analysis is not None else shown,
        queued,
    )
