"""The Dash app factory.

No module-level app or server here: tests and tools call `create_app()` themselves, and the
one server object gunicorn needs lives in `app.wsgi`.
"""

from __future__ import annotations

from pathlib import Path

import dash
from dash import html

PAGES_FOLDER = Path(__file__).resolve().parent / "pages"
TITLE = "DTR landscape"


def create_app() -> dash.Dash:
    """A new Dash app with every page under app/pages registered."""
    # Naming the app after the `app` package makes Dash import the pages as `app.pages.<name>`.
    app = dash.Dash(
        __package__,
        use_pages=True,
        pages_folder=str(PAGES_FOLDER),
        title=TITLE,
    )
    app.layout = html.Div(
        [
            html.Header(html.H1(TITLE)),
            html.Main(dash.page_container),
        ]
    )
    return app
