"""A trace's facts (runs, holes, first success, stable-from, exact coverage, exact holes) and
its holes tables: the sampled failure regions, and the holes the walked intervals prove."""

from __future__ import annotations

from typing import Any

from dash import dcc, html
from dash.dash_table.DataTable import DataTable

from app.components.outcomes import fmt_bytes, fmt_ratio
from app.landscape import Coverage, ExactHole, Holes, Region, Sample
from engine.landscape.report import USEFUL_RANGE

HOLE_COLUMNS: tuple[tuple[str, str], ...] = (
    ("region", "#"),
    ("last_ok_below", "last ok below"),
    ("first_fail", "first fail"),
    ("last_fail", "last fail"),
    ("first_ok_above", "first ok above"),
    ("failing_samples", "failing samples"),
    ("exact_width", "exact width (bytes)"),
    ("compare", "why it fails"),
)


EXACT_HOLE_COLUMNS: tuple[tuple[str, str], ...] = (
    ("hole", "#"),
    ("first_fail", "first failing byte"),
    ("last_fail", "last failing byte"),
    ("width", "width (bytes)"),
    ("executions", "failing executions"),
    ("compare", "why it fails"),
)


def unreadable_note(policy: str, error: BaseException, then: str) -> html.P:
    """Said where a trace's runs could not be read: the error's first line (DuckDB's go on with
    the query's text), and what comes next."""
    first = str(error).strip().split("\n", 1)[0].strip() or type(error).__name__
    said = f"Could not read its runs under {policy}: {first}"
    return html.P(f"{said}. {then}", className="note error")


def sample_text(sample: Sample | None) -> str:
    if sample is None:
        return "\u2014"
    return f"{fmt_ratio(sample.ratio)} ({fmt_bytes(sample.budget)})"


GAPS_SHOWN = 3  # the widest gaps a coverage line names


def coverage_text(cov: Coverage, peak: int | None) -> str:
    """The share of the useful range the stored intervals certify (as `holes --all` counts
    it), in how many stretches, the widest gaps left in it, and the walks recorded."""
    if not cov.stretches:
        return "no exact walks" if not cov.walks else "nothing certified yet"
    n = len(cov.stretches)
    text = f"{n:,} certified stretch{'es' if n != 1 else ''}"
    if peak:
        gaps = cov.useful_gaps(peak)
        widest = sorted(sorted(gaps, key=lambda g: g[0] - g[1])[:GAPS_SHOWN])
        left = ", ".join(f"{lo / peak:.4f}..{hi / peak:.4f}" for lo, hi in widest)
        more = f" and {len(gaps) - len(widest):,} more" if len(gaps) > len(widest) else ""
        text = f"{cov.share(peak):.4f} of {USEFUL_RANGE[0]:g}..{USEFUL_RANGE[1]:g} in {text}" + (
            f"; left: {left}{more}" if gaps else ""
        )
    return f"{text}; {cov.walks} walk(s), {cov.complete} complete"


def width_text(region: Region) -> str:
    """A region's exact width, and how much of the inside the stored intervals classify."""
    if region.exact_width is None:
        return "unknown"
    text = f"{region.exact_width:,}"
    if not region.complete:
        return text + " (edges exact, inside not all walked)"
    if region.ok_bytes_inside:
        return text + f" ({region.ok_bytes_inside:,} completing bytes inside)"
    return text


def byte_text(budget: int, peak: int | None) -> str:
    return f"{budget:,} B" + (f" ({budget / peak:.6f})" if peak else "")


def first_success_text(holes: Holes, peak: int | None) -> str:
    """The sampled first success, and the one the walks prove to the byte (an upper bound
    when the bytes just below it are not classified)."""
    text, edges = sample_text(holes.first_success), holes.edges
    if edges.first_success is None:
        return text
    return text + "; " + _edge_text(edges.first_success, edges.failing_from, peak)


def stable_from_text(holes: Holes, peak: int | None) -> str:
    """The sampled stable-from, and the one the walks prove to the byte (an upper bound when
    the bytes just below it are not classified)."""
    text, edges = sample_text(holes.stable_from), holes.edges
    if edges.stable_from is None:
        return text
    text += "; " + _edge_text(edges.stable_from, edges.stable_failing_from, peak) + ", "
    if edges.stable_to is None:
        return text + "every larger budget completes"
    return text + f"every byte up to {byte_text(edges.stable_to, peak)} completes"


def _edge_text(edge: int, failing_from: int | None, peak: int | None) -> str:
    if failing_from is None:
        return f"at most {byte_text(edge, peak)} (the bytes just below it are not classified)"
    return (
        f"exact {byte_text(edge, peak)}, every walked byte below it from "
        f"{byte_text(failing_from, peak)} fails"
    )


def exact_holes_text(holes: Holes, cov: Coverage, peak: int | None) -> str:
    """How many holes the walked intervals prove, their failing bytes, the widest."""
    if not holes.exact:
        return "none in the walked budgets" if cov.stretches or cov.walks else "no exact walks"
    widest = max(holes.exact, key=lambda h: h.width)
    span = ""
    if peak:
        span = f" at {widest.first_fail_byte / peak:.6f}..{widest.last_fail_byte / peak:.6f}"
    return (
        f"{len(holes.exact)}, {sum(h.width for h in holes.exact):,} failing bytes; "
        f"widest {widest.width:,} B{span}"
    )


