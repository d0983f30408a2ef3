"""The trace page's launch form: what to run (mode and its budgets), policy and cap."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from dash import dcc, html

from app import ids
from app.launch import DEFAULT_CAP, DEFAULT_REFINE_POINTS, MODES


def _field(label: str, control: Any, hint: str = "") -> html.Label:
    return html.Label(
        [html.Span(label), control, html.Small(hint) if hint else ""], className="field"
    )


def token_field(component_id: str, required: bool) -> html.Label:
    """The access token's password field; always in the page (callbacks read it), shown only
    when the server asks for a token (app/access.py)."""
    return html.Label(
        [
            html.Span("Access token"),
            dcc.Input(id=component_id, type="password", autoComplete="current-password"),
            html.Small("needed to launch and cancel"),
        ],
        className="field token",
        hidden=not required,
    )


def launch_form(token_required: bool = False) -> html.Div:
    """The form (the policy is the page's policy dropdown, shared with the views).
    Every input is a plain text field: the server validates (app/launch.py)."""
    mode = dcc.RadioItems(
        id=ids.TRACE_MODE,
        options=[{"label": label, "value": value} for value, label in MODES.items()],
        value="ratio",
        className="modes",
    )
    return html.Div(
        [
            html.Fieldset([html.Legend("What to run"), mode]),
            html.Div(
                [
                    _field(
                        "Budget",
                        dcc.Input(id=ids.TRACE_VALUE, type="text", placeholder="0.5 or bytes"),
                        "one budget: a ratio of the peak, or bytes",
                    ),
                    _field(
                        "Ratios",
                        dcc.Input(id=ids.TRACE_LIST, type="text", placeholder="0.40, 0.45, 0.5"),
                        "a list",
                    ),
                    _field(
                        "From",
                        dcc.Input(id=ids.TRACE_FROM, type="text", placeholder="0.3"),
                        "grid, refine, walk (zoom the strip to fill)",
                    ),
                    _field("To", dcc.Input(id=ids.TRACE_TO, type="text", placeholder="0.8")),
                    _field("Step", dcc.Input(id=ids.TRACE_STEP, type="text", placeholder="0.02")),
                    _field(
                        "Points",
                        dcc.Input(
                            id=ids.TRACE_POINTS, type="text", value=str(DEFAULT_REFINE_POINTS)
                        ),
                        "refine",
                    ),
                ],
                className="form-row",
            ),
            html.Div(
                [
                    _field(
                        "Cap", dcc.Input(id=ids.TRACE_CAP, type="text", value=f"{DEFAULT_CAP:g}")
                    ),
                    token_field(ids.TRACE_TOKEN, token_required),
                    html.Button("Launch", id=ids.TRACE_LAUNCH, n_clicks=0, type="button"),
                ],
                className="form-row",
            ),
            html.Div(id=ids.TRACE_LAUNCH_MESSAGE, role="status", className="message"),
        ],
        className="launch",
        role="form",
    )


def policy_dropdown(component_id: str, policies: Sequence[str], value: str) -> dcc.Dropdown:
    return dcc.Dropdown(
        id=component_id,
        options=[{"label": p, "value": p} for p in policies],
        value=value,
        clearable=False,
        searchable=True,
        style={"minWidth": "16rem"},
    )
