"""SIGTERM taken the way Ctrl-C is: the dashboard's job runner stops a sweep or a walk with
SIGTERM, and both then wind down as on Ctrl-C (what was run is published, the walk records
how far it certainly got) instead of dying with their last batch unwritten."""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator
from typing import Any


class Terminated(KeyboardInterrupt):
    """SIGTERM, taking the same way out as Ctrl-C."""


def _terminate(signum: int, frame: Any) -> None:
    raise Terminated


@contextlib.contextmanager
def sigterm_interrupts() -> Iterator[None]:
    """Inside, SIGTERM raises Terminated (a KeyboardInterrupt)."""
    previous = signal.signal(signal.SIGTERM, _terminate)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def exit_code(interrupt: KeyboardInterrupt) -> int:
    """143 for SIGTERM, 130 for Ctrl-C, as a shell reports them."""
    return 143 if isinstance(interrupt, Terminated) else 130
