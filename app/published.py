"""The published landscape report the dashboard shows on /published: `holes --all --json` of
the project's walks (docs/landscapes.json in a checkout, or the file DTR_LANDSCAPE_REPORT
names). Read when the page asks, checked by the reader `check-report` uses
(engine/landscape/report_check.py), summarized as the README's table is
(engine/landscape/report.py, summary_rows), and kept while the file is unchanged."""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.landscape.report import summary_rows
from engine.landscape.report_check import ReportError, read_report

REPORT_ENV = "DTR_LANDSCAPE_REPORT"
CHECKOUT_REPORT = Path(__file__).resolve().parent.parent / "docs" / "landscapes.json"


@dataclass(frozen=True)
class Published:
    path: Path
    error: str | None = None  # why the file is not shown (its field and what was expected)
    report: dict[str, Any] = field(default_factory=dict)
    rows: list[dict[str, Any]] = field(default_factory=list)  # summary_rows of the report


def report_path() -> Path | None:
    """DTR_LANDSCAPE_REPORT, else a checkout's docs/landscapes.json, else None."""
    named = os.environ.get(REPORT_ENV)
    if named:
        return Path(named)
    return CHECKOUT_REPORT if CHECKOUT_REPORT.is_file() else None


_kept: tuple[tuple[str, int, int], Published] | None = None  # one report: the newest read
_lock = threading.Lock()


def load() -> Published | None:
    """The report to show, or None when there is none to look for."""
    global _kept
    path = report_path()
    if path is None:
        return None
    try:
        stat = path.stat()
    except OSError as exc:
        return Published(path, f"{path}: cannot read it ({exc.strerror or exc})")
    key = (str(path), stat.st_mtime_ns, stat.st_size)
    with _lock:
        if _kept is not None and _kept[0] == key:
            return _kept[1]
    try:
        report = read_report(path).data  # every field it states checked, or one error
        published = Published(path, None, report, summary_rows(report))
    except ReportError as exc:
        published = Published(path, str(exc))
    with _lock:
        _kept = (key, published)
    return published


def launchable() -> tuple[str | None, list[str]]:
    """The report whose holes' edges the launch form may check, and its traces."""
    shown = load()
    if shown is None or shown.error is not None:
        return None, []
    return str(shown.path), [str(t["trace"]) for t in shown.report["traces"]]
