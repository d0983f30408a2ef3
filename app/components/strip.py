"""The outcome strip: the stored runs of one trace on a budget axis (budget / peak).

One `go.Scatter` per outcome (customdata = run_id, so a click opens the run); imported
records drawn with open markers; same-execution intervals, where known, as translucent
horizontal bands behind the points (every budget in a band gives the same run). A walked
landscape has 100,000 executions and more, which no browser draws one by one: past
BAND_LIMIT intervals the bands are stretches of one outcome (their hover says how many
executions), and past MARKER_LIMIT runs the markers are thinned, every change of outcome
kept (app/landscape.py `bands`, `thinned`); a note on the chart says so.
"""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from app.components.outcomes import COLORS, OUTCOMES, fmt_bytes, fmt_ratio, symbol
from app.landscape import bands, is_imported, thinned

BAND_PREFIX = "interval "
WEBGL_ABOVE = 2000  # points in one strip
BAND_LIMIT = 2000  # intervals drawn one by one
THINNED_NOTE = "thinned"  # the name of the note on a strip that shows less than everything
MARKER_LIMIT = 3000  # markers drawn (WebGL past WEBGL_ABOVE); the overview's small strips 1,000


def _hover(row: dict) -> str:
    lines = [
        f"<b>{row['status']}</b> at {fmt_ratio(row['x'])} x peak",
        f"budget {fmt_bytes(row['budget'])}",
    ]
    if pd.notna(row.get("overhead")):
        lines.append(f"overhead {row['overhead']:.4f}x")
    if pd.notna(row.get("same_lo")):
        hi = fmt_bytes(row["same_hi"]) if pd.notna(row.get("same_hi")) else "any larger"
        lines.append(f"same run for {fmt_bytes(row['same_lo'])} .. {hi}")
    lines.append(f"source {row.get('source') or 'engine'}")
    return "<br>".join(lines)


HOVER_COLUMNS = ("status", "x", "budget", "overhead", "same_lo", "same_hi", "source")
# the stored columns outcome_strip reads (x is budget / peak, app/landscape.py `with_x`)
STRIP_COLUMNS = ("run_id", "budget", "peak", "status", "overhead", "same_lo", "same_hi", "source")


def _hovers(part: pd.DataFrame) -> list[str]:
    if part.empty:
        return []
    columns = [c for c in HOVER_COLUMNS if c in part]
    return [_hover(row) for row in part[columns].to_dict("records")]


def _band_text(status: str, row: dict) -> str:
    hi = fmt_bytes(row["hi"]) if pd.notna(row["hi"]) else "any larger"
    if row["executions"] == 1:
        return f"{status}: same run for {fmt_bytes(row['lo'])} .. {hi}"
    return f"{status} for {fmt_bytes(row['lo'])} .. {hi} ({row['executions']:,} executions)"


def _bands(part: pd.DataFrame, status: str, x_end: float) -> go.Bar | None:
    """One outcome's bands (app/landscape.py `bands` rows) as one horizontal bar trace."""
    if part.empty:
        return None
    peak = part["peak"]
    lo = part["lo"].astype(float) / peak
    hi = part["hi"].div(peak).fillna(x_end)
    hi = hi.where(hi > lo, lo)
    # A band spans [lo, hi] bytes inclusive: draw it up to hi + 1 byte.
    widths = (hi - lo) + 1 / peak
    return go.Bar(
        name=BAND_PREFIX + status,
        orientation="h",
        y=[0] * len(part),
        base=lo.tolist(),
        x=widths.tolist(),
        width=0.5,
        marker={"color": COLORS[status], "line": {"width": 0}},
        opacity=0.25,
        customdata=part["run_id"].to_numpy(),
        text=[_band_text(status, row) for row in part.to_dict("records")],
        textposition="none",
        hovertemplate="%{text}<extra></extra>",
        legendgroup=status,
        showlegend=False,
    )


def is_thinned(fig: go.Figure) -> bool:
    """Whether `outcome_strip` drew less than every run and interval (its note says so)."""
    return any(a.name == THINNED_NOTE for a in fig.layout.annotations)


def outcome_strip(
    frame: pd.DataFrame,
    *,
    title: str | None = None,
    height: int = 170,
    uirevision: str = "strip",
    x_range: tuple[float, float] | None = None,
    webgl_above: int | None = WEBGL_ABOVE,
    markers: int = MARKER_LIMIT,
) -> go.Figure:
    """The strip figure for `frame` (runs of one trace, with `x` = budget / peak).
    `webgl_above`: points past which markers are WebGL (None: always SVG, as in files);
    `markers`: at most this many markers (thinned past it)."""
    fig = go.Figure()
    has_x = not frame.empty and "x" in frame
    data = frame[frame["x"].notna()] if has_x else frame
    x_end = float(data["x"].max()) * 1.05 if has_x and not data.empty else 1.0
    spans = bands(data, BAND_LIMIT)
    for status in OUTCOMES:
        band = _bands(spans[spans["status"] == status], status, x_end)
        if band is not None:
            fig.add_trace(band)
    runs = len(data)
    data = thinned(data, markers) if not data.empty else data
    # Thousands of SVG markers are slow to draw: WebGL above that (a page holds ~8 contexts).
    scatter = go.Scattergl if webgl_above is not None and len(data) > webgl_above else go.Scatter
    for status in OUTCOMES:
        part = data[data["status"] == status] if not data.empty else data
        imported = [is_imported(s) for s in part["source"]] if not part.empty else []
        fig.add_trace(
            scatter(
                name=status,
                x=part["x"].tolist() if not part.empty else [],
                y=[0] * len(part),
                mode="markers",
                marker={
                    "color": COLORS[status],
                    "symbol": [symbol(status, i) for i in imported],
                    "size": 11,
                    "line": {"width": 1.5, "color": COLORS[status]},
                },
                customdata=part["run_id"].to_numpy() if not part.empty else [],
                text=_hovers(part),
                hovertemplate="%{text}<extra></extra>",
                legendgroup=status,
            )
        )
    if len(data) < runs or len(spans) < spans["executions"].sum():
        fig.add_annotation(
            text=(
                f"{len(data):,} of {runs:,} runs drawn (every change of outcome kept); "
                f"{len(spans):,} bands for {int(spans['executions'].sum()):,} executions"
            ),
            xref="paper",
            yref="paper",
            x=0,
            y=1.02,
            xanchor="left",
            yanchor="bottom",
            showarrow=False,
            font={"size": 11, "color": "#555555"},
            name=THINNED_NOTE,
        )
    fig.update_layout(
        title={"text": title, "x": 0, "font": {"size": 14}} if title else None,
        height=height,
        margin={"l": 20, "r": 20, "t": 36 if title else 12, "b": 40},
        uirevision=uirevision,
        barmode="overlay",
        clickmode="event",
        hovermode="closest",
        plot_bgcolor="#ffffff",
        legend={
            "orientation": "h",
            "x": 1,
            "xanchor": "right",
            "y": 1.02,
            "yanchor": "bottom",
            "title": {"text": "open marker = imported"},
        },
        xaxis={
            "title": {"text": "budget / peak"},
            "showgrid": True,
            "gridcolor": "#eeeeee",
            "zeroline": False,
            **({"range": list(x_range)} if x_range else {}),
        },
        yaxis={"visible": False, "range": [-0.6, 0.6], "fixedrange": True},
    )
    return fig
