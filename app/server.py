"""The Dash app factory.

No module-level app or server here: tests and tools call `create_app()` themselves, and the
one server object gunicorn needs lives in `app.wsgi`. Nothing is read at import time or when
the app is built: pages read the store and the jobs table per request (app/data.py).
"""

from __future__ import annotations

from pathlib import Path

import dash
from dash import ALL, ClientsideFunction, Input, Output, dcc, html

from app import ids

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
        # Pages hold components that other pages' callbacks never see; without this, Dash
        # would also call every page's layout (and so read the store) to validate callbacks.
        suppress_callback_exceptions=True,
    )
    from app.figures import register_routes

    register_routes(app.server)  # GET /export/<kind>.<format>: figures as files
    app.layout = html.Div(
        [
            html.Header(
                [
                    html.H1(dcc.Link(TITLE, href="/")),
                    html.Nav(
                        [
                            dcc.Link("Overview", href="/"),
                            " ",
                            dcc.Link("Published", href="/published"),
                        ]
                    ),
                ]
            ),
            html.Main(dash.page_container),
            dcc.Store(id=ids.EXPORT_DONE),
        ]
    )
    # PNG and SVG exports are drawn by Plotly in the browser (app/assets/export.js)
    export_id = {k: ALL for k in ("graph", "format", "file", "width", "height")}
    app.clientside_callback(
        ClientsideFunction(namespace="exports", function_name="download"),
        Output(ids.EXPORT_DONE, "data"),
        Input({"type": ids.EXPORT_IN_BROWSER, **export_id}, "n_clicks"),
        prevent_initial_call=True,
    )
    return app
