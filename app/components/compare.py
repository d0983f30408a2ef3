"""The compare page's pieces, from the diverge analysis (engine/landscape/diverge.py): the
per-operator chart of both runs on one axis, where the runs part, counts after it, the
failure snapshots, the retention what-if buttons and the outcomes side by side."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import plotly.graph_objects as go
from dash import dcc, html
from plotly.subplots import make_subplots

from app.components.outcomes import COLORS, fmt_bytes, fmt_ratio
from app.components.run_detail import failure_snapshot, status_badge

SIDES = ("a", "b")
# Okabe-Ito: run a blue, run b vermillion (the same palette as the outcomes)
SIDE_COLORS = {"a": "#0072B2", "b": "#D55E00"}
MARK_COLORS = {"divergence": "#000000", "failure": COLORS["oom"]}


def run_label(run: Mapping[str, Any]) -> str:
    """`a` style label: `0.2343 x peak, 2,634,785,825 B, ok`."""
    ratio = run["budget"] / run["peak"] if run.get("peak") else None
    return f"{fmt_ratio(ratio)} x peak, {fmt_bytes(run['budget'])}, {run['status']}"


def _score(value: Any) -> str:
    if value is None:
        return "\u2014"
    return "inf" if value == "inf" else f"{float(value):.3g}"


def compare_chart(
    analysis: Mapping[str, Any], *, height: int = 560, uirevision: str = "compare"
) -> go.Figure:
    """Both runs' per-operator max pinned bytes (top) and max nesting depth (bottom), on one
    shared operator axis; each run's budget as a dashed line; the operator where the runs part
    and each failure operator marked."""
    fig = make_subplots(
        rows=2,
        cols=1,
        shared_xaxes=True,
        vertical_spacing=0.06,
        row_heights=[0.6, 0.4],
    )
    runs = analysis["runs"]
    for side in SIDES:
        series = analysis["series"][side]
        x = list(range(1, len(series["max_pinned"]) + 1))
        label = f"{side}: {run_label(runs[side])}"
        # a wide under b narrow: where the runs agree, a shows as a halo around b
        style = {"color": SIDE_COLORS[side], "width": 3.5 if side == "a" else 1.2}
        panels = (("max_pinned", "max pinned %{y:,} B"), ("max_depth", "max depth %{y}"))
        for row, (column, shown) in enumerate(panels, start=1):
            fig.add_trace(
                go.Scatter(
                    name=label,
                    legendgroup=side,
                    showlegend=row == 1,
                    x=x,
                    y=series[column],
                    mode="lines",
                    line=style,
                    hovertemplate=f"{side}: operator %{{x}}<br>{shown}<extra></extra>",
                ),
                row=row,
                col=1,
            )
        fig.add_hline(
            y=runs[side]["budget"],
            line={"color": SIDE_COLORS[side], "dash": "dash", "width": 1},
            annotation_text=f"budget {side}",
            # budgets of a hole's two sides are close: one label above its line, one below
            annotation_position="top left" if side == "a" else "bottom left",
            row=1,  # type: ignore[arg-type]
            col=1,  # type: ignore[arg-type]
        )
    marks: list[tuple[int, str, str]] = []
    divergence = analysis.get("divergence")
    if divergence:
        marks.append((divergence["operator"], f"part at {divergence['operator']:,}", "divergence"))
    for side in SIDES:
        failure = (analysis.get("failure") or {}).get(side)
        if failure:
            marks.append(
                (failure["operator"], f"{side} fails at {failure['operator']:,}", "failure")
            )
    for i, (operator, text, kind) in enumerate(marks):
        fig.add_vline(
            x=operator,
            line={"color": MARK_COLORS[kind], "dash": "dot", "width": 0.8},
            opacity=0.6,
            annotation_text=text,
            annotation_position="top left" if i % 2 == 0 else "top right",
            layer="below",
        )
    for side in SIDES:  # where a run stops: its last operator, on top of everything
        series = analysis["series"][side]
        if runs[side]["status"] == "ok" or not series["max_pinned"]:
            continue
        last = len(series["max_pinned"])
        for row, values in ((1, series["max_pinned"]), (2, series["max_depth"])):
            fig.add_trace(
                go.Scatter(
                    x=[last],
                    y=[values[-1]],
                    mode="markers",
                    marker={"symbol": "x", "size": 10, "color": SIDE_COLORS[side]},
                    name=f"{side} {runs[side]['status']}",
                    legendgroup=side,
                    showlegend=False,
                    hovertemplate=f"{side} stops in operator {last:,}: %{{y:,}}<extra></extra>",
                ),
                row=row,
                col=1,
            )
    fig.update_layout(
        height=height,
        margin={"l": 80, "r": 20, "t": 40, "b": 50},
        uirevision=uirevision,
        hovermode="x unified",
        plot_bgcolor="#ffffff",
        legend={"orientation": "h", "x": 1, "xanchor": "right", "y": 1.02, "yanchor": "bottom"},
    )
    fig.update_xaxes(gridcolor="#eeeeee", zeroline=False)
    fig.update_xaxes(title_text="operator", row=2, col=1)
    fig.update_yaxes(gridcolor="#eeeeee", zeroline=False)
    fig.update_yaxes(title_text="max pinned (bytes)", row=1, col=1)
    fig.update_yaxes(title_text="max nesting depth", row=2, col=1)
    return fig


VICTIM_ROWS: tuple[tuple[str, str], ...] = (
    ("storage", "evicts storage"),
    ("operator", "at operator"),
    ("decision", "policy decision no."),
    ("score", "its score"),
    ("pool_size", "candidates"),
    ("runner_up", "runner-up"),
    ("runner_up_score", "runner-up score"),
    ("size", "size"),
    ("pinned", "pinned before"),
    ("depth", "nesting depth"),
)


def _victim_value(name: str, victim: Mapping[str, Any] | None) -> str:
    if victim is None:
        return "no further eviction" if name == "storage" else ""
    value = victim.get(name)
    if value is None:
        return "\u2014"
    if name in ("score", "runner_up_score"):
        return _score(value)
    if name in ("size", "pinned"):
        return fmt_bytes(value)
    if name in ("storage", "runner_up"):
        return str(value)
    return f"{int(value):,}"


def victims_table(position: Mapping[str, Any], runs: Mapping[str, Any]) -> html.Table:
    """One column per run: the storage it evicts from this position, with its score."""
    header = html.Tr(
        [html.Th("")]
        + [html.Th([f"run {side} ", status_badge(str(runs[side]["status"]))]) for side in SIDES]
    )
    rows = [
        html.Tr(
            [html.Th(label)]
            + [
                html.Td(_victim_value(name, position.get(side)), className=f"victim-{side}-{name}")
                for side in SIDES
            ]
        )
        for name, label in VICTIM_ROWS
    ]
    return html.Table([html.Thead(header), html.Tbody(rows)], className="metrics compare")


def _evicts(victim: Mapping[str, Any] | None) -> str:
    if not victim:
        return "nothing"
    return f"{victim['storage']} at {victim['operator']:,}"


def divergence_view(analysis: Mapping[str, Any]) -> html.Div:
    """Where the runs part for good, each side's victim there, and the first difference."""
    runs, div, first = analysis["runs"], analysis["divergence"], analysis["first_difference"]
    if first is None:
        common = analysis["operators_in_common"]
        return html.Div(
            html.P(
                f"The runs make the same policy decisions over all {common:,} operators they "
                "share: their difference is not a decision of the policy (the failing run "
                "found its evictable pool empty where the other fit)."
            ),
            id="compare-divergence",
        )
    children: list[Any] = []
    if div is not None:
        agreed = div.get("last_agreed")
        lead = (
            f"The runs agree on {div['agreed_before']:,} policy decision(s) in a row up to "
            f"storage {agreed['storage']} at operator {agreed['operator']:,}, then part for "
            f"good at operator "
            if agreed
            else "The runs part for good at operator "
        )
        children.append(
            html.P(
                [
                    lead,
                    html.Strong(f"{div['operator']:,}", id="compare-divergence-operator"),
                    ": from there on no decision of one run is the other's.",
                ]
            )
        )
        failing = analysis.get("failing")
        victim = div.get(failing) if failing else None
        if failing and victim:
            children.append(
                html.P(
                    [
                        f"The failing run ({failing}) evicts storage ",
                        html.Strong(str(victim["storage"]), id="compare-failing-victim"),
                        " at operator ",
                        html.Strong(
                            f"{victim['operator']:,}", id="compare-failing-victim-operator"
                        ),
                        f" (score {_score(victim['score'])}, the lowest of "
                        f"{victim['pool_size']:,} candidates; runner-up "
                        f"{victim['runner_up'] if victim['runner_up'] is not None else 'none'},"
                        f" {_score(victim['runner_up_score'])}).",
                    ]
                )
            )
        children.append(victims_table(div, runs))
    if div is None or (first["operator"], first["index"]) != (div["operator"], div["index"]):
        later = (
            "they agreed again afterwards."
            if div is not None
            else "they agree again later, up to the end."
        )
        children.append(
            html.P(
                f"Their first different decision was at operator {first['operator']:,} "
                f"(a evicts {_evicts(first.get('a'))}, b {_evicts(first.get('b'))}); {later}",
                className="note-plain",
            )
        )
    return html.Div(children, id="compare-divergence")


