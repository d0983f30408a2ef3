"""Export links under a chart: the same figure as PNG, SVG or PDF (app/figures.py renders it
on the server, from the same builder and data as the chart on the page)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import urlencode

from dash import html

FORMAT_LABELS = {"png": "PNG", "svg": "SVG", "pdf": "PDF"}


def export_href(kind: str, fmt: str, params: Mapping[str, str]) -> str:
    return f"/export/{kind}.{fmt}?{urlencode(dict(params))}"


def export_links(kind: str, params: Mapping[str, str], label: str = "Export") -> html.Div:
    """`Export: PNG · SVG · PDF`, each a download link."""
    children: list[Any] = [f"{label}: "]
    for i, (fmt, text) in enumerate(FORMAT_LABELS.items()):
        if i:
            children.append(" \u00b7 ")
        children.append(
            html.A(
                text,
                href=export_href(kind, fmt, params),
                download="",
                className=f"export-{fmt}",
                title=f"download this chart as {text}",
            )
        )
    return html.Div(children, className="export", id=f"export-{kind}")
