"""Cache of parsed traces and their unconstrained baselines, keyed by the file's SHA-256.

A trace's identity is its content's hash, so a changed file is simply a different key: the
cache can never serve a stale parse. Entries are written to a temporary file and renamed,
so concurrent runs (sweeps) never read a half-written entry.
"""

from __future__ import annotations

import os
import pickle
import tempfile
from pathlib import Path
from typing import Any

from engine.sim.trace import Program, parse_file, sha256_of

CACHE_ENV = "DTR_LANDSCAPE_CACHE"
FORMAT = 2  # bump when Program's layout or module path changes (2: engine.sim.trace)


def cache_dir() -> Path:
    value = os.environ.get(CACHE_ENV)
    if value:
        return Path(value)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "dtr-landscape"


def _entry(sha256: str, kind: str) -> Path:
    return cache_dir() / f"{sha256}.{kind}.v{FORMAT}.pickle"


def _load(path: Path) -> Any | None:
    try:
        with open(path, "rb") as f:
            return pickle.load(f)
    except (OSError, pickle.UnpicklingError, EOFError, AttributeError, ValueError, ImportError):
        return None  # missing, unreadable or from another layout: recompute


def _store(path: Path, value: Any) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
        with os.fdopen(fd, "wb") as f:
            pickle.dump(value, f, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(tmp, path)
    except OSError:
        pass  # a read-only cache only costs speed


def load_program(path: str | os.PathLike[str], name: str = "") -> Program:
    """The parsed trace, from the cache when its content was parsed before."""
    sha = sha256_of(path)
    entry = _entry(sha, "program")
    cached = _load(entry)
    if isinstance(cached, Program) and cached.sha256 == sha:
        if name:
            cached.name = name
        return cached
    program = parse_file(path, name=name)
    _store(entry, program)
    return program


def load_baseline(sha256: str) -> dict[str, int] | None:
    cached = _load(_entry(sha256, "baseline"))
    return cached if isinstance(cached, dict) else None


def store_baseline(sha256: str, baseline: dict[str, int]) -> None:
    _store(_entry(sha256, "baseline"), baseline)
