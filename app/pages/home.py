"""Overview (/): one outcome strip per trace under the chosen policy, with its holes.

Clicking a point opens its run. An Interval re-reads the store every few seconds and
redraws only when runs were added (the fingerprint changed). A card of many runs (a walked
landscape) that is not built yet comes in a request of its own after the page: the page
shows at once, with the trace's previous card or a line saying its runs are being read.
"""

from __future__ import annotations

import logging
from functools import partial
from typing import Any

import dash
from dash import ALL, MATCH, Input, Output, State, callback, ctx, dcc, html, no_update
from dash.exceptions import PreventUpdate

from app import data, ids, settings
from app.components.export import export_links
from app.components.launch_form import policy_dropdown
from app.components.running_walks import running_walks_note
from app.components.strip import STRIP_COLUMNS, outcome_strip
from app.components.summary import facts, trace_card, traces_without_runs, unreadable_note
from app.landscape import HOLES_COLUMNS, coverage, holes
from app.view_cache import ViewCache

dash.register_page(__name__, path="/", name="Overview", title="DTR landscape")

LOG = logging.getLogger(__name__)
DEFAULT_POLICY = "DTR"
REFRESH_MS = 5000
CARDS = ViewCache()
OVERVIEW_MARKERS = 1000  # per strip: a page of eight strips stays a few hundred KB
# what a card reads: its holes' and its strip's columns (InceptionV4's 224,351 walked runs:
# 3.0 s for every column, 0.5 s for these)
CARD_COLUMNS = tuple(dict.fromkeys([*HOLES_COLUMNS, *STRIP_COLUMNS]))
DTR_TRACES_HINT = (
    "The DTR traces are not available: set DTR_LANDSCAPE_TRACES to the folder of the DTR "
    "logs (simrd/logs.zip of uwsampl/dtr-prototype)."
)


def strip_cards(policy: str) -> list[Any]:
    """A card per trace with runs under `policy` (facts and outcome strip), then one line
    naming the traces without any. Each card is built from its own trace's runs, and kept
    until they change (app/view_cache.py); one of more runs than the setting
    DTR_LANDSCAPE_DEFER_CARDS_ABOVE not built yet is a `deferred_card`."""
    counts = data.run_counts(policy)
    walks = data.walk_count()
    # cards of more runs are built after the page: over the walks' store the overview waited
    # for InceptionV4's 224,351 runs (about 4 s), Unrolled GAN's 154,793, Transformer's and
    # DenseNet-121's before it showed anything
    limit = settings.DEFER_CARDS_ABOVE.value()
    cards: list[Any] = []
    empty = []
    for name, source in data.known_traces().items():
        if not counts.get(name):
            empty.append(name)
            continue
        fingerprint = data.trace_fingerprint(name, policy, counts[name], walks)
        subject = (name, policy)
        if counts[name] > limit:
            view = CARDS.ready(subject, fingerprint, recent=True)
            cards.append(view if view is not None else deferred_card(name, policy, counts[name]))
            continue
        cards.append(
            CARDS.get(subject, fingerprint, partial(card, name, source, policy), recent=True)
        )
    if empty:
        cards.append(traces_without_runs(empty, policy))
    return cards


def deferred_card(name: str, policy: str, runs: int) -> html.Div:
    """A place for the trace's card, filled by `fill_card` in a request of its own: until then
    the trace's previous card if this worker built one, else a line saying what is read."""
    shown = CARDS.newest((name, policy))
    if shown is None:
        reading = html.P(f"Reading its {runs:,} runs under {policy}...", className="note")
        shown = html.Section([html.H2(name), reading], className="card pending", id=f"card-{name}")
    return html.Div(
        [
            html.Div(shown, id={"type": ids.HOME_CARD, "trace": name}),
            dcc.Store(
                id={"type": ids.HOME_CARD_REQUEST, "trace": name},
                data={"trace": name, "policy": policy},
            ),
            # that request, lost (its worker killed at gunicorn's timeout), would leave the card
            # "Reading..." until the page is reloaded; the answer turns this off
            dcc.Interval(
                id={"type": ids.HOME_CARD_ASK_AGAIN, "trace": name},
                interval=1000 * settings.ASK_AGAIN_S.value(),
            ),
        ]
    )


