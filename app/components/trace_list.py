"""The list of known traces, as shown on the home page."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from dash import html


@dataclass(frozen=True)
class TraceEntry:
    """One trace the dashboard knows of: its short name and where it comes from."""

    name: str
    title: str
    source: str


def trace_list(traces: Sequence[TraceEntry]) -> html.Div:
    """A bulleted list of traces, or a line saying there are none."""
    if not traces:
        return html.Div(html.P("No traces found."))
    items = [
        html.Li([html.Code(entry.name), f" {entry.title} ", html.Small(f"({entry.source})")])
        for entry in traces
    ]
    return html.Div(html.Ul(items))
