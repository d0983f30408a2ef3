"""Published landscapes (/published): the exact landscapes the project's walks found, from the
report file (app/published.py): what every trace's walk certified and each hole to the byte.
The walks' own store is not published, so the page names how to rerun the holes' edges
here (`check-report`) rather than runs to open."""

from __future__ import annotations

from typing import Any

import dash
from dash import html

from app import published
from app.components.published import holes_section, summary_table

dash.register_page(__name__, path="/published", name="Published", title="Published landscapes")


def layout(**_query: Any) -> html.Div:
    shown = published.load()
    if shown is None:
        return html.Div(
            [
                html.H2("Published landscapes"),
                html.P(
                    f"No report to show: set {published.REPORT_ENV} to a file written by "
                    "`dtr-landscape holes --all --json`."
                ),
            ]
        )
    if shown.error is not None:
        return html.Div(
            [
                html.H2("Published landscapes"),
                html.P("The report cannot be shown:", className="error"),
                html.Pre(shown.error, className="error"),
            ]
        )
    report = shown.report
    intro = (
        f"Exact landscapes under {report['policy']} (cap {report['cap']:g}) from {shown.path}: "
        "every byte of a certified stretch classified by the walks, each hole's edges exact. "
        "The runs' ids name the walks' own store, which stays where they ran."
    )
    return html.Div(
        [
            html.H2("Published landscapes"),
            html.P(intro),
            summary_table(shown.rows),
            *[holes_section(entry, str(shown.path)) for entry in report["traces"]],
        ]
    )
