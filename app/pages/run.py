"""Run detail (/run/<run_id>): every metric, the failure snapshot, the event log, actions.

The event log comes from the run's Parquet file (events_path, or events/<run_id>.parquet
beside the store). When there is none, a button queues a job that replays the run with
`--events`; the page polls and shows the log once the file exists.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import dash
from dash import Input, Output, State, callback, ctx, dcc, html
from dash.exceptions import PreventUpdate

from app import data, ids
from app.access import token_required
from app.components.charts import operator_chart
from app.components.export import export_links
from app.components.launch_form import token_field
from app.components.not_found import not_found
from app.components.outcomes import fmt_bytes, fmt_ratio
from app.components.run_detail import (
    compare_links,
    event_summary,
    event_table,
    failure_snapshot,
    metrics_table,
    neighbour_links,
    status_badge,
)
from app.job_actions import error, queue, refused_launch
from app.jobs import ACTIVE
from app.landscape import neighbours
from app.launch import DEFAULT_CAP, LaunchError, parse_retain

dash.register_page(__name__, path_template="/run/<run_id>", title="Run - DTR landscape", name="Run")

POLL_MS = 2000


def _read_events(record: dict[str, Any]) -> Any:
    """The run's own events_path first, then events/<run_id>.parquet beside the store."""
    try:
        ours: Path | None = data.events_path_for(str(record["run_id"]))
    except ValueError:  # an id stored before ids were checked: it names no file of ours
        ours = None
    for path in (record.get("events_path"), ours):
        events = data.read_events(path) if path else None
        if events is not None:
            return events
    return None


def events_view(record: dict[str, Any]) -> tuple[Any, bool]:
    """The event log's views, and whether they are final (stop polling)."""
    events = _read_events(record)
    if events is not None:
        return [
            event_summary(events),
            dcc.Graph(id=ids.RUN_OPERATOR_CHART, figure=operator_chart(events)),
            export_links("operators", {"run": str(record["run_id"])}, graph=ids.RUN_OPERATOR_CHART),
            html.H4("Evictions and rematerializations"),
            event_table(events, ids.RUN_EVENT_TABLE),
        ], True
    job = data.jobs().latest_for("events", "run_id", str(record["run_id"]))
    if job is not None and job.status in ACTIVE:
        return html.P(f"Recording the event log: job #{job.id} is {job.status}\u2026"), False
    if job is not None and job.status != "done":
        return html.P(
            f"Recording the event log failed (job #{job.id}, {job.status}): {job.error or ''}",
            className="error",
        ), False
    return html.P("This run has no event log yet: record one to see it here."), False


def layout(run_id: str = "", **_query: object) -> html.Div:
    record = data.run(run_id)
    if record is None:
        return not_found(f"run {run_id!r}", "No run with this id is in the store.")
    trace, policy = str(record["trace"]), str(record["policy"])
    below, above = neighbours(data.runs_beside(record), record)
    shown, final = events_view(record)
    ratio = record["budget"] / record["peak"] if record.get("peak") else None
    return html.Div(
        [
            dcc.Store(id=ids.RUN_ID, data=run_id),
            html.H2(
                [
                    "Run ",
                    html.Code(run_id),
                    " ",
                    status_badge(str(record["status"])),
                ],
                className="run-title",
            ),
            html.P(
                [
                    dcc.Link(f"trace {trace}", href=f"/trace/{trace}"),
                    f" \u00b7 policy {policy} \u00b7 budget {fmt_bytes(record['budget'])}"
                    f" ({fmt_ratio(ratio)} x peak)",
                ],
                className="run-headline",
            ),
            html.Div(
                [
                    html.Section([html.H3("Metrics"), metrics_table(record)], className="half"),
                    html.Section(
                        [
                            html.H3("Failure snapshot"),
                            failure_snapshot(record.get("failure")),
                            html.H3("Actions"),
                            html.Div(
                                [
                                    html.Button("Rerun", id=ids.RUN_RERUN, n_clicks=0),
                                    html.Label(
                                        [
                                            html.Span("Retain storage ids"),
                                            dcc.Input(
                                                id=ids.RUN_RETAIN,
                                                type="text",
                                                placeholder="3131,932",
                                            ),
                                        ],
                                        className="field",
                                    ),
                                    html.Button(
                                        "Rerun retaining", id=ids.RUN_RERUN_RETAIN, n_clicks=0
                                    ),
                                    token_field(ids.RUN_TOKEN, token_required()),
                                ],
                                className="form-row",
                            ),
                            html.Div(id=ids.RUN_MESSAGE, role="status", className="message"),
                            html.H3("Compare"),
                            neighbour_links(below, above),
                            compare_links(run_id, below, above),
                        ],
                        className="half",
                    ),
                ],
                className="row",
            ),
            html.H3("Event log"),
            html.Button("Record the event log", id=ids.RUN_RECORD_EVENTS, n_clicks=0, hidden=final),
            html.Div(shown, id=ids.RUN_EVENTS),
            dcc.Interval(id=ids.RUN_EVENTS_INTERVAL, interval=POLL_MS, disabled=final),
        ]
    )


