"""interrupts_held: Ctrl-C and SIGTERM wait until the block ends, then are taken as usual.

The tests raise their signals in the main thread (signal.raise_signal). Ctrl-C is taken by
Python's default handler here whatever the test runner inherited: a runner started in the
background by a shell without job control ignores SIGINT (POSIX), and a held Ctrl-C is then,
rightly, ignored after the block too (a fresh-clone CI run started that way failed the first
test with "DID NOT RAISE")."""

from __future__ import annotations

import signal
from collections.abc import Iterator

import pytest

from engine.cli.interrupts import Terminated, sigterm_interrupts
from engine.landscape.signals import interrupts_held


@pytest.fixture
def default_ctrl_c() -> Iterator[None]:
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


@pytest.mark.usefixtures("default_ctrl_c")
def test_ctrl_c_waits_for_the_block() -> None:
    done = []
    with pytest.raises(KeyboardInterrupt), interrupts_held():
        signal.raise_signal(signal.SIGINT)
        done.append("stored")  # not interrupted: the batch is stored ...
        done.append("counted")  # ... and counted
    assert done == ["stored", "counted"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


@pytest.mark.usefixtures("default_ctrl_c")
def test_sigterm_waits_and_is_taken_by_the_handler_it_would_have_met() -> None:
    done = []
    with sigterm_interrupts(), pytest.raises(Terminated), interrupts_held():
        signal.raise_signal(signal.SIGTERM)
        signal.raise_signal(signal.SIGINT)
        done.append("counted")
    assert done == ["counted"]  # the first signal is taken, once


def test_nothing_noted_nothing_raised() -> None:
    before = signal.getsignal(signal.SIGTERM)
    with interrupts_held():
        pass
    assert signal.getsignal(signal.SIGTERM) is before
