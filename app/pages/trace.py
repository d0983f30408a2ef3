"""Trace page (/trace/<name>): the landscape of one trace under one policy, and launching.

Views: a large zoomable outcome strip, pinned memory against depth, overhead against budget,
the holes table. Launching queues a job (app/jobs.py) that the runner turns into engine
subprocesses; the jobs panel and the views poll every two seconds, and the figures keep a
fixed uirevision so the reader's zoom survives the updates. The views are built in
app/trace_views.py; a trace of many runs whose views are not built yet shows the page first
and its views from the first refresh.
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any

import dash
from dash import (
    ALL,
    Input,
    Output,
    State,
    callback,
    clientside_callback,
    ctx,
    dcc,
    html,
    no_update,
)
from dash.exceptions import PreventUpdate

from app import data, ids, job_actions, settings
from app.access import token_required
from app.components.charts import DEPTH_COLUMNS
from app.components.jobs_panel import jobs_panel
from app.components.launch_form import launch_form, policy_dropdown
from app.components.not_found import not_found
from app.components.running_walks import running_walks_note
from app.components.strip import outcome_strip
from app.components.summary import unreadable_note
from app.jobs import job_answer
from app.landscape import in_view
from app.launch import MODE_FIELDS
from app.pages.home import DEFAULT_POLICY, run_href
from app.trace_views import PENDING, VIEWS, cached_views, pending_views

dash.register_page(
    __name__, path_template="/trace/<name>", title="Trace - DTR landscape", name="Trace"
)

LOG = logging.getLogger(__name__)
REFRESH_MS = 2000
# a page whose views are pending asks for them once, after this, and its ticks stop until they
# come (its jobs list has ticks of its own, and stays current meanwhile). Ticks every 0.5 s
# meanwhile sent a new request each: each one superseded the one before it, whose answer the
# page dropped, and the second gunicorn worker built the same views again (InceptionV4's
# 483,255 runs: 3.5-4 s each, on both workers at once)
FIRST_REFRESH_MS = 500
# a pending page whose request for its views failed says why and asks again after this (with
# one request and no ticks meanwhile it would otherwise say "Reading its ... runs" until
# reloaded)
RETRY_MS = 10_000


def layout(name: str = "", policy: str | None = None, **_query: object) -> html.Div:
    traces = data.known_traces()
    if name not in traces:
        return not_found(f"trace {name!r}", f"Known traces: {', '.join(traces) or 'none'}.")
    policies = data.policies()
    chosen = policy if policy in policies else DEFAULT_POLICY
    depth_column = "depth_at_peak_pinned"
    fingerprint = data.fingerprint(name, chosen)
    seen, interval = fingerprint, REFRESH_MS
    built = VIEWS.ready((name, chosen, depth_column), fingerprint)
    if built is None:
        runs = data.run_counts(chosen).get(name, 0)
        if runs > settings.DEFER_CARDS_ABOVE.value():
            # the page now, its views from `refresh` soon after (a walked landscape's take
            # seconds to build)
            built, seen, interval = pending_views(chosen, runs), PENDING, FIRST_REFRESH_MS
        else:
            built = cached_views(name, chosen, depth_column, fingerprint)
    graph_config: Any = {"displaylogo": False, "scrollZoom": True}
    return html.Div(
        [
            dcc.Store(id=ids.TRACE_NAME, data=name),
            dcc.Location(id=ids.TRACE_LOCATION, refresh="callback-nav"),
            html.H2([f"Trace {name} ", html.Small(f"({traces[name]})")]),
            html.Div(
                html.Label(
                    [
                        html.Span("Policy (views and launches)"),
                        policy_dropdown(ids.TRACE_POLICY, policies, chosen),
                    ]
                ),
                className="toolbar",
            ),
            html.Div(built["summary"], id=ids.TRACE_SUMMARY),
            dcc.Graph(id=ids.TRACE_STRIP, figure=built["strip"], config=graph_config),
            html.Div(
                [
                    html.Div(
                        [
                            dcc.RadioItems(
                                id=ids.TRACE_DEPTH_MODE,
                                options=[
                                    {"label": v, "value": k} for k, v in DEPTH_COLUMNS.items()
                                ],
                                value=depth_column,
                                inline=True,
                            ),
                            dcc.Graph(
                                id=ids.TRACE_PINNED, figure=built["pinned"], config=graph_config
                            ),
                        ],
                        className="half",
                    ),
                    html.Div(
                        dcc.Graph(
                            id=ids.TRACE_OVERHEAD, figure=built["overhead"], config=graph_config
                        ),
                        className="half",
                    ),
                ],
                className="row",
            ),
            html.Div(built["exports"], id=ids.TRACE_EXPORTS),
            html.H3("Holes (sampled)"),
            html.Div(built["holes"], id=f"{ids.TRACE_HOLES}-box"),
            html.H3("Launch"),
            launch_form(token_required=token_required()),
            html.H3("Jobs"),
            html.Div(id=ids.TRACE_CANCEL_MESSAGE, role="status", className="message"),
            dcc.Store(id=ids.TRACE_CANCEL_REQUEST),
            html.Div(jobs_view(name), id=ids.TRACE_JOBS),
            # apart from the views' ticks, which stop while they are pending
            dcc.Interval(id=ids.TRACE_JOBS_INTERVAL, interval=REFRESH_MS),
            dcc.Store(id=ids.TRACE_FINGERPRINT, data=seen),
            dcc.Interval(
                id=ids.TRACE_INTERVAL,
                interval=interval,
                max_intervals=1 if seen == PENDING else -1,
            ),
            # a pending page's one request, lost (its worker killed at gunicorn's timeout),
            # would leave it waiting until reloaded; the answer turns this off
            dcc.Interval(
                id=ids.TRACE_ASK_AGAIN,
                interval=1000 * settings.ASK_AGAIN_S.value(),
                disabled=seen != PENDING,
            ),
        ]
    )


def jobs_view(name: str) -> html.Div:
    store = data.jobs()
    jobs = store.recent(name, limit=30)
    workers = settings.SWEEP_WORKERS.value()  # what a walk launched here would run on
    answers = {j.id: job_answer(store, j, workers) for j in jobs}
    return html.Div(
        [
            running_walks_note(**data.walks_running(name)),
            jobs_panel(
                jobs,
                now=time.time(),
                runner_alive=store.runner_alive(),
                cancel_type=ids.TRACE_JOB_CANCEL,
                answers={k: v for k, v in answers.items() if v},
            ),
        ]
    )


@callback(
    Output(ids.TRACE_STRIP, "figure"),
    Output(ids.TRACE_PINNED, "figure"),
    Output(ids.TRACE_OVERHEAD, "figure"),
    Output(f"{ids.TRACE_HOLES}-box", "children"),
    Output(ids.TRACE_SUMMARY, "children"),
    Output(ids.TRACE_EXPORTS, "children"),
    Output(ids.TRACE_FINGERPRINT, "data"),
    Output(ids.TRACE_INTERVAL, "interval"),
    Output(ids.TRACE_INTERVAL, "max_intervals"),
    Output(ids.TRACE_ASK_AGAIN, "disabled"),
    Input(ids.TRACE_INTERVAL, "n_intervals"),
    Input(ids.TRACE_ASK_AGAIN, "n_intervals"),
    Input(ids.TRACE_POLICY, "value"),
    Input(ids.TRACE_DEPTH_MODE, "value"),
    State(ids.TRACE_FINGERPRINT, "data"),
    State(ids.TRACE_NAME, "data"),
    prevent_initial_call=True,
)
def refresh(
    _ticks: Any, _asked_again: Any, policy: str, depth: str, seen: str, name: str
) -> tuple[Any, ...]:
    try:
        current = data.fingerprint(name, policy)
        if ctx.triggered_id in (ids.TRACE_INTERVAL, ids.TRACE_ASK_AGAIN) and (
            current == seen or (seen != PENDING and VIEWS.too_soon((name, policy, depth)))
        ):
            raise PreventUpdate
        built = cached_views(name, policy, depth, current)
    except PreventUpdate:
        raise
    except Exception as exc:
        if seen != PENDING:
            raise  # the views shown stay; the next tick asks again
        LOG.exception("the views of trace %s under %s", name, policy)
        failed = unreadable_note(policy, exc, f"Trying again in {RETRY_MS // 1000} s.")
        return (*[no_update] * 4, failed, no_update, PENDING, RETRY_MS, -1, no_update)
    return (
        built["strip"],
        built["pinned"],
        built["overhead"],
        built["holes"],
        built["summary"],
        built["exports"],
        current,
        REFRESH_MS,
        -1,  # ticking again (a pending page's one tick has come)
        True,  # answered: nothing to ask again
    )


@callback(
    Output(ids.TRACE_JOBS, "children"),
    Input(ids.TRACE_JOBS_INTERVAL, "n_intervals"),
    Input(ids.TRACE_LAUNCH_MESSAGE, "children"),
    Input(ids.TRACE_CANCEL_MESSAGE, "children"),
    State(ids.TRACE_NAME, "data"),
    prevent_initial_call=True,
)
def refresh_jobs(_ticks: Any, _launched: Any, _cancelled: Any, name: str) -> html.Div:
    return jobs_view(name)


@callback(
    Output(ids.TRACE_LAUNCH_MESSAGE, "children"),
    Input(ids.TRACE_LAUNCH, "n_clicks"),
    State(ids.TRACE_MODE, "value"),
    State(ids.TRACE_VALUE, "value"),
    State(ids.TRACE_LIST, "value"),
    State(ids.TRACE_FROM, "value"),
    State(ids.TRACE_TO, "value"),
    State(ids.TRACE_STEP, "value"),
    State(ids.TRACE_POINTS, "value"),
    State(ids.TRACE_CAP, "value"),
    State(ids.TRACE_POLICY, "value"),
    State(ids.TRACE_NAME, "data"),
    State(ids.TRACE_TOKEN, "value"),
    prevent_initial_call=True,
)
def launch(clicks: int, mode: str, *values: Any) -> Any:
    if not clicks:
        raise PreventUpdate
    value, listed, start, stop, step, points, cap, policy, name, token = values
    form = {
        "trace": name,
        "mode": mode,
        "value": value,
        "list": listed,
        "from": start,
        "to": stop,
        "step": step,
        "points": points,
        "cap": cap,
        "policy": policy,
    }
    return job_actions.submit(form, token)


# The launch form shows the fields the chosen mode reads (app/launch.py MODE_FIELDS), in the
# browser: no request for what the page already knows.
clientside_callback(
    f"""function (mode) {{
        const fields = {json.dumps(MODE_FIELDS)};
        const wanted = fields[mode] || [];
        return {json.dumps(list(ids.LAUNCH_INPUTS))}.map(name => !wanted.includes(name));
    }}""",
    [Output(i + ids.LAUNCH_FIELD, "hidden") for i in ids.LAUNCH_INPUTS.values()],
    Input(ids.TRACE_MODE, "value"),
)


# A click on a cancel button becomes a request in the browser, at once: the jobs panel is
# redrawn every poll with new buttons, which fires the buttons' callback again (with no
# click), and a server callback fired that way would supersede the click's own answer.
clientside_callback(
    """function (_clicks) {
        const fired = window.dash_clientside.callback_context.triggered;
        if (!fired.length || !fired[0].value) {
            return window.dash_clientside.no_update;
        }
        const prop = fired[0].prop_id;
        const button = JSON.parse(prop.slice(0, prop.lastIndexOf(".")));
        return {job: button.job, at: Date.now()};
    }""",
    Output(ids.TRACE_CANCEL_REQUEST, "data"),
    Input({"type": ids.TRACE_JOB_CANCEL, "job": ALL}, "n_clicks"),
    prevent_initial_call=True,
)


@callback(
    Output(ids.TRACE_CANCEL_MESSAGE, "children"),
    Input(ids.TRACE_CANCEL_REQUEST, "data"),
    State(ids.TRACE_TOKEN, "value"),
    prevent_initial_call=True,
)
def cancel(request: dict | None, token: str | None) -> Any:
    if not request or request.get("job") is None:
        raise PreventUpdate
    return job_actions.cancel(int(request["job"]), token)


@callback(
    Output(ids.TRACE_LOCATION, "href"),
    Input(ids.TRACE_STRIP, "clickData"),
    Input(ids.TRACE_PINNED, "clickData"),
    Input(ids.TRACE_OVERHEAD, "clickData"),
    prevent_initial_call=True,
)
def open_run(*_clicks: Any) -> Any:
    return run_href(ctx.triggered[0]["value"] if ctx.triggered else None)


@callback(
    Output(ids.TRACE_LOCATION, "href", allow_duplicate=True),
    Input(ids.TRACE_HOLES, "active_cell"),
    State(ids.TRACE_HOLES, "derived_viewport_data"),
    prevent_initial_call=True,
)
def open_hole(cell: dict | None, rows: list[dict] | None) -> Any:
    """A click in the holes table opens the region's first failing run (the compare cell:
    the compare page of the last ok run below and the first failing one)."""
    if not cell or not rows or cell.get("row", -1) >= len(rows):
        raise PreventUpdate
    row = rows[cell["row"]]
    if cell.get("column_id") == "compare":
        return row["compare_href"]
    return f"/run/{row['first_fail_id']}"


@callback(
    Output(ids.TRACE_LOCATION, "href", allow_duplicate=True),
    Input(ids.TRACE_EXACT_HOLES, "active_cell"),
    State(ids.TRACE_EXACT_HOLES, "derived_viewport_data"),
    prevent_initial_call=True,
)
def open_exact_hole(cell: dict | None, rows: list[dict] | None) -> Any:
    """The exact holes table opens runs as the sampled one does."""
    return open_hole(cell, rows)


def zoom_span(relayout: dict | None) -> tuple[float, float] | str | None:
    """The strip's x range after a zoom, "reset" after a double click, None otherwise."""
    relayout = relayout or {}
    if "xaxis.range[0]" in relayout:
        return float(relayout["xaxis.range[0]"]), float(relayout["xaxis.range[1]"])
    if isinstance(relayout.get("xaxis.range"), list):
        lo, hi = relayout["xaxis.range"]
        return float(lo), float(hi)
    if relayout.get("xaxis.autorange"):
        return "reset"
    return None