@callback(
    Output(ids.RUN_EVENTS, "children"),
    Output(ids.RUN_EVENTS_INTERVAL, "disabled"),
    Output(ids.RUN_RECORD_EVENTS, "hidden"),
    Input(ids.RUN_EVENTS_INTERVAL, "n_intervals"),
    Input(ids.RUN_RECORD_EVENTS, "n_clicks"),
    State(ids.RUN_ID, "data"),
    State(ids.RUN_TOKEN, "value"),
    prevent_initial_call=True,
)
def poll_events(_ticks: Any, clicks: int, run_id: str, token: str | None) -> tuple[Any, bool, bool]:
    record = data.run(run_id)
    if record is None:
        raise PreventUpdate
    refused = None
    if ctx.triggered_id == ids.RUN_RECORD_EVENTS and clicks:
        refused = refused_launch(token)
        if refused is None:
            queued = record_events(record)
            refused = None if isinstance(queued, int) else queued
    shown, final = events_view(record)
    if refused is not None:
        shown = [html.P(refused), shown]
    return shown, final, final


def record_events(record: dict[str, Any]) -> int | html.Span:
    """Queue a replay of the run that writes its event log (at most one at a time): the job's
    id, or, with the queue full, what the page shows."""
    run_id = str(record["run_id"])
    existing = data.jobs().latest_for("events", "run_id", run_id)
    if existing is not None and existing.status in ACTIVE:
        return existing.id
    spec = _spec(record, kind="events", run_id=run_id, total=1)
    return queue(spec, f"event log of run {run_id[:8]}, {fmt_bytes(record['budget'])}")


def _spec(record: dict[str, Any], **extra: Any) -> dict[str, Any]:
    cap = record.get("cap") or DEFAULT_CAP
    retained = ",".join(str(s) for s in record.get("retained") or [])
    return {
        "kind": "run",
        "trace": record["trace"],
        "policy": record["policy"],
        "cap": float(cap),
        "budget": int(record["budget"]),
        "retain": retained,
        **extra,
    }


@callback(
    Output(ids.RUN_MESSAGE, "children"),
    Input(ids.RUN_RERUN, "n_clicks"),
    Input(ids.RUN_RERUN_RETAIN, "n_clicks"),
    State(ids.RUN_RETAIN, "value"),
    State(ids.RUN_ID, "data"),
    State(ids.RUN_TOKEN, "value"),
    prevent_initial_call=True,
)
def rerun(
    _plain: int, _retain: int, retain_text: str | None, run_id: str, token: str | None
) -> Any:
    if not (ctx.triggered and ctx.triggered[0]["value"]):
        raise PreventUpdate
    refused = refused_launch(token)
    if refused is not None:
        return refused
    record = data.run(run_id)
    if record is None:
        return error("This run is no longer in the store. Nothing was launched.")
    if record["trace"] not in data.catalog():
        return error(
            f"Trace {record['trace']!r} is not available to the engine here (set "
            "DTR_LANDSCAPE_TRACES to its folder); nothing was launched."
        )
    spec = _spec(record, total=1)
    if ctx.triggered_id == ids.RUN_RERUN_RETAIN:
        try:
            retain = parse_retain(retain_text)
        except LaunchError as exc:
            return error(str(exc))
        if not retain:
            return error("Enter the storage ids to retain.")
        spec["retain"] = retain
    label = f"rerun at {fmt_bytes(record['budget'])}" + (
        f" retaining {spec['retain']}" if spec["retain"] else ""
    )
    job_id = queue(spec, f"{label}, {spec['policy']}, cap {spec['cap']:g}")
    if not isinstance(job_id, int):
        return job_id
    return html.Span(
        [
            f"Queued job #{job_id}: {label}. Follow it on ",
            dcc.Link(f"the {record['trace']} page", href=f"/trace/{record['trace']}"),
            ".",
        ],
        className="ok",
    )
