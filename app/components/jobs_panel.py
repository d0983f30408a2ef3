"""The jobs panel: queued, running and finished jobs of a trace, with cancel buttons."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from dash import html

from app.jobs import ACTIVE, Job


def _seconds(value: float | None) -> str:
    if value is None:
        return "\u2014"
    minutes, seconds = divmod(int(round(value)), 60)
    return f"{minutes}m{seconds:02d}s" if minutes else f"{seconds}s"


def _progress(job: Job) -> str:
    if job.total:
        return f"{job.done}/{job.total}"
    return f"{job.done}/?" if job.status == "running" else "\u2014"


def jobs_panel(
    jobs: Sequence[Job],
    *,
    now: float,
    runner_alive: bool,
    cancel_type: str,
    answers: Mapping[int, str] | None = None,
) -> html.Div:
    """A table of jobs; active ones have a cancel button with id {type: cancel_type, job: id}.
    `answers`: what a finished job found that the store does not show (an estimate, an
    audit's verdict), by id."""
    notes = []
    if not runner_alive and any(j.status == "queued" for j in jobs):
        notes.append(
            html.P("No job runner is running yet; queued jobs wait for it.", className="note")
        )
    if not jobs:
        return html.Div([html.P("No jobs yet.")], className="jobs")
    header = html.Tr(
        [
            html.Th(h)
            for h in ("job", "what", "status", "progress", "now at", "elapsed", "ETA", "pid", "")
        ]
    )
    rows = []
    for job in jobs:
        detail = job.error or ""
        answer = (answers or {}).get(job.id)
        cancel = (
            html.Button(
                "Cancel",
                id={"type": cancel_type, "job": job.id},
                n_clicks=0,
                className="cancel",
                title=f"cancel job {job.id}",
            )
            if job.status in ACTIVE
            else ""
        )
        log = (
            html.Details([html.Summary("log"), html.Pre(job.log_tail)], className="log")
            if job.log_tail
            else ""
        )
        rows.append(
            html.Tr(
                [
                    html.Td(f"#{job.id}"),
                    html.Td(
                        [
                            job.label,
                            html.Br() if detail else "",
                            html.Small(detail),
                            html.P(answer, className="answer") if answer else "",
                            log,
                        ]
                    ),
                    html.Td(job.status, className=f"status status-{job.status}"),
                    html.Td(_progress(job)),
                    html.Td(job.current or "\u2014"),
                    html.Td(_seconds(job.elapsed(now))),
                    html.Td(_seconds(job.eta(now))),
                    html.Td(str(job.pid) if job.pid else "\u2014", className="pid"),
                    html.Td(cancel),
                ],
                id=f"job-row-{job.id}",
                className=f"job job-{job.status}",
            )
        )
    return html.Div([*notes, html.Table([html.Thead(header), html.Tbody(rows)])], className="jobs")
