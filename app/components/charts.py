"""The trace page's scatters: pinned memory against nesting depth, and overhead against budget.

Like the strip, one `go.Scatter` per outcome with customdata = run_id, imported records open.
A walked landscape's neighbouring executions mostly share their pinned memory and depth: the
scatter draws each distinct point once (its hover counts the runs there), and the overhead
curve of more than CURVE_LIMIT runs keeps the lowest and highest overhead of each of
CURVE_LIMIT / 2 budget slices, so its peaks stay where they are.
"""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from app.components.outcomes import COLORS, OUTCOMES, fmt_bytes, fmt_ratio, symbol
from app.landscape import imported, is_imported

CURVE_LIMIT = 2000  # points of the overhead curve (a chart is about 700 pixels wide)
SCATTER_LIMIT = 2000  # distinct points of the pinned/depth scatter

DEPTH_COLUMNS = {
    "depth_at_peak_pinned": "depth at peak pinned",
    "max_nesting_depth": "max nesting depth",
}
# the stored columns pinned_vs_depth and overhead_curve read (x is budget / peak)
CHART_COLUMNS = (
    "run_id",
    "budget",
    "peak",
    "status",
    "source",
    "overhead",
    "peak_pinned",
    *DEPTH_COLUMNS,
)


def _layout(fig: go.Figure, *, x_title: str, y_title: str, uirevision: str, height: int) -> None:
    fig.update_layout(
        height=height,
        margin={"l": 60, "r": 20, "t": 30, "b": 50},
        uirevision=uirevision,
        clickmode="event",
        hovermode="closest",
        plot_bgcolor="#ffffff",
        legend={"orientation": "h", "x": 1, "xanchor": "right", "y": 1.02, "yanchor": "bottom"},
        xaxis={"title": {"text": x_title}, "gridcolor": "#eeeeee", "zeroline": False},
        yaxis={"title": {"text": y_title}, "gridcolor": "#eeeeee", "zeroline": False},
    )


def pinned_vs_depth(
    frame: pd.DataFrame,
    depth_column: str = "depth_at_peak_pinned",
    *,
    uirevision: str = "pinned",
    height: int = 380,
) -> go.Figure:
    """Peak pinned bytes against a depth column, one trace per outcome (budget on hover)."""
    if depth_column not in DEPTH_COLUMNS:
        raise ValueError(f"depth column must be one of {', '.join(DEPTH_COLUMNS)}")
    fig = go.Figure()
    for status in OUTCOMES:
        part = frame[frame["status"] == status] if not frame.empty else frame
        part = part[part[depth_column].notna() & part["peak_pinned"].notna()] if len(part) else part
        rows = _distinct_points(part, depth_column)
        fig.add_trace(
            go.Scatter(
                name=status,
                x=[r[depth_column] for r in rows],
                y=[r["peak_pinned"] for r in rows],
                mode="markers",
                marker={
                    "color": COLORS[status],
                    "symbol": [symbol(status, is_imported(r.get("source"))) for r in rows],
                    "size": 9,
                    "line": {"width": 1.5, "color": COLORS[status]},
                },
                customdata=[r["run_id"] for r in rows],
                text=[
                    f"<b>{status}</b> budget {fmt_bytes(r['budget'])} ({fmt_ratio(r['x'])} x peak)"
                    + (f" and {r['runs'] - 1:,} more runs" if r["runs"] > 1 else "")
                    + f"<br>peak pinned {fmt_bytes(r['peak_pinned'])}"
                    f"<br>{DEPTH_COLUMNS[depth_column]} {int(r[depth_column])}"
                    for r in rows
                ],
                hovertemplate="%{text}<extra></extra>",
            )
        )
    _layout(
        fig,
        x_title=DEPTH_COLUMNS[depth_column],
        y_title="peak pinned (bytes)",
        uirevision=uirevision,
        height=height,
    )
    return fig


