"""A progress line for long sweeps, on stderr (stdout carries the JSON summary).

On a terminal the line is rewritten in place (`\\r`) at most a few times a second; when
stderr is a pipe or a file (CI logs, a job runner) it prints a plain line every `every`
seconds instead, so a log shows steady progress without thousands of carriage returns.
Written here rather than taken from a library: it is one small class, and a sweep's
dependencies should not grow for a status line.
"""

from __future__ import annotations

import sys
import time
from collections import Counter
from typing import TextIO


def _clock(seconds: float) -> str:
    seconds = int(seconds)
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}"


class Progress:
    def __init__(
        self,
        total: int,
        *,
        label: str = "sweep",
        stream: TextIO | None = None,
        tty: bool | None = None,
        every: float = 10.0,
    ) -> None:
        self.total = total
        self.label = label
        self.stream = stream if stream is not None else sys.stderr
        self.tty = self.stream.isatty() if tty is None else tty
        self.every = every if not self.tty else 0.2
        self.done = 0
        self.statuses: Counter[str] = Counter()
        self.started = time.monotonic()
        self._last_shown = -1.0
        self._shown: tuple[int, int] | None = None  # (done, total) last written
        self._width = 0

    def add_total(self, more: int) -> None:
        """Work discovered along the way (refinement) joins the total."""
        self.total += more
        self._show(force=True)

    def update(self, status: str) -> None:
        self.done += 1
        self.statuses[status] += 1
        self._show(force=self.done == self.total)

    def line(self) -> str:
        elapsed = time.monotonic() - self.started
        rate = self.done / elapsed * 60 if elapsed > 0 else 0.0
        left = self.total - self.done
        eta = _clock(left / rate * 60) if rate > 0 else "?"
        percent = 100 * self.done / self.total if self.total else 100.0
        statuses = " ".join(f"{k} {v}" for k, v in sorted(self.statuses.items())) or "-"
        return (
            f"{self.label} {self.done}/{self.total} {percent:3.0f}% | {rate:.1f} runs/min | "
            f"ETA {eta} | {statuses}"
        )

    def _show(self, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self._last_shown < self.every:
            return
        self._last_shown = now
        self._shown = (self.done, self.total)
        text = self.line()
        if self.tty:
            # pad over the previous line's leftovers; no newline until close()
            self.stream.write("\r" + text.ljust(self._width))
            self._width = len(text)
        else:
            self.stream.write(text + "\n")
        self.stream.flush()

    def close(self) -> None:
        """The final state, always shown, ending the line on a terminal."""
        if self._shown != (self.done, self.total):
            self._show(force=True)
        if self.tty:
            self.stream.write("\n")
            self.stream.flush()
