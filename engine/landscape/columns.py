"""Plain Python values as Arrow columns of the store's declared types (a Parquet part's).

The columns are built from their buffers (validity bits, values, string offsets) instead of
`pyarrow.array`, because pyarrow's conversion of Python objects imports pandas first, and
that import was half a second of every walk and sweep, which write parts and never need it.
The checks below are the conversion's contract: a value of the wrong type is refused with
its column and row, never truncated or coerced into something else.
"""

from __future__ import annotations

import array
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

import pyarrow as pa

ARROW_TYPES = {
    "VARCHAR": pa.string(),
    "BIGINT": pa.int64(),
    "DOUBLE": pa.float64(),
    "TIMESTAMP": pa.timestamp("us"),
    "BOOLEAN": pa.bool_(),
}

_EPOCH = datetime(1970, 1, 1)
_ONE_US = datetime(1970, 1, 1, 0, 0, 0, 1) - _EPOCH
_INT64 = (-(2**63), 2**63 - 1)


class ColumnError(ValueError):
    """A value that its column's type cannot hold (the message says which and where)."""


def _bigint(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError
    if isinstance(value, float) and not value.is_integer():
        raise TypeError  # a fraction in a whole-number column is a caller's bug
    number = int(value)
    if not _INT64[0] <= number <= _INT64[1]:
        raise OverflowError
    return number


def _double(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError
    return float(value)


def _microseconds(value: Any) -> int:
    if not isinstance(value, datetime):
        raise TypeError
    if value.tzinfo is not None:  # an aware time is stored as its UTC wall clock
        value = value.astimezone(UTC).replace(tzinfo=None)
    return (value - _EPOCH) // _ONE_US


def _boolean(value: Any) -> bool:
    if not isinstance(value, bool):
        raise TypeError
    return value


def _bits(flags: Sequence[bool]) -> bytes:
    """Arrow's bit-packed layout: bit i of byte i // 8, least significant first."""
    out = bytearray((len(flags) + 7) // 8)
    for i, flag in enumerate(flags):
        if flag:
            out[i >> 3] |= 1 << (i & 7)
    return bytes(out)


_CHECKS: dict[str, Callable[[Any], Any]] = {
    "BIGINT": _bigint,
    "DOUBLE": _double,
    "TIMESTAMP": _microseconds,
    "BOOLEAN": _boolean,
}


def column(kind: str, values: Sequence[Any]) -> pa.Array:
    """An Arrow array of `kind` (a DuckDB type of ARROW_TYPES) holding `values`, None as null.

    Raises ColumnError naming the first value's row and type that `kind` cannot hold."""
    n = len(values)
    valid = [value is not None for value in values]
    validity = pa.py_buffer(_bits(valid)) if not all(valid) else None
    if kind == "VARCHAR":
        offsets, data, end = array.array("i", [0]), bytearray(), 0
        for row, value in enumerate(values):
            if value is not None:
                if not isinstance(value, str):
                    raise ColumnError(f"row {row}: expected text, got {value!r}")
                data += value.encode("utf-8")
                end = len(data)
            offsets.append(end)
        buffers = [validity, pa.py_buffer(offsets), pa.py_buffer(bytes(data))]
        return pa.Array.from_buffers(ARROW_TYPES[kind], n, buffers)
    check = _CHECKS[kind]
    plain: list[Any] = []
    for row, value in enumerate(values):
        if value is None:
            plain.append(False if kind == "BOOLEAN" else 0)
            continue
        try:
            plain.append(check(value))
        except (TypeError, OverflowError):
            raise ColumnError(f"row {row}: expected {kind}, got {value!r}") from None
    if kind == "BOOLEAN":
        data = pa.py_buffer(_bits(plain))
    else:
        data = pa.py_buffer(array.array("d" if kind == "DOUBLE" else "q", plain))
    return pa.Array.from_buffers(ARROW_TYPES[kind], n, [validity, data])