def _distinct_points(part: pd.DataFrame, depth_column: str) -> list[dict]:
    """One row per distinct (depth, pinned, imported) point, the lowest budget's run, with
    `runs` = how many runs share it; evenly thinned past SCATTER_LIMIT."""
    if part.empty:
        return []
    keyed = part.assign(_imported=imported(part["source"])).sort_values("budget")
    key = [depth_column, "peak_pinned", "_imported"]
    counts = keyed.groupby(key, sort=False)["run_id"].transform("size")
    first = keyed.assign(runs=counts).drop_duplicates(key)
    if len(first) > SCATTER_LIMIT:
        first = first.iloc[
            sorted(
                {round(i * (len(first) - 1) / (SCATTER_LIMIT - 1)) for i in range(SCATTER_LIMIT)}
            )
        ]
    return list(first.to_dict("records"))


def _curve_points(ok: pd.DataFrame) -> pd.DataFrame:
    """The completing runs in budget order; past CURVE_LIMIT, the lowest and highest overhead
    of each of CURVE_LIMIT / 2 equal slices of them."""
    if len(ok) <= CURVE_LIMIT:
        return ok
    slices = pd.Series(range(len(ok)), index=ok.index) * (CURVE_LIMIT // 2) // len(ok)
    grouped = ok["overhead"].groupby(slices.to_numpy())
    keep = set(grouped.idxmin().tolist()) | set(grouped.idxmax().tolist())
    return ok[ok.index.isin(keep)]


def overhead_curve(
    frame: pd.DataFrame, *, uirevision: str = "overhead", height: int = 380
) -> go.Figure:
    """Overhead of the completing runs against budget / peak, in budget order."""
    fig = go.Figure()
    ok = frame[(frame["status"] == "ok") & frame["overhead"].notna()] if not frame.empty else frame
    ok = _curve_points(ok.sort_values("budget")) if not ok.empty else ok
    rows = ok.to_dict("records")
    fig.add_trace(
        go.Scatter(
            name="ok",
            x=[r["x"] for r in rows],
            y=[r["overhead"] for r in rows],
            mode="lines+markers",
            line={"color": COLORS["ok"], "width": 1.5},
            marker={
                "color": COLORS["ok"],
                "symbol": [symbol("ok", is_imported(r.get("source"))) for r in rows],
                "size": 8,
            },
            customdata=[r["run_id"] for r in rows],
            text=[
                f"overhead {r['overhead']:.4f}x<br>budget {fmt_bytes(r['budget'])} "
                f"({fmt_ratio(r['x'])} x peak)"
                for r in rows
            ],
            hovertemplate="%{text}<extra></extra>",
        )
    )
    _layout(
        fig,
        x_title="budget / peak",
        y_title="overhead (x model compute)",
        uirevision=uirevision,
        height=height,
    )
    return fig


def operator_chart(events: pd.DataFrame, *, height: int = 360) -> go.Figure:
    """Per model operator: max pinned bytes (left axis) and max nesting depth (right axis)."""
    ops = events[events["kind"] == "operator"].sort_values("operator")
    fig = go.Figure()
    fig.add_trace(
        go.Scatter(
            name="max pinned (bytes)",
            x=list(ops["operator"]),
            y=list(ops["max_pinned"]),
            mode="lines",
            line={"color": "#0072B2"},
        )
    )
    fig.add_trace(
        go.Scatter(
            name="max depth",
            x=list(ops["operator"]),
            y=list(ops["max_depth"]),
            mode="lines",
            yaxis="y2",
            line={"color": "#D55E00", "dash": "dot"},
        )
    )
    fig.update_layout(
        height=height,
        margin={"l": 70, "r": 60, "t": 30, "b": 50},
        hovermode="x unified",
        plot_bgcolor="#ffffff",
        legend={"orientation": "h", "x": 1, "xanchor": "right", "y": 1.02, "yanchor": "bottom"},
        xaxis={"title": {"text": "operator"}, "gridcolor": "#eeeeee"},
        yaxis={"title": {"text": "pinned bytes"}, "gridcolor": "#eeeeee"},
        yaxis2={"title": {"text": "nesting depth"}, "overlaying": "y", "side": "right"},
    )
    return fig
