"""app/view_cache.py: views kept per fingerprint, rebuilt no sooner than SPACING times their
build's duration, and what a page can show without building (ready, newest)."""

from __future__ import annotations

import time

from app.view_cache import SPACING, ViewCache


def test_built_once_per_fingerprint_and_bounded() -> None:
    cache = ViewCache(size=2)
    builds: list[str] = []

    def build(label: str) -> str:
        builds.append(label)
        return label

    assert cache.get("t", "f1", lambda: build("a")) == "a"
    assert cache.get("t", "f1", lambda: build("again")) == "a"  # kept
    assert cache.get("t", "f2", lambda: build("b")) == "b"  # the store changed: rebuilt
    assert cache.get("u", "f1", lambda: build("c")) == "c"
    assert cache.get("t", "f1", lambda: build("a2")) == "a2"  # pushed out (size 2)
    assert builds == ["a", "b", "c", "a2"]


def test_ready_and_newest_never_build() -> None:
    cache = ViewCache()
    assert cache.ready("t", "f1") is None and cache.newest("t") is None
    cache.get("t", "f1", lambda: "quick")  # a build of microseconds: a rebuild is not too soon
    assert cache.ready("t", "f1") == "quick" and cache.ready("t", "f1", recent=True) == "quick"
    assert cache.ready("t", "f2", recent=True) is None  # a new fingerprint needs a build
    assert cache.newest("t") == "quick"  # what a page shows meanwhile

    def slow() -> str:
        time.sleep(1.0)  # then a rebuild within SPACING seconds comes too soon
        return "slow"

    began = time.monotonic()
    cache.get("t", "f2", slow)
    assert cache.ready("t", "f3") is None
    recent = cache.ready("t", "f3", recent=True)
    if time.monotonic() - began < SPACING:  # (a machine stalled for seconds would skip this)
        assert recent == "slow"
    assert cache.get("t", "f1", lambda: "other") == "quick"  # still kept
    assert cache.newest("t") == "slow"  # the most recently built, not the most recently read
