"""Unknown URLs (Dash Pages' 404 page)."""

from __future__ import annotations

import dash
from dash import html

from app.components.not_found import not_found

dash.register_page(__name__, path="/404", title="Not found - DTR landscape")


def layout(**_query: object) -> html.Div:
    return not_found("this page", "There is no page at this address.")
