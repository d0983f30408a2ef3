"""Reading a DTR log's lines and fields, each problem a `TraceError` with a one-line message
`FILE:LINE: problem` (engine/sim/trace.py builds the replay Program from what this reads).

Lines are the file's `\n`-separated lines, as an editor numbers them. Numbers must be what
the logs write (decimal integers, as JSON strings or numbers) and sizes and times fit the
engine's 64-bit counters with room to add them up (`MAX_VALUE`).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

KNOWN_INSTRUCTIONS = (
    "ANNOTATE",
    "CONSTANT",
    "MEMORY",
    "COPY",
    "RELEASE",
    "CALL",
    "MUTATE",
    "COPY_FROM",
    "ALIAS",
)


_KNOWN = ", ".join(KNOWN_INSTRUCTIONS)
# Every MEMORY and TIME value, and each of their totals over the trace, is at most 2**53:
# exact as a double, and sums of them (the clock, memory in use) fit in 64 bits with room
# for rematerializations up to a thrash cap in the hundreds.
MAX_VALUE = 2**53
_INTEGER = re.compile(r"-?[0-9]+")
_SHOWN = 60  # characters of an offending value quoted in a message


def show(value: object) -> str:
    """A value for a one-line message: its repr, cut short (a corrupt line can be huge)."""
    text = repr(value)
    return text if len(text) <= _SHOWN else text[: _SHOWN - 3] + "..."


class TraceError(ValueError):
    """A trace file that cannot be replayed; the message names file, line and problem."""

    def __init__(self, path: str | Path, line: int | None, problem: str) -> None:
        where = f"{path}:{line}" if line is not None else str(path)
        super().__init__(f"{where}: {problem}")
        self.path = str(path)
        self.line = line
        self.problem = problem


class Lines:
    """The trace's decoded lines with their 1-based numbers, read front to back."""

    def __init__(self, path: str | Path, text: str) -> None:
        self.path = path
        self.items: list[tuple[int, dict]] = []
        # Only "\n" ends a line (str.splitlines also splits at \r, \x1c, \u2028, ...,
        # which would number lines differently from the file).
        raws = text.split("\n")
        if raws and raws[-1] == "":
            raws.pop()
        for number, raw in enumerate(raws, start=1):
            if not raw.strip():
                continue
            obj = decode(path, number, raw)
            if not isinstance(obj, dict):
                raise TraceError(path, number, "expected a JSON object")
            instr = obj.get("INSTRUCTION")
            if instr is None:
                raise TraceError(path, number, "missing field INSTRUCTION")
            if not isinstance(instr, str) or instr not in KNOWN_INSTRUCTIONS:
                raise TraceError(
                    path,
                    number,
                    f"unknown instruction {show(instr)} (expected one of {_KNOWN})",
                )
            self.items.append((number, obj))
        self.pos = 0
        self.last_line = max(1, len(raws))

    def done(self) -> bool:
        return self.pos >= len(self.items)

    def next(self) -> tuple[int, dict]:
        item = self.items[self.pos]
        self.pos += 1
        return item


def decode(path: str | Path, line: int, raw: str) -> object:
    try:
        return json.loads(raw)
    except json.JSONDecodeError as exc:
        raise TraceError(path, line, f"invalid JSON ({exc.msg})") from None
    except ValueError:  # an integer literal longer than Python converts (4,300 digits)
        raise TraceError(path, line, "invalid JSON (a number with too many digits)") from None
    except RecursionError:
        raise TraceError(path, line, "invalid JSON (nested too deeply)") from None


def required_field(path: str | Path, line: int, obj: dict, key: str) -> object:
    if key not in obj:
        raise TraceError(path, line, f"{obj['INSTRUCTION']} line is missing field {key}")
    return obj[key]


def integer(value: object) -> int | None:
    """A decimal integer as the logs write one ("1728", or 0 in a MUTATE list), else None.
    Stricter than int(): no floats, booleans, spaces, underscores or non-ASCII digits."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and len(value) <= 20 and _INTEGER.fullmatch(value):
        return int(value)
    return None


def int_field(path: str | Path, line: int, obj: dict, key: str, lowest: int = 0) -> int:
    """An integer field in lowest..MAX_VALUE (sizes and times are never negative)."""
    value = required_field(path, line, obj, key)
    number = integer(value)
    if number is None or not lowest <= number <= MAX_VALUE:
        raise TraceError(
            path,
            line,
            f"field {key} must be an integer in {lowest}..{MAX_VALUE}, got {show(value)}",
        )
    return number
