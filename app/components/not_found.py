"""The not-found page body, shared by unknown URLs, traces and runs."""

from __future__ import annotations

from dash import dcc, html


def not_found(what: str, detail: str = "") -> html.Div:
    return html.Div(
        [
            html.H2(f"Not found: {what}"),
            html.P(detail) if detail else "",
            html.P(dcc.Link("Back to the overview", href="/")),
        ],
        className="not-found",
        role="alert",
    )
