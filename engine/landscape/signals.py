"""Ctrl-C and SIGTERM held back while a batch of runs is stored and counted.

A sweep stores a batch as a store part, then counts it. An interrupt between the two left
the part stored and uncounted: a SIGTERMed sweep reported 14 runs done with 19 in the store
(tests/test_sweep.py, under load). Inside `interrupts_held` the signals are only noted; the
first one noted is sent again when the block ends, so it is taken by the handler it would
have met, right after the batch is both stored and counted.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from typing import Any

HELD = (signal.SIGINT, signal.SIGTERM)


@contextlib.contextmanager
def interrupts_held() -> Iterator[None]:
    # Python runs signal handlers in the main thread only, and only it may set them
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    noted: list[int] = []
    previous: dict[int, Any] = {}
    try:
        for signum in HELD:
            previous[signum] = signal.signal(signum, lambda s, _frame: noted.append(s))
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
        if noted:
            # in this thread, at once: os.kill of the own process may hand it to another
            # thread (DuckDB's, Dask's), and the handler would run whenever this one next looks
            signal.raise_signal(noted[0])
