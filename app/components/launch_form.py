"""The trace page's launch form: what to run (mode and its budgets), policy and cap; a mode's
fields only (app/pages/trace.py shows and hides them as the mode changes)."""

from __future__ import annotations

from collections.abc import Sequence

from dash import dcc, html

from app import ids
from app.launch import DEFAULT_CAP, DEFAULT_REFINE_POINTS, MODE_FIELDS, MODES


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


DEFAULT_MODE = "ratio"


def _input(
    name: str, label: str, placeholder: str = "", value: str | None = None, hint: str = ""
) -> html.Label:
    """One of the mode's fields (app/launch.py MODE_FIELDS names them): shown only in the modes
    that read it, so what the form shows is what the launch takes."""
    control = dcc.Input(
        id=ids.LAUNCH_INPUTS[name], type="text", placeholder=placeholder, value=value
    )
    return html.Label(
        [html.Span(label), control, html.Small(hint) if hint else ""],
        id=ids.LAUNCH_INPUTS[name] + ids.LAUNCH_FIELD,
        className="field",
        hidden=name not in MODE_FIELDS[DEFAULT_MODE],
    )


def launch_form(token_required: bool = False) -> html.Div:
    """The form (the policy is the page's policy dropdown, shared with the views).
    Every input is a plain text field: the server validates (app/launch.py)."""
    mode = dcc.RadioItems(
        id=ids.TRACE_MODE,
        options=[{"label": label, "value": value} for value, label in MODES.items()],
        value=DEFAULT_MODE,
        className="modes",
    )
    return html.Div(
        [
            html.Fieldset([html.Legend("What to run"), mode]),
            html.Div(
                [
                    _input("value", "Budget", "0.5 or bytes", hint="a ratio of the peak, or bytes"),
                    _input("list", "Ratios", "0.40, 0.45, 0.5", hint="separated by commas"),
                    _input("from", "From", "0.3", hint="a ratio (zoom the strip to fill)"),
                    _input("to", "To", "0.8"),
                    _input("step", "Step", "0.02"),
                    _input("points", "Points", value=str(DEFAULT_REFINE_POINTS)),
                    _input("cap", "Cap", value=f"{DEFAULT_CAP:g}"),
                ],
                className="form-row",
            ),
            html.Div(
                [
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
