"""The run detail page's pieces: every metric, the failure snapshot, the event log."""

from __future__ import annotations

from typing import Any

import pandas as pd
from dash import dcc, html
from dash.dash_table.DataTable import DataTable

from app.components.outcomes import COLORS, fmt_bytes, fmt_ratio
from engine.sim.events import COLUMNS
from engine.sim.record import RUN_FIELDS

BYTE_FIELDS = {"budget", "peak", "max_memory", "peak_pinned", "request", "pinned", "over_by"}
FAILURE_LABELS = {
    "operator": "operator",
    "request": "requested",
    "pinned": "pinned",
    "depth": "depth",
    "over_by": "over budget by",
}
# The store's own columns, shown after the record's fields.
STORE_FIELDS = (
    "run_id",
    "source",
    "cap",
    "sweep_id",
    "walk_id",
    "host",
    "started_at",
    "ended_at",
    "events_path",
)
EVENT_COLUMNS = tuple(c for c in COLUMNS if c not in ("max_pinned", "max_depth"))


def _value(name: str, value: Any) -> str:
    if value is None or (isinstance(value, float) and value != value):
        return "\u2014"
    if name in BYTE_FIELDS:
        return fmt_bytes(value)
    if name == "ratio":
        return fmt_ratio(value)
    if name == "same_execution" and isinstance(value, dict):
        hi = value.get("hi")
        return (
            f"{fmt_bytes(value.get('lo'))} .. {fmt_bytes(hi) if hi is not None else 'any larger'}"
        )
    if name == "retained":
        return ", ".join(str(s) for s in value) or "none"
    if isinstance(value, float):
        return f"{value:.6g}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def metrics_table(record: dict[str, Any]) -> html.Table:
    """Every field of the run record (engine/sim/record.py), then the store's own columns."""
    rows = []
    for name, meaning in RUN_FIELDS:
        if name == "failure":
            continue
        rows.append(
            html.Tr([html.Th(name, title=meaning), html.Td(_value(name, record.get(name)))])
        )
    for name in STORE_FIELDS:
        rows.append(html.Tr([html.Th(name), html.Td(_value(name, record.get(name)))]))
    return html.Table(html.Tbody(rows), className="metrics")


def status_badge(status: str) -> html.Span:
    return html.Span(
        status,
        className=f"badge status-{status}",
        style={"background": COLORS.get(status, "#000"), "color": "#fff"},
    )


def failure_snapshot(failure: dict[str, Any] | None) -> html.Div:
    if not failure:
        return html.Div(html.P("No failure: the run did not run out of memory."))
    rows = [
        html.Tr([html.Th(label), html.Td(_value(key, failure.get(key)))])
        for key, label in FAILURE_LABELS.items()
    ]
    return html.Div(html.Table(html.Tbody(rows), className="metrics"), className="failure")


def event_table(events: pd.DataFrame, table_id: str) -> DataTable:
    """Evictions and rematerializations in order; sortable and filterable."""
    log = events[events["kind"] != "operator"]
    columns = [c for c in EVENT_COLUMNS if c in log.columns]
    data = log[columns].astype(object).where(log[columns].notna(), None).to_dict("records")
    return DataTable(
        id=table_id,
        columns=[
            {"name": c, "id": c, "type": "text" if c == "kind" else "numeric"} for c in columns
        ],
        data=data,
        sort_action="native",
        filter_action="native",
        page_action="native",
        page_size=20,
        style_table={"overflowX": "auto"},
        style_cell={"fontFamily": "inherit", "fontSize": "13px", "padding": "3px 8px"},
        style_header={"fontWeight": "bold"},
    )


def event_summary(events: pd.DataFrame) -> html.P:
    counts = events["kind"].value_counts()
    parts = [f"{int(counts.get(k, 0)):,} {k}" for k in ("evict_policy", "evict_eager", "remat")]
    return html.P("Event log: " + ", ".join(parts) + ".")


def neighbour_links(below: dict[str, Any] | None, above: dict[str, Any] | None) -> html.Div:
    def link(run: dict[str, Any] | None, text: str) -> Any:
        if run is None:
            return html.Span(f"{text}: none stored")
        label = f"{text}: {run['status']} at {fmt_bytes(run['budget'])}"
        return dcc.Link(label, href=f"/run/{run['run_id']}")

    return html.Div(
        [link(below, "nearest budget below"), " \u00b7 ", link(above, "nearest budget above")],
        className="neighbours",
    )


def compare_links(run_id: str, below: dict[str, Any] | None, above: dict[str, Any] | None) -> Any:
    """Compare this run with its neighbour below or above (the lower budget is run a)."""
    links: list[Any] = []
    for run, a, b, text in (
        (below, below and below["run_id"], run_id, "budget below"),
        (above, run_id, above and above["run_id"], "budget above"),
    ):
        if run is None:
            continue
        if links:
            links.append(" \u00b7 ")
        links.append(
            dcc.Link(
                f"compare with the {text} ({run['status']})",
                href=f"/compare?a={a}&b={b}",
                className="compare-link",
            )
        )
    return html.Div(links or "No neighbour to compare with.", className="neighbours")