@callback(
    Output(ids.TRACE_FROM, "value"),
    Output(ids.TRACE_TO, "value"),
    Input(ids.TRACE_STRIP, "relayoutData"),
    prevent_initial_call=True,
)
def range_from_zoom(relayout: dict | None) -> tuple[Any, Any]:
    """Zooming the strip fills the range fields used by grid, refine, walk and edges."""
    span = zoom_span(relayout)
    if not isinstance(span, tuple):
        return no_update, no_update
    lo, hi = span
    return f"{max(lo, 0.0001):.4f}", f"{min(hi, 2.0):.4f}"


@callback(
    Output(ids.TRACE_STRIP, "figure", allow_duplicate=True),
    Input(ids.TRACE_STRIP, "relayoutData"),
    State(ids.TRACE_POLICY, "value"),
    State(ids.TRACE_DEPTH_MODE, "value"),
    State(ids.TRACE_FINGERPRINT, "data"),
    State(ids.TRACE_NAME, "data"),
    prevent_initial_call=True,
)
def zoom_strip(relayout: dict | None, policy: str, depth: str, seen: str, name: str) -> Any:
    """A thinned strip (a walked landscape) zoomed in is redrawn from the runs in view, so
    that a hole's edges show execution by execution; a double click goes back to the whole."""
    span = zoom_span(relayout)
    if span is None or seen == PENDING:
        raise PreventUpdate
    built = cached_views(name, policy, depth, seen)
    runs = built["strip_runs"]
    if runs is None:  # every run is drawn already
        raise PreventUpdate
    if not isinstance(span, tuple):  # "reset"
        return built["strip"]
    lo, hi = span
    return outcome_strip(
        in_view(runs, lo, hi), height=260, uirevision=f"trace-{name}", x_range=(lo, hi)
    )
