"""Finding traces: by path, or by name in the traces directory or among the shipped ones.

The traces directory comes from `--traces DIR` or `DTR_LANDSCAPE_TRACES`. When it holds a
`traces.json` manifest (as the DTR artifact's logs do here), its short names are used:
resnet32, inceptionv4, unet, transformer, densenet121, treelstm, lstm, unrolled_gan.
The synthetic traces shipped in the `traces` package are always available.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

TRACES_ENV = "DTR_LANDSCAPE_TRACES"
# the top-level `traces` package, beside `engine` (in a checkout and in site-packages alike)
SHIPPED_DIR = Path(__file__).resolve().parents[2] / "traces"


class TraceNotFound(LookupError):
    pass


@dataclass(frozen=True)
class TraceRef:
    name: str
    path: Path
    source: str  # "dtr" (the traces directory), "shipped" or "path"
    expected_sha256: str | None = None


def traces_dir(explicit: str | os.PathLike[str] | None = None) -> Path | None:
    value = explicit if explicit is not None else os.environ.get(TRACES_ENV)
    if not value:
        return None
    path = Path(value)
    if not path.is_dir():
        raise TraceNotFound(f"traces directory {path} does not exist")
    return path


def _manifest(folder: Path) -> dict[str, dict]:
    manifest = folder / "traces.json"
    if not manifest.is_file():
        return {}
    try:
        entries = json.loads(manifest.read_text(encoding="utf-8"))["traces"]
        return {e["file"]: e for e in entries}
    except (ValueError, KeyError, TypeError) as exc:
        raise TraceNotFound(f"{manifest}: not a traces manifest ({exc})") from None


def _name_for(path: Path, manifest: dict[str, dict]) -> tuple[str, str | None]:
    entry = manifest.get(path.name)
    if entry is not None:
        return entry["name"], entry.get("sha256")
    return path.stem, None


def available(explicit_dir: str | os.PathLike[str] | None = None) -> list[TraceRef]:
    """Every trace we can name: the traces directory's, then the shipped ones."""
    refs: list[TraceRef] = []
    folder = traces_dir(explicit_dir)
    if folder is not None:
        manifest = _manifest(folder)
        for path in sorted(folder.glob("*.log")):
            name, sha = _name_for(path, manifest)
            refs.append(TraceRef(name, path, "dtr", sha))
    for path in sorted(SHIPPED_DIR.glob("*.log")):
        refs.append(TraceRef(path.stem, path, "shipped"))
    return refs


def resolve(spec: str, explicit_dir: str | os.PathLike[str] | None = None) -> TraceRef:
    """A trace by file path or by name; unknown names get the list of known ones."""
    candidate = Path(spec)
    if candidate.suffix == ".log" or os.sep in spec:
        if not candidate.is_file():
            raise TraceNotFound(f"trace file {spec} does not exist")
        name, sha = _name_for(candidate, _manifest(candidate.resolve().parent))
        return TraceRef(name, candidate, "path", sha)
    refs = available(explicit_dir)
    for ref in refs:
        if ref.name == spec:
            return ref
    known = ", ".join(ref.name for ref in refs) or "none"
    hint = (
        ""
        if traces_dir(explicit_dir)
        else f" (set {TRACES_ENV} or --traces DIR for the DTR traces)"
    )
    raise TraceNotFound(f"unknown trace {spec!r}; known traces: {known}{hint}")
