"""Walks running on the store now, from their claims: those started from the command line
(or on another host sharing the store) as well as the dashboard's own jobs."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from dash import dcc, html

from engine.landscape.walk_claims import WalkClaim, describe_walk


def running_walks_note(
    claims: Sequence[WalkClaim] | None,
    *,
    job_by_pid: Mapping[int, int],
    peaks: Mapping[str, int | None],
    progress: Mapping[str, dict[str, Any] | None] | None = None,
    link_traces: bool = False,
) -> html.Div | None:
    """One line per running walk: its policy, cap, budgets still to walk when it started
    (ratios of its trace's peak in `peaks`), process and start, and its last progress note
    (`progress`, by walk id); `job_by_pid` names the dashboard's job a walk belongs to;
    `link_traces`: each line begins with a link to its trace's page (the overview). None when
    no walk runs; `claims` None: they could not be read this time."""
    if claims is None:
        return html.Div(
            html.P(
                "The walks running on this store cannot be read just now (a walk holds their "
                "lock); the next refresh tries again.",
                className="note",
            ),
            className="running-walks",
        )
    if not claims:
        return None
    items = []
    for claim in claims:
        job = job_by_pid.get(claim.pid)
        origin = f"job #{job}" if job is not None else "started outside this dashboard"
        note = (progress or {}).get(claim.walk_id)
        text = f"{describe_walk(claim, note, peaks.get(claim.trace))}; {origin}"
        link = dcc.Link(claim.trace, href=f"/trace/{claim.trace}") if link_traces else None
        items.append(
            html.Li(
                [link, ": ", text] if link else text,
                className="running-walk",
                title=f"walk {claim.walk_id}",
            )
        )
    return html.Div(
        [
            html.P(
                "Walking now on this store (another walk of these budgets under the same "
                "policy and cap is refused until it ends):",
                className="note",
            ),
            html.Ul(items),
        ],
        className="running-walks",
    )
