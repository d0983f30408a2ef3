"""Home page: a placeholder until the landscape views land, listing the known traces."""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path

import dash
from dash import html

from app.components.trace_list import TraceEntry, trace_list

dash.register_page(__name__, path="/", name="Home", title="DTR landscape")

TRACES_ENV = "DTR_LANDSCAPE_TRACES"
DTR_TRACES_HINT = (
    "The DTR traces are not available: set DTR_LANDSCAPE_TRACES to the folder of the DTR "
    "logs (simrd/logs.zip of uwsampl/dtr-prototype)."
)


def _dtr_traces(folder: Path) -> list[TraceEntry]:
    """The DTR logs in `folder`, named by its traces.json manifest when it has one."""
    manifest = folder / "traces.json"
    if manifest.is_file():
        entries = json.loads(manifest.read_text(encoding="utf-8"))["traces"]
        return [TraceEntry(e["name"], e.get("title", ""), "DTR artifact") for e in entries]
    return [
        TraceEntry(path.name.split("-")[0], "", "DTR artifact")
        for path in sorted(folder.glob("*.log"))
    ]


def _shipped_traces() -> list[TraceEntry]:
    """The synthetic traces shipped inside the `traces` package (found without importing it)."""
    spec = importlib.util.find_spec("traces")
    folders = spec.submodule_search_locations if spec and spec.submodule_search_locations else []
    # An editable install adds a path-hook entry to the search locations; keep real folders.
    logs = sorted({log.name for f in folders if Path(f).is_dir() for log in Path(f).glob("*.log")})
    return [TraceEntry(name.removesuffix(".log"), "synthetic", "shipped") for name in logs]


def _dtr_folder() -> Path | None:
    folder = os.environ.get(TRACES_ENV)
    return Path(folder) if folder and Path(folder).is_dir() else None


def layout(**_query: object) -> html.Div:
    """The page, built per request; stray query-string values are accepted and ignored."""
    folder = _dtr_folder()
    dtr = _dtr_traces(folder) if folder else []
    children = [
        html.P("The feasibility-landscape dashboard is coming. Known traces:"),
        trace_list(dtr + _shipped_traces()),
    ]
    if not dtr:
        children.append(html.P(DTR_TRACES_HINT))
    return html.Div(children)
