"""interrupts_held: Ctrl-C and SIGTERM wait until the block ends, then are taken as usual."""

from __future__ import annotations

import os
import signal

import pytest

from engine.cli.interrupts import Terminated, sigterm_interrupts
from engine.landscape.signals import interrupts_held


def test_ctrl_c_waits_for_the_block() -> None:
    done = []
    with pytest.raises(KeyboardInterrupt), interrupts_held():
        os.kill(os.getpid(), signal.SIGINT)
        done.append("stored")  # not interrupted: the batch is stored ...
        done.append("counted")  # ... and counted
    assert done == ["stored", "counted"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_sigterm_waits_and_is_taken_by_the_handler_it_would_have_met() -> None:
    done = []
    with sigterm_interrupts(), pytest.raises(Terminated), interrupts_held():
        os.kill(os.getpid(), signal.SIGTERM)
        os.kill(os.getpid(), signal.SIGINT)
        done.append("counted")
    assert done == ["counted"]  # the first signal is taken, once


def test_nothing_noted_nothing_raised() -> None:
    before = signal.getsignal(signal.SIGTERM)
    with interrupts_held():
        pass
    assert signal.getsignal(signal.SIGTERM) is before
