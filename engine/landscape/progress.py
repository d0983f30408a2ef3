"""Progress lines for long sweeps and walks, on stderr (stdout carries the JSON summary).

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
from collections.abc import Callable
from typing import Any, TextIO

from engine.landscape.intervals import Interval, certified_bytes

# how often a walk says how far it got: a line on stderr, and its progress note beside its
# claim (a file replaced whole, for the dashboard, which refreshes every 2 s)
PROGRESS_EVERY_S, NOTE_EVERY_S = 10.0, 2.0


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


class WalkProgress:
    """Share of the bytes certified, runs (and how many began from scratch), rate: every
    PROGRESS_EVERY_S as a line on stderr for long walks, and every NOTE_EVERY_S to `report`
    (the walk's progress note beside its claim)."""

    def __init__(
        self, name: str, start: int, end: int, known: list[Interval], stream: TextIO | None
    ) -> None:
        self.name, self.start, self.end, self.stream = name, start, end, stream
        self.bytes = certified_bytes(known, start, end)
        self.runs = 0
        self.from_scratch = 0  # runs begun from operator 1 (the others resumed)
        self.began = self.shown = self.noted = time.monotonic()
        self.report: Callable[[dict[str, Any]], None] | None = None

    def add(self, interval: Interval) -> None:
        self.bytes += certified_bytes([interval], self.start, self.end)
        self.runs += 1
        if self.stream is not None and time.monotonic() - self.shown > PROGRESS_EVERY_S:
            self.show()

    def note(self) -> None:
        now = time.monotonic()
        if self.report is not None and now - self.noted > NOTE_EVERY_S:
            self.noted = now
            share, elapsed = self.bytes / (self.end - self.start + 1), now - self.began
            self.report({"runs": self.runs, "share": share, "elapsed_s": round(elapsed, 1)})

    def show(self) -> None:
        assert self.stream is not None
        self.shown = time.monotonic()
        elapsed = max(self.shown - self.began, 1e-9)
        share = 100 * self.bytes / (self.end - self.start + 1)
        self.stream.write(
            f"walk {self.name} {share:.2f}% of the bytes | {self.runs} runs "
            f"({self.from_scratch} from scratch) | "
            f"{self.runs / elapsed:.1f} runs/s | {elapsed:.0f} s\n"
        )
        self.stream.flush()

    def close(self) -> None:
        if self.stream is not None:
            self.show()
