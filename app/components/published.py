"""The published report's tables: one row per trace (the README's table), and per trace its
holes, each edge exact to the byte."""

from __future__ import annotations

from typing import Any

from dash import dcc, html

SUMMARY_HEADINGS = (
    "trace",
    "executions",
    "certified 0.05-0.6",
    "holes",
    "failing bytes in holes",
    "widest hole (bytes, ratios)",
    "paper's sampled regions",
    "run time (one process)",
)
HOLE_HEADINGS = (
    "#",
    "first failing byte",
    "last failing byte",
    "width (bytes)",
    "failing executions",
    "statuses",
)


def anchor(trace: str) -> str:
    return f"published-{trace}"


def _table(headings: tuple[str, ...], rows: list[list[Any]], class_name: str) -> html.Table:
    return html.Table(
        [
            html.Thead(html.Tr([html.Th(h) for h in headings])),
            html.Tbody([html.Tr([html.Td(cell) for cell in row]) for row in rows]),
        ],
        className=f"report-table {class_name}",
    )


def summary_table(rows: list[dict[str, Any]]) -> html.Table:
    """The README's table, each trace a link to its holes below."""
    cells = []
    for row in rows:
        widest = row["widest"]
        cells.append(
            [
                html.A(row["trace"], href=f"#{anchor(row['trace'])}"),
                f"{row['executions']:,}",
                f"{row['certified_share']:.4f}",
                f"{row['holes']:,}",
                f"{row['failing_bytes']:,}",
                f"{widest['width']:,} ({widest['first_fail_ratio']:.5f}-"
                f"{widest['last_fail_ratio']:.5f})"
                if widest
                else "-",
                row["paper"],
                row["run_time"],
            ]
        )
    return _table(SUMMARY_HEADINGS, cells, "report-summary")


def _byte(budget: int, peak: int) -> str:
    # six places: a hole is often narrower than 0.0001 of the peak
    return f"{budget:,} ({budget / peak:.6f})" if peak else f"{budget:,}"


def holes_section(entry: dict[str, Any], report_file: str) -> html.Section:
    """One trace's holes, how to check them on this machine, and a link to its stored runs."""
    name, peak, holes = entry["trace"], entry["peak"], entry["holes"]
    rows = [
        [
            i,
            _byte(h["first_fail_byte"], peak),
            _byte(h["last_fail_byte"], peak),
            f"{h['last_fail_byte'] - h['first_fail_byte'] + 1:,}",
            f"{h['intervals']:,}" if isinstance(h.get("intervals"), int) else "-",
            ", ".join(h["statuses"]),
        ]
        for i, h in enumerate(holes, start=1)
    ]
    count = f"{len(holes)} hole{'s' if len(holes) != 1 else ''}"
    return html.Section(
        [
            html.H3([f"{name}: {count} ", dcc.Link("(its stored runs)", href=f"/trace/{name}")]),
            _table(HOLE_HEADINGS, rows, "report-holes") if holes else html.P("No hole."),
            html.P(
                [
                    "Rerun each hole's four edges here: ",
                    html.Code(f"dtr-landscape check-report {report_file} --trace {name}"),
                    ", or launch \u201cthe published holes' edges\u201d on ",
                    dcc.Link("its page", href=f"/trace/{name}"),
                    ": the runs are stored, and its exact holes table compares the sides of "
                    "each hole they prove.",
                ]
            ),
        ],
        id=anchor(name),
        className="card",
    )
