"""Export controls under a chart: the same figure as PNG, SVG or PDF.

PNG and SVG are drawn in the browser by Plotly from the chart on the screen (app/assets/
export.js, wired in app/server.py): instant, and exactly what the reader sees, zoom
included. PDF is rendered on the server (GET /export/<kind>.pdf, app/figures.py: kaleido)
from the same builder and data. Sizes are the server's, so a file looks the same whichever
way it was made. Without a graph id every format is a server link.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import urlencode

from dash import html

from app import ids

FORMAT_LABELS = {"png": "PNG", "svg": "SVG", "pdf": "PDF"}
IN_BROWSER = ("png", "svg")


def export_href(kind: str, fmt: str, params: Mapping[str, str]) -> str:
    return f"/export/{kind}.{fmt}?{urlencode(dict(params))}"


def export_links(
    kind: str,
    params: Mapping[str, str],
    label: str = "Export",
    graph: str | None = None,
    key: str | None = None,
) -> html.Div:
    """`Export: PNG · SVG · PDF` for the chart `kind` drawn in the dcc.Graph `graph`; `key`
    tells apart several charts of one kind on a page (the overview's strips)."""
    from app.figures import KINDS, file_name

    size = KINDS[kind]
    children: list[Any] = [f"{label}: "]
    for i, (fmt, text) in enumerate(FORMAT_LABELS.items()):
        if i:
            children.append(" \u00b7 ")
        title = f"download this chart as {text}"
        if graph is not None and fmt in IN_BROWSER:
            stem = file_name(kind, params, fmt).rsplit(".", 1)[0]
            control: Any = html.Button(
                text,
                id={
                    "type": ids.EXPORT_IN_BROWSER,
                    "graph": graph,
                    "format": fmt,
                    "file": stem,
                    "width": size.width,
                    "height": size.height,
                },
                n_clicks=0,
                className=f"link-button export-{fmt}",
                title=title,
            )
        else:
            control = html.A(
                text,
                href=export_href(kind, fmt, params),
                download="",
                className=f"export-{fmt}",
                title=title,
            )
        children.append(control)
    return html.Div(children, className="export", id=f"export-{kind}" + (f"-{key}" if key else ""))
