"""Argument types shared by the subcommands: each rejects bad text with a message that says
what was expected (argparse turns it into the CLI's one-line error). Also the options several
subcommands share, and what they read from them."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from engine.landscape.progress import Progress
    from engine.sim.catalog import TraceRef


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


def fresh_runs(
    args: argparse.Namespace,
    trace: TraceRef,
    sha256: str,
    budgets: Sequence[int],
    *,
    policy: str,
    cap: float,
    progress: Progress,
) -> Iterator[tuple[int, dict[str, Any] | None, str | None]]:
    """run_budgets' (budget, record or None, error), run where the add_fresh_run_options
    options say; each finished run is counted on `progress` by its status ("error": no
    record)."""
    from engine.landscape.report_check import run_budgets

    for budget, record, error in run_budgets(
        trace,
        sha256,
        budgets,
        policy=policy,
        cap=cap,
        backend=args.backend,
        workers=args.workers,
        scheduler=args.scheduler,
    ):
        progress.update(str(record["status"]) if record else "error")
        yield budget, record, error


@dataclass(frozen=True)
class BudgetRange:
    """--from R --to R (ratios of the peak) or --from-budget B --to-budget B, as given."""

    start: float
    end: float
    ratios: bool

    def in_bytes(self, peak: Callable[[], int]) -> tuple[int, int]:
        """[start, end] in bytes: a ratio r is floor(r * peak) (`peak` asked only then)."""
        if not self.ratios:
            return int(self.start), int(self.end)
        from engine.sim.simulate import budget_for

        top = peak()
        return budget_for(self.start, top), budget_for(self.end, top)


def budget_range(args: argparse.Namespace, *, required: bool) -> BudgetRange | None:
    """The range of --from/--to or --from-budget/--to-budget (landscape's walk, audit's draw):
    one pair or the other, both ends, the first below the second. None when neither pair is
    given and the command does not require one."""
    by_ratio = args.from_ratio is not None or args.to_ratio is not None
    by_budget = args.from_budget is not None or args.to_budget is not None
    if by_ratio and by_budget or (required and not by_ratio and not by_budget):
        raise ValueError("give either --from R --to R or --from-budget B --to-budget B")
    if not by_ratio and not by_budget:
        return None
    pair = (args.from_ratio, args.to_ratio) if by_ratio else (args.from_budget, args.to_budget)
    names = ("--from", "--to") if by_ratio else ("--from-budget", "--to-budget")
    if pair[0] is None or pair[1] is None:
        raise ValueError(f"{names[0]} and {names[1]} go together")
    if pair[0] >= pair[1]:
        raise ValueError(f"{names[0]} must be below {names[1]}, got {pair[0]} and {pair[1]}")
    return BudgetRange(pair[0], pair[1], by_ratio)
