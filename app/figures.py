"""Figures for papers: the dashboard's charts as PNG, SVG or PDF files.

Each figure is built by the component builder its page uses (app/components/*), from the
same reads (app/data.py: the store, an event log, a cached comparison), so the file is the
chart on the screen at a fixed size. Building never simulates: a comparison that is not
cached yet is an error here (the compare page or `dtr-landscape diverge` computes it).

Rendering is kaleido's: plotly.js in a headless Chromium driven by choreographer, Debian's
/usr/bin/chromium unless BROWSER_PATH names another. One browser renders every file of one
call (starting it is most of the cost, a few seconds; each figure is then well under one).
Used by `GET /export/<kind>.<format>?...` (registered by app/server.py) and by
`dtr-landscape figure` (app/commands.py).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import plotly.graph_objects as go

FORMATS: dict[str, str] = {
    "png": "image/png",
    "svg": "image/svg+xml",
    "pdf": "application/pdf",
}
BROWSER_ENV = "BROWSER_PATH"  # kaleido's (choreographer's) own variable
SYSTEM_CHROMIUM = Path("/usr/bin/chromium")
PNG_SCALE = 2  # print resolution for raster figures
RENDER_TIMEOUT_S = 60.0  # one call, browser start included: a bound, not an expectation
# (the export route renders inside a gunicorn request: app/serve.py gives requests 90 s)
# The export route renders in the web worker: one rendering at a time per worker, and a
# request that cannot start within this long is told to try again.
EXPORT_WAIT_S = 20.0
_rendering = threading.BoundedSemaphore(1)


class FigureError(ValueError):
    """A figure that cannot be built or rendered; the message says why."""


@dataclass(frozen=True)
class FigureKind:
    params: tuple[str, ...]  # required parameters, in command-line order
    width: int
    height: int
    build: Callable[[Mapping[str, str]], go.Figure]
    name: Callable[[Mapping[str, str]], str]  # file name stem


def _runs(params: Mapping[str, str]) -> Any:
    from app import data

    trace, policy = params["trace"], params.get("policy") or "DTR"
    runs = data.runs(trace, policy)
    if runs.empty:
        raise FigureError(f"no stored runs of trace {trace!r} under policy {policy}")
    return runs


def _strip(params: Mapping[str, str]) -> go.Figure:
    from app.components.strip import outcome_strip

    # vector markers in every file (the page switches to WebGL past a few thousand points)
    return outcome_strip(_runs(params), height=260, webgl_above=None)


def _scatter(params: Mapping[str, str]) -> go.Figure:
    from app.components.charts import DEPTH_COLUMNS, pinned_vs_depth

    depth = params.get("depth") or "depth_at_peak_pinned"
    if depth not in DEPTH_COLUMNS:
        raise FigureError(f"depth must be one of {', '.join(DEPTH_COLUMNS)}, got {depth!r}")
    return pinned_vs_depth(_runs(params), depth)


def _overhead(params: Mapping[str, str]) -> go.Figure:
    from app.components.charts import overhead_curve

    return overhead_curve(_runs(params))


def _operators(params: Mapping[str, str]) -> go.Figure:
    from app import data
    from app.components.charts import operator_chart

    run_id = params["run"]
    record = data.run(run_id)
    if record is None:
        raise FigureError(f"no run {run_id!r} in the store")
    for path in (record.get("events_path"), data.events_path_for(run_id)):
        events = data.read_events(path) if path else None
        if events is not None:
            return operator_chart(events)
    raise FigureError(
        f"run {run_id} has no event log yet: record it on /run/{run_id} "
        f"(or `dtr-landscape run ... --events FILE`)"
    )


def _compare(params: Mapping[str, str]) -> go.Figure:
    from app import data
    from app.components.compare import compare_chart

    run_a, run_b = params["a"], params["b"]
    for run_id in (run_a, run_b):
        if data.run(run_id) is None:
            raise FigureError(f"no run {run_id!r} in the store")
    analysis = data.read_compare(run_a, run_b)
    if analysis is None:
        raise FigureError(
            f"runs {run_a} and {run_b} have not been compared yet: open "
            f"/compare?a={run_a}&b={run_b} (or `dtr-landscape figure compare` computes it)"
        )
    return compare_chart(analysis)


KINDS: dict[str, FigureKind] = {
    "strip": FigureKind(
        ("trace",), 1100, 260, _strip, lambda p: f"strip-{p['trace']}-{p.get('policy') or 'DTR'}"
    ),
    "scatter": FigureKind(
        ("trace",),
        800,
        500,
        _scatter,
        lambda p: f"scatter-{p['trace']}-{p.get('policy') or 'DTR'}",
    ),
    "overhead": FigureKind(
        ("trace",),
        800,
        500,
        _overhead,
        lambda p: f"overhead-{p['trace']}-{p.get('policy') or 'DTR'}",
    ),
    "operators": FigureKind(("run",), 1100, 420, _operators, lambda p: f"operators-{p['run']}"),
    "compare": FigureKind(
        ("a", "b"), 1100, 620, _compare, lambda p: f"compare-{p['a'][:8]}-{p['b'][:8]}"
    ),
}


def build(kind: str, params: Mapping[str, str]) -> go.Figure:
    """The figure of one chart, sized for a file (FigureError for bad parameters)."""
    spec = KINDS.get(kind)
    if spec is None:
        raise FigureError(f"unknown figure {kind!r}; one of: {', '.join(KINDS)}")
    missing = [p for p in spec.params if not params.get(p)]
    if missing:
        raise FigureError(f"the {kind} figure needs {', '.join(missing)}")
    fig = spec.build(params)
    fig.update_layout(width=spec.width, height=fig.layout.height or spec.height)
    return fig


def file_name(kind: str, params: Mapping[str, str], fmt: str) -> str:
    stem = KINDS[kind].name(params)
    safe = "".join(c if c.isalnum() or c in "-._" else "_" for c in stem)
    return f"{safe}.{fmt}"


def browser_path() -> str | None:
    """BROWSER_PATH, else Debian's Chromium, else None (kaleido searches the PATH)."""
    explicit = os.environ.get(BROWSER_ENV)
    if explicit:
        return explicit
    return str(SYSTEM_CHROMIUM) if SYSTEM_CHROMIUM.exists() else None


