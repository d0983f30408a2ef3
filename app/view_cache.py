"""Views built from the store, kept in each web worker.

A walked landscape has 100,000 runs and more; reading them and building a page's figures
takes a second or two, and pages poll the store every few seconds. So built views are kept
per key, whose last part is the store's fingerprint for what they show (app/data.py: it
changes when runs are added), and while a walk keeps adding runs a view is rebuilt at most
once per SPACING times its last build's duration: a page that polls shows a running walk's
progress without keeping its worker busy building.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any

SPACING = 5.0  # a view is rebuilt at most once per this many times its build's duration


class ViewCache:
    def __init__(self, size: int = 16) -> None:
        self.size = size
        self._built: OrderedDict[Hashable, Any] = OrderedDict()
        self._last: dict[Hashable, tuple[float, float]] = {}  # subject -> (built at, seconds)
        self._latest: dict[Hashable, Hashable] = {}  # subject -> key of its newest view
        self._lock = threading.Lock()

    def get(
        self,
        subject: Hashable,
        fingerprint: str,
        build: Callable[[], Any],
        *,
        recent: bool = False,
    ) -> Any:
        """The view of `subject` (e.g. a trace and policy) at `fingerprint`, built once.
        `recent`: when a rebuild would come too soon (`too_soon`), the subject's newest view
        instead, if it has one (a page that redraws all its parts at once)."""
        key = (subject, fingerprint)
        with self._lock:
            if key in self._built:
                self._built.move_to_end(key)
                return self._built[key]
            newest = self._latest.get(subject)
        if recent and newest in self._built and self.too_soon(subject):
            return self._built[newest]
        began = time.monotonic()
        view = build()
        took = time.monotonic() - began
        with self._lock:
            self._built[key] = view
            self._last[subject] = (time.monotonic(), took)
            self._latest[subject] = key
            while len(self._built) > self.size:
                self._built.popitem(last=False)
        return view

    def ready(self, subject: Hashable, fingerprint: str, *, recent: bool = False) -> Any:
        """The view `get` would return now without building one, else None."""
        with self._lock:
            view = self._built.get((subject, fingerprint))
            newest = self._built.get(self._latest.get(subject))
        if view is not None:
            return view
        return newest if recent and newest is not None and self.too_soon(subject) else None

    def newest(self, subject: Hashable) -> Any:
        """The subject's most recently built view, whatever its fingerprint, else None."""
        with self._lock:
            return self._built.get(self._latest.get(subject))

    def too_soon(self, subject: Hashable) -> bool:
        """Whether a rebuild of `subject` now would come sooner than SPACING times its last
        build's duration after it (then a polling page waits for a later tick)."""
        with self._lock:
            last = self._last.get(subject)
        if last is None:
            return False
        built_at, took = last
        return time.monotonic() - built_at < SPACING * took
