"""Argument types shared by the subcommands: each rejects bad text with a message that says
what was expected (argparse turns it into the CLI's one-line error)."""

from __future__ import annotations

import argparse
import math


def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not value > 0 or not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}")
    return value


def ratio(text: str) -> float:
    """A budget ratio in (0, 2]."""
    value = positive_float(text)
    if value > 2:
        raise argparse.ArgumentTypeError(f"expected a ratio in (0, 2], got {text!r}")
    return value


def byte_count(text: str) -> int:
    try:
        value = int(text.replace("_", ""))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected a whole number of bytes, got {text!r}"
        ) from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a non-negative number of bytes, got {text!r}")
    return value


def _whole(text: str, minimum: int) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < minimum:
        raise argparse.ArgumentTypeError(
            f"expected a whole number of at least {minimum}, got {text!r}"
        )
    return value


def count(text: str) -> int:
    """A whole number of at least 1 (repeats, workers, run limits)."""
    return _whole(text, 1)


def whole_number(text: str) -> int:
    """A whole number of at least 0 (refinements)."""
    return _whole(text, 0)


def add_fresh_run_options(parser: argparse.ArgumentParser, runs: str) -> None:
    """Where a command's fresh runs go (check-report's edges, audit's draws): this engine in
    this process, a process pool or Dask, or unmodified simrd one after another."""
    parser.add_argument(
        "--backend",
        choices=("engine", "simrd"),
        default="engine",
        help=f"simrd: {runs} on unmodified simrd (needs SIMRD_DIR; one after another)",
    )
    run_on = parser.add_mutually_exclusive_group()
    run_on.add_argument("--workers", type=count, default=1, help="local processes")
    run_on.add_argument("--scheduler", metavar="ADDRESS", help="a Dask scheduler, tcp://H:P")
