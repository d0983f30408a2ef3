"""What the trace page's Launch and Cancel do on the server: the access token first
(app/access.py), then the launch's validation and the queue (app/launch.py, app/jobs.py), or
the cancellation. Each answers with the sentence the page shows; on any error nothing is
queued or cancelled."""

from __future__ import annotations

from typing import Any

from dash import html

from app import data, published
from app.access import token_problem
from app.jobs import QueueFull, max_queued
from app.launch import LaunchError, validate


def error(text: str) -> html.Span:
    return html.Span(text, className="error", role="alert")


def refused_launch(token: str | None) -> html.Span | None:
    """What the page shows when the token does not allow launching (app/access.py)."""
    problem = token_problem(token)
    return error(f"{problem} Nothing was launched.") if problem else None


def queue(spec: dict[str, Any], label: str) -> int | html.Span:
    """Queue a validated job and see that the runner runs it: the job's id, or, with the queue
    full, what the page shows (nothing queued)."""
    from app.runner import ensure_runner

    try:
        job_id = data.jobs().submit(spec, label, max_queued=max_queued())
    except QueueFull as exc:
        return error(f"{exc} Nothing was launched.")
    ensure_runner(data.store_path())
    return job_id


def submit(form: dict[str, Any], token: str | None = None) -> html.Span:
    """Check the token, validate and queue; the message says what happened."""
    refused = refused_launch(token)
    if refused is not None:
        return refused
    try:
        report, report_traces = published.launchable()
        spec, label = validate(
            form,
            traces=data.catalog(),
            policies=data.policies(),
            peak=data.peak(str(form.get("trace"))),
            report=report,
            report_traces=report_traces,
        )
    except LaunchError as exc:
        return error(str(exc))
    job_id = queue(spec, label)
    if not isinstance(job_id, int):
        return job_id
    return html.Span(f"Queued job #{job_id}: {label}.", className="ok")


def cancel(job_id: int, token: str | None) -> Any:
    """Cancel a queued job, or stop a running one's process, if the token allows it."""
    problem = token_problem(token)
    if problem:
        return error(f"{problem} Job #{job_id} was not cancelled.")
    status = data.jobs().cancel(job_id)
    if status == "cancelled":
        return f"Job #{job_id} cancelled."
    if status == "running":
        return f"Cancelling job #{job_id}: stopping its process."
    return f"Job #{job_id} is {status or 'unknown'}; nothing to cancel."
