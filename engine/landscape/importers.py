"""Bringing outside data into the store, and tables out of it.

    dtr-landscape import-traces DIR|logs.zip [--db PATH]
    dtr-landscape import-records FILE [FILE ...] [--format evidence|pareto|runs] [--source TAG]
                  [--traces DIR] [--db PATH]
    dtr-landscape export [--table runs|intervals|traces|walks] (--csv FILE | --parquet FILE)
                  [--trace T] [--except EXPORT ...] [--db PATH]

Imports are all-or-nothing: every input is checked first, then the new rows are published as
ONE store part (a part is either absent or complete), so a rejected input leaves the store as
it was. Identities make them idempotent: a trace is its content's SHA-256, an imported run's id
is derived from its file's content (engine/landscape/record_files.py), and what is already in
the store is skipped. Each command prints a one-line JSON summary (import-records, one per file).
"""

from __future__ import annotations

import hashlib
import json
import os
import uuid
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine.landscape.ids import RunIdError, check_run_id
from engine.landscape.record_files import (
    EXCLUDED_PREFIX,
    RecordFileError,
    TraceInfo,
    canonical_trace_name,
    name_from_file,
    read_evidence,
)
from engine.landscape.simrd_pareto import read_pareto

if TYPE_CHECKING:
    import pandas as pd

    from engine.landscape.store import Store

MANIFEST_NAMES = ("traces.json", "manifest.json")  # ours, and simrd's inside logs.zip
EXPORT_TABLES = ("runs", "intervals", "traces", "walks")

# intervals: each run's same-execution interval [same_lo, same_hi], in budget order within each
# (trace, policy, cap) landscape.
INTERVALS_SQL = (
    "SELECT trace, trace_sha256, policy, cap, budget, same_lo, same_hi, status, overhead, run_id "
    "FROM runs WHERE same_lo IS NOT NULL{filter} ORDER BY trace, policy, cap, budget, run_id"
)
_EXPORT_SQL = {
    "runs": "SELECT * FROM runs{where} ORDER BY trace, policy, budget, run_id",
    "traces": "SELECT * FROM traces{where} ORDER BY name, sha256",
    "walks": "SELECT * FROM walks{where} ORDER BY trace, policy, from_budget, walk_id",
}
_TRACE_FILTER = {
    "runs": "(trace = ? OR trace_sha256 = ?)",
    "intervals": "(trace = ? OR trace_sha256 = ?)",
    "traces": "(name = ? OR sha256 = ?)",
    "walks": "(trace = ? OR trace_sha256 = ?)",
}


# -- import-traces ------------------------------------------------------------------------------
@dataclass
class _Log:
    display: str  # how messages name it: a path, or "logs.zip:logs/x.log"
    file_name: str
    sha256: str
    path: Path  # where it is read from: the file itself, or a zip member's temporary copy
    staged: bool = False  # a temporary copy, moved to its content address once all are valid


def import_traces(store: Store, source: str | os.PathLike[str]) -> dict[str, Any]:
    """Register every log of a folder or a logs.zip that the traces table lacks."""
    import pandas as pd

    from engine.sim.catalog import TraceRef
    from engine.sim.simulate import baseline, load
    from engine.sim.trace import TraceError

    origin = Path(source)
    registered = set(store.query("SELECT sha256 FROM traces")["sha256"])
    content_dir = _content_dir(store)
    logs: list[_Log] = []
    try:
        if origin.is_dir():
            names = _folder_logs(origin, logs)
        elif zipfile.is_zipfile(origin):
            names = _zip_logs(origin, content_dir, registered, logs)
        else:
            what = "neither a folder of DTR logs nor a zip" if origin.exists() else "no such file"
            raise ValueError(f"{origin}: {what}")
        if not logs:
            raise ValueError(f"{origin}: no *.log files (expected DTR logs, as in logs.zip)")
        new: list[tuple[_Log, dict[str, Any]]] = []
        skipped, seen = [], set(registered)
        for log in logs:
            if log.sha256 in seen:
                skipped.append({"file": log.file_name, "sha256": log.sha256})
                continue
            seen.add(log.sha256)
            name, expected = names.get(log.file_name, (name_from_file(log.file_name), None))
            if expected is not None and expected != log.sha256:
                raise ValueError(f"{log.display}: SHA-256 {log.sha256} is not its manifest's")
            try:
                _, program = load(TraceRef(name, log.path, "path"))
                base = baseline(program)
            except TraceError as exc:  # name the log as the user knows it, not a temporary copy
                raise TraceError(log.display, exc.line, exc.problem) from None
            row = {
                "sha256": log.sha256,
                "name": name,
                "peak": base.peak,
                "model_compute": base.model_compute,
                "operators": program.n_ops,
                "source": str(origin.resolve()),
                "path": str(log.path.resolve()),
            }
            new.append((log, row))
        # Every log is valid: give the zip's their content address, then publish one part.
        for log, row in new:
            if log.staged:
                final = content_dir / f"{log.sha256}.log"
                os.replace(log.path, final)
                row["path"] = str(final)
        if new:
            now = pd.Timestamp.now()
            store.add_rows("traces", [{**row, "registered_at": now} for _, row in new])
    finally:
        for log in logs:
            if log.staged:
                log.path.unlink(missing_ok=True)
    return {
        "source": str(origin),
        "registered": [{k: row[k] for k in ("name", "sha256", "path")} for _, row in new],
        "skipped": skipped,
    }


