"""The dashboard's whole-number settings from the environment, each named, defaulted and
bounded once. Read at run time they are lenient (a value that is not a number is the
default, one below the bound is the bound: a page never fails on them); `serve` checks them
strictly before it starts anything, so a mistyped value is an error with its name, not a
silent default."""

from __future__ import annotations

import os
from dataclasses import dataclass


@dataclass(frozen=True)
class WholeNumber:
    env: str
    default: int
    minimum: int
    meaning: str

    def value(self) -> int:
        """The setting as the dashboard uses it (lenient)."""
        try:
            value = int(os.environ.get(self.env) or self.default)
        except ValueError:
            return self.default
        return max(self.minimum, value)

    def checked(self) -> int:
        """The setting, or ValueError saying what is wrong with it."""
        raw = os.environ.get(self.env)
        if raw is None or raw == "":
            return self.default
        try:
            value = int(raw)
        except ValueError:
            value = None
        if value is None or value < self.minimum:
            raise ValueError(
                f"{self.env} must be a whole number of at least {self.minimum} "
                f"({self.meaning}; default {self.default}), not {raw!r}"
            )
        return value


MAX_JOBS = WholeNumber("DTR_LANDSCAPE_MAX_JOBS", 2, 1, "engine subprocesses run at once")
MAX_QUEUED = WholeNumber("DTR_LANDSCAPE_MAX_QUEUED", 20, 1, "jobs that may wait at once")
DEFER_CARDS_ABOVE = WholeNumber(
    "DTR_LANDSCAPE_DEFER_CARDS_ABOVE",
    20_000,
    0,
    "runs a trace's overview card and trace page may have and still be built with the page",
)
SWEEP_WORKERS = WholeNumber(
    "DTR_LANDSCAPE_SWEEP_WORKERS",
    2,
    1,
    "processes one sweep, walk or check job runs its engine command on (--workers)",
)
# A request that gunicorn's worker does not answer within its timeout (90 s, app/serve.py) is
# lost: the worker is killed and the page hears nothing. A page that waits for views it asked
# for (a deferred card, a pending trace page) asks again after this, so never while the request
# could still be answered.
ASK_AGAIN_S = WholeNumber(
    "DTR_LANDSCAPE_ASK_AGAIN_S",
    120,
    1,
    "seconds a page waits for a card or views it asked for before it asks again",
)
SETTINGS = (MAX_JOBS, MAX_QUEUED, DEFER_CARDS_ABOVE, SWEEP_WORKERS, ASK_AGAIN_S)


def check() -> None:
    """Every setting, strictly: ValueError for the first that is wrong."""
    for setting in SETTINGS:
        setting.checked()