COUNT_ROWS = (
    ("evictions", "evictions"),
    ("policy_evictions", "by the policy"),
    ("eager_evictions", "eager"),
    ("rematerializations", "rematerializations"),
)


def counts_table(analysis: Mapping[str, Any]) -> html.Table | html.P:
    """Events per run from where they part, and inside the failing run's last operator."""
    after, inside = analysis.get("after"), analysis.get("in_failure_operator")
    if not after and not inside:
        return html.P("No divergence, so nothing to count after it.")
    groups: list[tuple[str, Mapping[str, Any]]] = []
    if after:
        groups.append((f"from operator {analysis['divergence']['operator']:,} on", after))
    if inside:
        groups.append((f"inside operator {inside['operator']:,}", inside))
    header = html.Tr(
        [html.Th("")] + [html.Th(f"{side}, {label}") for label, _ in groups for side in SIDES]
    )
    rows = [
        html.Tr(
            [html.Th(label)]
            + [html.Td(f"{counts[side][name]:,}") for _, counts in groups for side in SIDES]
        )
        for name, label in COUNT_ROWS
    ]
    return html.Table([html.Thead(header), html.Tbody(rows)], className="metrics compare counts")


def failures_view(analysis: Mapping[str, Any]) -> html.Div:
    """Each run's failure snapshot (or that it did not run out of memory), side by side."""
    return html.Div(
        [
            html.Section(
                [html.H4(f"run {side}"), failure_snapshot(analysis["failure"][side])],
                className="half",
            )
            for side in SIDES
        ],
        className="row",
    )


