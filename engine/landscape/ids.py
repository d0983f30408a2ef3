"""What a run id may be, and the paths derived from one.

A run id names files (the dashboard's event logs are `events/<run_id>.parquet`), and an
imported one starts as free text in someone else's file, so every id the store accepts is
checked here: the importers reject a file with a bad id, the store refuses to publish one,
and a path built from an id is verified to stay inside its folder.

A run id is one or more segments joined by ':' (imports namespace theirs as
`evidence:<file tag>:<id>`); a segment is 1 to 128 letters, digits, '_', '.' or '-', starting
with a letter or digit, never containing '..'. No '/', '\\', NUL or whitespace can appear, so
an id is always one plain file name.
"""

from __future__ import annotations

import re
from pathlib import Path

SEGMENT = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")
MAX_RUN_ID = 255
EXPECTED_RUN_ID = (
    "1 to 128 letters, digits, '_', '.' or '-' starting with a letter or digit, "
    "without '..' (segments may be joined by ':')"
)


class RunIdError(ValueError):
    """Not a run id; the message says what was expected."""


def is_run_id(text: object) -> bool:
    if not isinstance(text, str) or not 0 < len(text) <= MAX_RUN_ID:
        return False
    return all(SEGMENT.fullmatch(part) and ".." not in part for part in text.split(":"))


def check_run_id(text: object) -> str:
    """`text` when it is a run id, else RunIdError naming what was expected."""
    if isinstance(text, str) and is_run_id(text):
        return text
    shown = repr(text[:80]) + "..." if isinstance(text, str) and len(text) > 80 else repr(text)
    raise RunIdError(f"expected a run id of {EXPECTED_RUN_ID}, got {shown}")


class PathEscapeError(ValueError):
    """A derived path that would leave its folder."""


def inside(folder: str | Path, name: str) -> Path:
    """`folder / name`, resolved, verified to be a file name directly inside `folder` (after
    following any symbolic link on the way), else PathEscapeError."""
    base = Path(folder).resolve()
    target = (base / name).resolve()
    if target.parent != base:
        raise PathEscapeError(f"{name!r} would leave the folder {base}")
    return target
