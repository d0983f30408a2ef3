"""The trace page's views of a trace's stored runs (strip, pinned/depth scatter, overhead
curve, holes, facts, export links), built from one read of the runs' columns they draw and
kept per worker until the store changes; and what the page shows while they are pending."""

from __future__ import annotations

from typing import Any

import plotly.graph_objects as go
from dash import html

from app import data, ids
from app.components.charts import CHART_COLUMNS, overhead_curve, pinned_vs_depth
from app.components.export import export_links
from app.components.strip import STRIP_COLUMNS, is_thinned, outcome_strip
from app.components.summary import exact_holes_table, facts, facts_list, holes_table
from app.landscape import HOLES_COLUMNS, coverage, holes
from app.view_cache import ViewCache

PENDING = ""  # the fingerprint a page without its views has seen
VIEWS = ViewCache()
# what the trace's views read: its holes', strip's and charts' columns (InceptionV4's
# 224,351 walked runs: 3.0 s for every column, about 1 s for these)
VIEW_COLUMNS = tuple(dict.fromkeys([*HOLES_COLUMNS, *STRIP_COLUMNS, *CHART_COLUMNS]))
ZOOM_COLUMNS = (*STRIP_COLUMNS, "x")  # what zooming a thinned strip redraws it from


def cached_views(name: str, policy: str, depth_column: str, fingerprint: str) -> dict[str, Any]:
    return VIEWS.get(
        (name, policy, depth_column), fingerprint, lambda: views(name, policy, depth_column)
    )


def pending_views(policy: str, runs: int) -> dict[str, Any]:
    """What the page shows until `refresh` brings the views of a trace of many runs (more
    than DTR_LANDSCAPE_DEFER_CARDS_ABOVE) that this worker has not built yet."""
    empty = go.Figure(layout={"height": 260, "margin": {"l": 40, "r": 20, "t": 20, "b": 30}})
    return {
        "strip": empty,
        "strip_runs": None,
        "pinned": empty,
        "overhead": empty,
        "holes": [],
        "summary": html.P(f"Reading its {runs:,} runs under {policy}...", className="note"),
        "exports": html.Div(),
    }


def views(name: str, policy: str, depth_column: str) -> dict[str, Any]:
    """Every view of the trace under `policy`, built from one read of its runs."""
    runs = data.runs(name, policy, VIEW_COLUMNS)
    peak = data.peak(name, runs)
    found = holes(runs, policy)
    pairs = facts(found, len(runs), coverage(found, data.walks(name, policy)), peak)
    strip = outcome_strip(runs, height=260, uirevision=f"trace-{name}")
    return {
        "strip": strip,
        # a walked landscape's strip is thinned: zooming redraws it from these (zoom_strip)
        "strip_runs": runs[[c for c in ZOOM_COLUMNS if c in runs]] if is_thinned(strip) else None,
        "pinned": pinned_vs_depth(runs, depth_column, uirevision=f"pinned-{name}"),
        "overhead": overhead_curve(runs, uirevision=f"overhead-{name}"),
        "holes": [
            (
                holes_table(found, ids.TRACE_HOLES)
                if found.regions
                else html.P("No failure regions among the sampled budgets.")
            ),
            *(
                [
                    html.H4("Exact holes: every byte of each walked, ok just below and above"),
                    exact_holes_table(found.exact, ids.TRACE_EXACT_HOLES, peak),
                ]
                if found.exact
                else []
            ),
        ],
        "summary": facts_list(pairs),
        "exports": html.Div(
            [
                export_links(kind, {"trace": name, "policy": policy, **extra}, label, graph)
                for kind, label, extra, graph in (
                    ("strip", "Export the strip", {}, ids.TRACE_STRIP),
                    (
                        "scatter",
                        "the pinned/depth scatter",
                        {"depth": depth_column},
                        ids.TRACE_PINNED,
                    ),
                    ("overhead", "the overhead curve", {}, ids.TRACE_OVERHEAD),
                )
            ],
            className="exports",
        ),
    }