def retain_buttons(analysis: Mapping[str, Any], button_type: str) -> html.Ul | html.P:
    """One button per retention candidate: rerun the failing budget with it never evicted."""
    candidates = analysis.get("retain") or []
    if not candidates:
        return html.P("No retention what-if: it needs exactly one failing run and its victim.")
    why = {
        "divergence": "the storage the failing run evicted where the runs part",
        "failure_input": "an input its failing operator had to rebuild, resident in the other",
    }
    items = [
        html.Li(
            [
                html.Button(
                    f"Retain storage {c['storage']}",
                    id={"type": button_type, "storage": int(c["storage"])},
                    n_clicks=0,
                ),
                html.Span(
                    f" rerun {c['run']} at {fmt_bytes(c['budget'])} with --retain "
                    f"{','.join(map(str, c['retain']))}: {why.get(c['why'], c['why'])}"
                ),
            ]
        )
        for c in candidates
    ]
    return html.Ul(items, className="retain")


OUTCOME_ROWS: tuple[tuple[str, str], ...] = (
    ("budget", "budget"),
    ("retained", "retained"),
    ("status", "status"),
    ("overhead", "overhead"),
    ("evictions", "evictions"),
    ("rematerializations", "rematerializations"),
    ("peak_pinned", "peak pinned"),
    ("depth_at_peak_pinned", "depth at peak pinned"),
    ("max_nesting_depth", "max nesting depth"),
    ("failure_operator", "fails in operator"),
)


def _outcome_value(name: str, run: Mapping[str, Any]) -> Any:
    if name == "status":
        if run.get("status"):
            return status_badge(str(run["status"]))
        return html.Span(str(run.get("pending") or "\u2014"), className="pending")
    if name == "failure_operator":
        failure = run.get("failure")
        return f"{failure['operator']:,}" if failure else "\u2014"
    value = run.get(name)
    if name == "retained":
        return ", ".join(str(s) for s in value or []) or "none"
    if value is None:
        return "\u2014"
    if name in ("budget", "peak_pinned"):
        return fmt_bytes(value)
    if name == "overhead":
        return f"{float(value):.4f}x"
    return f"{int(value):,}"


def outcomes_table(columns: Sequence[tuple[str, Mapping[str, Any]]]) -> html.Table:
    """Runs side by side, one column each: (heading, run). A stored run (with run_id) links to
    its page; a what-if still running is {budget, retained, pending: "job #7 running"}."""
    header = html.Tr(
        [html.Th("")]
        + [
            html.Th(
                dcc.Link(heading, href=f"/run/{run['run_id']}") if run.get("run_id") else heading
            )
            for heading, run in columns
        ]
    )
    rows = [
        html.Tr(
            [html.Th(label)]
            + [
                html.Td(_outcome_value(name, run), className=f"outcome-{i}-{name}")
                for i, (_, run) in enumerate(columns)
            ]
        )
        for name, label in OUTCOME_ROWS
    ]
    return html.Table([html.Thead(header), html.Tbody(rows)], className="metrics compare outcomes")