def render(
    items: Sequence[tuple[go.Figure, str]], timeout_s: float = RENDER_TIMEOUT_S
) -> list[bytes]:
    """Each (figure, format) as file bytes, all in one headless browser."""
    for _, fmt in items:
        if fmt not in FORMATS:
            raise FigureError(f"unknown format {fmt!r}; one of: {', '.join(FORMATS)}")
    # asyncio.run in a thread of its own: the caller may be inside an event loop already. On
    # time-out the thread is left to finish: kaleido's own per-figure timeout then closes its
    # browser, and this call returns now instead of waiting for that.
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=1)
    future = pool.submit(asyncio.run, _render_all(items, timeout_s))
    try:
        return future.result(timeout=timeout_s)
    except concurrent.futures.TimeoutError:
        raise FigureError(f"rendering took longer than {timeout_s:g} s") from None
    finally:
        pool.shutdown(wait=False)


async def _render_all(items: Sequence[tuple[go.Figure, str]], timeout_s: float) -> list[bytes]:
    from kaleido.errors import JavascriptError

    try:
        return await _render_in_one_browser(items, timeout_s)
    except JavascriptError as exc:
        # kaleido 1.5 calls its page's script in the first JavaScript context Chromium
        # reports after it navigates its tab there (kaleido/_kaleido_tab/_tab.py); on a
        # loaded machine that can be a context without the page's scripts, and every figure
        # then fails with "kaleido_scopes is not defined" (a CI run beside a walk on both
        # cores saw it once). A fresh browser navigates afresh.
        if "kaleido_scopes is not defined" not in str(exc):
            raise
        return await _render_in_one_browser(items, timeout_s)


async def _render_in_one_browser(
    items: Sequence[tuple[go.Figure, str]], timeout_s: float
) -> list[bytes]:
    import kaleido
    from kaleido.errors import ChromeNotFoundError

    kwargs: dict[str, Any] = {"n": 1, "timeout": timeout_s, "mathjax": False}
    path = browser_path()
    if path:
        kwargs["path"] = path
    try:
        async with kaleido.Kaleido(**kwargs) as renderer:
            out = []
            for fig, fmt in items:
                layout = fig.layout
                opts = {
                    "format": fmt,
                    "width": layout.width,
                    "height": layout.height,
                    "scale": PNG_SCALE if fmt == "png" else 1,
                }
                out.append(await renderer.calc_fig(fig, opts=opts))  # type: ignore[arg-type]
            return out
    except ChromeNotFoundError:
        raise FigureError(
            f"no Chromium to render figures with: install chromium or set {BROWSER_ENV}"
        ) from None


def export_response(kind: str, fmt: str, params: Mapping[str, str]) -> tuple[bytes, int, dict]:
    """(body, status, headers) of GET /export/<kind>.<fmt>: the file as a download, or a
    one-line message (400 bad parameters, 404 nothing to draw, 503 busy)."""
    text = {"Content-Type": "text/plain; charset=utf-8"}
    if fmt not in FORMATS:
        return f"unknown format {fmt!r}; one of: {', '.join(FORMATS)}".encode(), 400, text
    try:
        fig = build(kind, params)
    except FigureError as exc:
        status = 400 if kind not in KINDS or "needs" in str(exc) or "must be" in str(exc) else 404
        return str(exc).encode(), status, text
    if not _rendering.acquire(timeout=EXPORT_WAIT_S):
        return b"another figure is being rendered; try again in a moment", 503, text
    try:
        (body,) = render([(fig, fmt)])
    except FigureError as exc:
        return str(exc).encode(), 503, text
    finally:
        _rendering.release()
    name = file_name(kind, params, fmt)
    return (
        body,
        200,
        {"Content-Type": FORMATS[fmt], "Content-Disposition": f'attachment; filename="{name}"'},
    )


def register_routes(server: Any) -> None:
    """GET /export/<kind>.<fmt>?trace=...&policy=... (or run=..., or a=...&b=...)."""
    from flask import request

    def export(kind: str, fmt: str) -> tuple[bytes, int, dict]:
        return export_response(kind, fmt, {k: str(v) for k, v in request.args.items()})

    server.add_url_rule("/export/<kind>.<fmt>", "export_figure", export)