def facts(holes: Holes, runs: int, cov: Coverage, peak: int | None) -> list[tuple[str, str]]:
    """(label, value) pairs shown for a trace under one policy."""
    widths = [r.exact_width for r in holes.regions if r.exact_width is not None]
    versions = ""
    if holes.other_versions:
        versions = f"; runs of {holes.other_versions} older trace version(s) not counted"
    return [
        (
            "runs",
            f"{runs:,} ({holes.samples:,} sampled ratios at cap {holes.cap:g}, "
            f"{holes.timeouts} timeouts set aside{versions})",
        ),
        ("peak", fmt_bytes(peak)),
        ("first success", first_success_text(holes, peak)),
        (
            "holes",
            f"{len(holes.regions)} region(s), {holes.failing_above_first_success} failing "
            f"sample(s) above first success"
            + (f"; exact widths {', '.join(f'{w:,}' for w in widths)} B" if widths else ""),
        ),
        ("stable from", stable_from_text(holes, peak)),
        ("exact coverage", coverage_text(cov, peak)),
        ("exact holes", exact_holes_text(holes, cov, peak)),
    ]


def facts_list(pairs: list[tuple[str, str]], *, class_name: str = "facts") -> html.Dl:
    children: list[Any] = []
    for label, value in pairs:
        children += [html.Dt(label), html.Dd(value)]
    return html.Dl(children, className=class_name)


def hole_rows(holes: Holes) -> list[dict[str | float | int, Any]]:
    return [
        {
            "region": i,
            "last_ok_below": sample_text(r.last_ok_below),
            "first_fail": sample_text(r.first_fail),
            "last_fail": sample_text(r.last_fail),
            "first_ok_above": sample_text(r.first_ok_above),
            "failing_samples": r.failing_samples,
            "exact_width": width_text(r),
            "first_fail_id": r.first_fail.run_id,
            # a click on this cell opens the compare page: last ok below vs first failure
            "compare": "compare \u25b8",
            "compare_href": f"/compare?a={r.last_ok_below.run_id}&b={r.first_fail.run_id}",
        }
        for i, r in enumerate(holes.regions, start=1)
    ]


def holes_table(holes: Holes, table_id: str) -> DataTable:
    """One row per failure region; clicking a cell opens the region's first failing run,
    clicking its "compare" cell compares it with the last completing run below."""
    return DataTable(
        id=table_id,
        columns=[{"name": label, "id": key} for key, label in HOLE_COLUMNS],
        data=hole_rows(holes),
        sort_action="native",
        style_table={"overflowX": "auto"},
        style_cell={"fontFamily": "inherit", "fontSize": "13px", "padding": "4px 8px"},
        style_header={"fontWeight": "bold"},
    )


def exact_hole_rows(holes: list[ExactHole], peak: int | None) -> list[dict[str | float | int, Any]]:
    return [
        {
            "hole": i,
            "first_fail": byte_text(h.first_fail_byte, peak),
            "last_fail": byte_text(h.last_fail_byte, peak),
            "width": h.width,
            "executions": h.intervals,
            "first_fail_id": h.first_fail,
            # as in the sampled table: the compare page of the ok run just below and the
            # first failing one
            "compare": "compare \u25b8",
            "compare_href": f"/compare?a={h.ok_below}&b={h.first_fail}",
        }
        for i, h in enumerate(holes, start=1)
    ]


# counts stay numbers (so that a click on the header sorts them as numbers), shown grouped like
# the bytes beside them: 44,998,960
GROUPED = ("width", "executions")


def _exact_column(key: str, label: str) -> DataTable.Columns:
    if key not in GROUPED:
        return {"name": label, "id": key}
    return {"name": label, "id": key, "type": "numeric", "format": {"specifier": ","}}


def exact_holes_table(holes: list[ExactHole], table_id: str, peak: int | None) -> DataTable:
    """One row per hole the walked intervals prove (both edges exact to the byte); clicking a
    cell opens its first failing run, clicking "compare" compares it with the ok run below."""
    return DataTable(
        id=table_id,
        columns=[_exact_column(key, label) for key, label in EXACT_HOLE_COLUMNS],
        data=exact_hole_rows(holes, peak),
        sort_action="native",
        page_size=20,
        style_table={"overflowX": "auto"},
        style_cell={"fontFamily": "inherit", "fontSize": "13px", "padding": "4px 8px"},
        style_header={"fontWeight": "bold"},
    )


def trace_card(name: str, title: str, pairs: list[tuple[str, str]], graph: Any) -> html.Section:
    """One trace on the overview: its name (a link to its page), facts and outcome strip."""
    heading = html.H2([dcc.Link(name, href=f"/trace/{name}"), html.Small(f" {title}")])
    return html.Section([heading, facts_list(pairs), graph], className="card", id=f"card-{name}")


def traces_without_runs(names: list[str], policy: str) -> html.Section:
    """The traces with no run under `policy`, as links to their pages (to launch some)."""
    links: list[Any] = []
    for i, name in enumerate(names):
        links += [", " if i else "", dcc.Link(name, href=f"/trace/{name}")]
    return html.Section(
        [html.P([f"No runs under {policy} yet (open one to launch runs): ", *links])],
        className="card empty",
    )