def _content_dir(store: Store) -> Path:
    """Where extracted logs live, named by their SHA-256: beside the store (data/traces/)."""
    return store.path.resolve().parent / "traces"


def _folder_logs(origin: Path, logs: list[_Log]) -> dict[str, tuple[str, str | None]]:
    from engine.sim.trace import sha256_of

    # an unpacked artifact keeps its logs in logs/
    folder = origin / "logs" if not any(origin.glob("*.log")) else origin
    names: dict[str, tuple[str, str | None]] = {}
    for manifest in MANIFEST_NAMES[::-1]:  # ours wins over simrd's
        if (folder / manifest).is_file():
            text = (folder / manifest).read_text(encoding="utf-8")
            names.update(_manifest_names(text, str(folder / manifest)))
    for path in sorted(folder.glob("*.log")):
        logs.append(_Log(str(path), path.name, sha256_of(path), path))
    return names


def _zip_logs(
    origin: Path, content_dir: Path, registered: set[str], logs: list[_Log]
) -> dict[str, tuple[str, str | None]]:
    names: dict[str, tuple[str, str | None]] = {}
    beside = origin.parent / "traces.json"
    content_dir.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(origin) as archive:
        members = sorted(archive.namelist())
        for manifest in MANIFEST_NAMES[::-1]:
            for member in members:
                if member.rsplit("/", 1)[-1] == manifest:
                    text = archive.read(member).decode("utf-8")
                    names.update(_manifest_names(text, f"{origin}:{member}"))
        if beside.is_file():
            names = {**_manifest_names(beside.read_text(encoding="utf-8"), str(beside)), **names}
        for member in members:
            if not member.endswith(".log") or member.endswith("/"):
                continue
            data = archive.read(member)
            sha = hashlib.sha256(data).hexdigest()
            display, file_name = f"{origin}:{member}", member.rsplit("/", 1)[-1]
            if sha in registered:
                logs.append(_Log(display, file_name, sha, content_dir / f"{sha}.log"))
                continue
            # written under a temporary name: a log is never at its content address unchecked
            tmp = content_dir / f".{sha}.{uuid.uuid4().hex[:8]}.tmp"
            logs.append(_Log(display, file_name, sha, tmp, staged=True))
            tmp.write_bytes(data)
    return names


def _manifest_names(text: str, where: str) -> dict[str, tuple[str, str | None]]:
    """file name -> (trace name, expected SHA-256) from our traces.json or simrd's manifest."""
    try:
        doc = json.loads(text)
        if "traces" in doc:
            return {e["file"]: (e["name"], e.get("sha256")) for e in doc["traces"]}
        return {
            Path(m["log"]).name: (canonical_trace_name(m["name"]) or name_from_file(m["log"]), None)
            for m in doc["models"]
        }
    except (ValueError, KeyError, TypeError) as exc:
        raise ValueError(
            f"{where}: not a traces manifest (expected traces[].file and .name, or "
            f"models[].log and .name): {type(exc).__name__} {exc}"
        ) from None


# -- import-records -----------------------------------------------------------------------------
def known_traces(store: Store, traces: str | None = None) -> dict[str, TraceInfo]:
    """Trace names we can give a SHA-256: the traces manifest, then the store's traces table
    (which also knows peak and model compute), preferring a registration matching the manifest."""
    from engine.sim.catalog import traces_dir

    known: dict[str, TraceInfo] = {}
    folder = traces_dir(traces)
    if folder is not None and (folder / "traces.json").is_file():
        text = (folder / "traces.json").read_text(encoding="utf-8")
        for name, sha in _manifest_names(text, str(folder / "traces.json")).values():
            known[name] = TraceInfo(name, sha)
    table = store.query("SELECT name, sha256, peak, model_compute FROM traces ORDER BY sha256")
    for row in table.itertuples(index=False):
        name = str(row.name)
        if name not in known or known[name].sha256 in (None, row.sha256):
            known[name] = TraceInfo(name, str(row.sha256), int(row.peak), int(row.model_compute))
    return known