@callback(
    Output({"type": ids.HOME_CARD, "trace": MATCH}, "children"),
    Output({"type": ids.HOME_CARD_ASK_AGAIN, "trace": MATCH}, "disabled"),
    Input({"type": ids.HOME_CARD_REQUEST, "trace": MATCH}, "data"),
    Input({"type": ids.HOME_CARD_ASK_AGAIN, "trace": MATCH}, "n_intervals"),
)
def fill_card(request: dict | None, _asked_again: Any) -> tuple[Any, bool]:
    """The deferred card, built (or taken from the cache) at the store's state now."""
    name, policy = (request or {}).get("trace"), (request or {}).get("policy")
    if not isinstance(name, str) or not isinstance(policy, str):
        raise PreventUpdate
    try:
        return _card_now(name, policy), True
    except PreventUpdate:
        raise
    except Exception as exc:  # said on the card, not left "Reading its ... runs"
        LOG.exception("the card of trace %s under %s", name, policy)
        then = "The page builds it again when runs are added, or when reloaded."
        failed = unreadable_note(policy, exc, then)
        return html.Section([html.H2(name), failed], className="card", id=f"card-{name}"), True


def _card_now(name: str, policy: str) -> html.Section:
    source = data.known_traces().get(name)
    if source is None or policy not in data.policies():
        raise PreventUpdate
    counts = data.run_counts(policy)
    fingerprint = data.trace_fingerprint(name, policy, counts.get(name, 0), data.walk_count())
    return CARDS.get((name, policy), fingerprint, partial(card, name, source, policy), recent=True)


def card(name: str, source: str, policy: str) -> html.Section:
    runs = data.runs(name, policy, CARD_COLUMNS)
    peak = data.peak(name, runs)
    found = holes(runs, policy)
    pairs = facts(found, len(runs), coverage(found, data.walks(name, policy)), peak)
    graph = dcc.Graph(
        id={"type": ids.HOME_STRIP, "trace": name},
        figure=outcome_strip(runs, uirevision=f"home-{name}", markers=OVERVIEW_MARKERS),
        config={"displaylogo": False},
    )
    # the strips' ids are patterns: their exports are all rendered by the server
    export = export_links("strip", {"trace": name, "policy": policy}, key=name)
    return trace_card(name, source, pairs, html.Div([graph, export]))


def layout(policy: str | None = None, **_query: object) -> html.Div:
    """The page, built per request; stray query-string values are accepted and ignored."""
    policies = data.policies()
    chosen = policy if policy in policies else DEFAULT_POLICY
    children: list[Any] = [
        dcc.Location(id=ids.HOME_LOCATION, refresh="callback-nav"),
        html.Div(
            html.Label([html.Span("Policy"), policy_dropdown(ids.HOME_POLICY, policies, chosen)]),
            className="toolbar",
        ),
        html.Div(walking_now(), id=ids.HOME_WALKING),
        html.Div(strip_cards(chosen), id=ids.HOME_STRIPS),
        dcc.Store(id=ids.HOME_FINGERPRINT, data=data.fingerprint(None, chosen)),
        dcc.Interval(id=ids.HOME_INTERVAL, interval=REFRESH_MS),
    ]
    if not any(source == "dtr" for source in data.catalog().values()):
        children.append(html.P(DTR_TRACES_HINT, className="note"))
    return html.Div(children)


@callback(
    Output(ids.HOME_STRIPS, "children"),
    Output(ids.HOME_FINGERPRINT, "data"),
    Input(ids.HOME_POLICY, "value"),
    Input(ids.HOME_INTERVAL, "n_intervals"),
    State(ids.HOME_FINGERPRINT, "data"),
    prevent_initial_call=True,
)
def refresh(policy: str, _ticks: int | None, seen: str | None) -> tuple[Any, str]:
    current = data.fingerprint(None, policy)
    if ctx.triggered_id == ids.HOME_INTERVAL and current == seen:
        raise PreventUpdate
    return strip_cards(policy), current


def walking_now() -> html.Div | None:
    """The walks running on the store, each linked to its trace's page (read on every tick:
    a few small files, no query unless a walk runs)."""
    return running_walks_note(**data.walks_running(), link_traces=True)


@callback(
    Output(ids.HOME_WALKING, "children"),
    Input(ids.HOME_INTERVAL, "n_intervals"),
    prevent_initial_call=True,
)
def refresh_walking(_ticks: int | None) -> html.Div | None:
    return walking_now()


@callback(
    Output(ids.HOME_LOCATION, "href"),
    Input({"type": ids.HOME_STRIP, "trace": ALL}, "clickData"),
    prevent_initial_call=True,
)
def open_run(_clicks: list[dict | None]) -> str:
    return run_href(ctx.triggered[0]["value"] if ctx.triggered else None)


def run_href(click: dict | None) -> Any:
    """/run/<run_id> for a click on a point (its customdata), else no update."""
    points = (click or {}).get("points") or []
    run_id = points[0].get("customdata") if points else None
    if isinstance(run_id, list):
        run_id = run_id[0] if run_id else None
    return f"/run/{run_id}" if run_id else no_update