def import_records(
    store: Store,
    files: Sequence[str | os.PathLike[str]],
    fmt: str | None = None,
    source: str | None = None,
    traces: str | None = None,
) -> list[dict[str, Any]]:
    """Import record files' runs, one summary each; rows whose run id the store has (or an
    earlier file of the same call) are skipped. Every file is read and checked before any row
    is stored, and all their new rows go in as one part: a bad file stores nothing of any.
    A runs export of this tool (`export --parquet`) keeps its runs' own sources unless `source`
    is given."""
    read = [_read_record_file(store, Path(file), fmt, source, traces) for file in files]
    ids = [row["run_id"] for _, _, _, rows in read for row in rows]
    have = set(
        # a semi-join, not list_contains: a walk's export holds 10^5 runs, and so may the store
        store.query("SELECT run_id FROM runs WHERE run_id IN (SELECT unnest(?::VARCHAR[]))", [ids])[
            "run_id"
        ]
    )
    summaries, new = [], []
    for path, file_fmt, tag, rows in read:
        fresh = []
        for row in rows:
            if row["run_id"] not in have:
                have.add(row["run_id"])
                fresh.append(row)
        new += fresh
        statuses: dict[str, int] = {}
        for row in rows:
            statuses[row["status"]] = statuses.get(row["status"], 0) + 1
        summaries.append(
            {
                "file": str(path),
                "format": file_fmt,
                "source": tag,
                "rows": len(rows),
                "imported": len(fresh),
                "already_imported": len(rows) - len(fresh),
                "excluded": sum(1 for r in rows if (r["stage"] or "").startswith(EXCLUDED_PREFIX)),
                "statuses": statuses,
            }
        )
    store.add_rows("runs", new)  # one part: all of the files' new runs or none
    return summaries


def _read_record_file(
    store: Store, path: Path, fmt: str | None, source: str | None, traces: str | None
) -> tuple[Path, str, str, list[dict[str, Any]]]:
    """One record file's rows, checked: (path, format, source tag, rows)."""
    # here, not at the top: Arrow would load with every command's parser (tests/test_layers.py)
    from engine.landscape.runs_file import is_parquet, is_runs_csv, read_runs

    try:
        data = path.read_bytes()
    except OSError as exc:
        raise RecordFileError(f"{path}: cannot read ({exc.strerror})") from None
    if fmt is None:
        suffix = path.suffix.lower()
        looks_json = data.lstrip()[:1] in (b"{", b"[")
        if suffix == ".parquet" or is_parquet(data):
            fmt = "runs"
        else:
            fmt = "pareto" if suffix == ".json" or (suffix != ".csv" and looks_json) else "evidence"
    if fmt == "evidence" and is_runs_csv(data):
        raise RecordFileError(
            f"{path}: a runs export in CSV; import runs from `dtr-landscape export --parquet "
            "FILE` instead (CSV does not keep a null apart from empty text)"
        )
    if fmt == "runs":
        tag = source or "as exported"
        rows = read_runs(str(path), data, source or None)
    else:
        tag = source or f"import:{fmt}:{path.name}"
        reader = read_pareto if fmt == "pareto" else read_evidence
        rows = reader(str(path), data, known_traces(store, traces), tag)
    for row in rows:  # the readers build ids from the file; none may name a path elsewhere
        try:
            check_run_id(row["run_id"])
        except RunIdError as exc:
            raise RecordFileError(f"{path}: run_id: {exc}") from None
    return path, fmt, tag, rows


# -- export -------------------------------------------------------------------------------------
def _export_sql(table: str, trace: str | None) -> tuple[str, list[str]]:
    if table not in EXPORT_TABLES:
        raise ValueError(f"unknown table {table!r} (expected one of {', '.join(EXPORT_TABLES)})")
    params = [trace, trace] if trace is not None else []
    if table == "intervals":
        clause = f" AND {_TRACE_FILTER[table]}" if trace is not None else ""
        return INTERVALS_SQL.format(filter=clause), params
    clause = f" WHERE {_TRACE_FILTER[table]}" if trace is not None else ""
    return _EXPORT_SQL[table].format(where=clause), params


def intervals(store: Store, trace: str | None = None) -> pd.DataFrame:
    """Every run's same-execution interval, in budget order within each landscape."""
    return store.query(*_export_sql("intervals", trace))


def export_table(
    store: Store,
    target: str | os.PathLike[str],
    table: str = "runs",
    trace: str | None = None,
    except_files: Sequence[str | os.PathLike[str]] = (),
) -> int:
    """Write a table (optionally one trace's rows) to CSV or Parquet, by the target's suffix,
    atomically; returns the row count. `except_files`, earlier runs exports, leave their runs
    out: a walk's runs carried from store to store travel as parts, each only what is new."""
    path = Path(target)
    if not path.parent.is_dir():
        raise ValueError(f"{path}: folder {path.parent} does not exist")
    sql, trace_params = _export_sql(table, trace)
    params: list[Any] = list(trace_params)
    if except_files:
        if table != "runs":
            raise ValueError(f"--except: leaves runs out, not {table} (use it with --table runs)")
        # read and checked as an import reads a runs export
        exports = [
            _read_record_file(store, Path(file), "runs", None, None) for file in except_files
        ]
        known = [row["run_id"] for *_, rows in exports for row in rows]
        # the WHERE of the runs query, extended; a semi-join keeps 10^5 ids cheap
        keep = "run_id NOT IN (SELECT unnest(?::VARCHAR[]))"
        where = (
            f" WHERE {_TRACE_FILTER[table]} AND {keep}" if trace is not None else f" WHERE {keep}"
        )
        sql, params = _EXPORT_SQL[table].format(where=where), [*params, known]
    return store.export_query(path, sql, params)
