"""A running walk claims the budgets it is about to walk, and a second walk of the same trace
whose gaps overlap them is refused.

Two walks over one stretch of a trace would both run every execution in it: twice the
machine's time, and every execution stored twice (on 2026-12-05 a backgrounded command chain
started a second InceptionV4 walk beside the first, and four executions were stored twice
before it was stopped). Walks of different stretches side by side are a supported use (one
walk per band, each with its workers), so the claim is on the budgets a walk will run (the
gaps the store left it), not on the store.

A claim is a JSON file in `<store>.walking/`, held under an exclusive `flock` by the walking
process for as long as it walks, and removed when it ends. The kernel drops the lock when the
process dies, however it dies, so a claim whose lock can be taken is a dead walk's and is
removed (a stopped process, SIGSTOP, still holds its claim). Checking and claiming happen
under one lock on the directory, so two walks started together cannot both pass the check.
Beside its claim a walk keeps `<walk_id>.progress`, JSON (runs, share of its range certified,
rate), replaced whole every few seconds, for readers such as the dashboard.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path
from typing import IO, Any


class WalkOverlap(RuntimeError):
    """A walk running on this store has claimed budgets this walk would run; the message is
    one line. (Not a StoreError: that lives beside pyarrow, which the command line does not
    load at start-up.)"""


@dataclass(frozen=True)
class WalkClaim:
    walk_id: str
    trace: str
    trace_sha256: str
    policy: str
    cap: float
    gaps: list[tuple[int, int]]  # inclusive [a, b]: the budgets the walk will run
    pid: int
    host: str
    started_at: str

    def same_walk_settings(self, other: WalkClaim) -> bool:
        """Walks of one trace under one policy and cap: the only ones whose runs coincide."""
        return (self.trace_sha256, self.policy, self.cap) == (
            other.trace_sha256,
            other.policy,
            other.cap,
        )

    def first_overlap(self, other: WalkClaim) -> tuple[int, int] | None:
        """The first stretch of budgets both claims would walk, if any."""
        if not self.same_walk_settings(other):
            return None
        shared = [
            (max(a, c), min(b, d)) for a, b in self.gaps for c, d in other.gaps if a <= d and c <= b
        ]
        return min(shared) if shared else None

    def budget_count(self) -> int:
        return sum(b - a + 1 for a, b in self.gaps)


def claims_dir(store_path: Path) -> Path:
    return store_path.with_name(store_path.name + ".walking")


def _progress_path(store_path: Path, walk_id: str) -> Path:
    return claims_dir(store_path) / f"{walk_id}.progress"  # JSON, but not a claim (*.json)


def note_progress(store_path: Path, walk_id: str, progress: dict[str, Any]) -> None:
    """Replace the walk's progress note whole (a reader sees the old one or the new one). A
    note that cannot be written is skipped: it only informs, and a walk of hours must not die
    of it."""
    path = _progress_path(store_path, walk_id)
    partial = path.with_suffix(".partial")
    try:
        partial.write_text(json.dumps(progress))
        os.replace(partial, path)
    except OSError:
        partial.unlink(missing_ok=True)


def _drop_progress(store_path: Path, walk_id: str) -> None:
    path = _progress_path(store_path, walk_id)
    path.unlink(missing_ok=True)
    path.with_suffix(".partial").unlink(missing_ok=True)  # a walk killed while writing it


def progress_of(store_path: Path, walk_id: str) -> dict[str, Any] | None:
    """The walk's last progress note, if it wrote one."""
    try:
        note = json.loads(_progress_path(store_path, walk_id).read_text())
    except (OSError, ValueError):
        return None
    return note if isinstance(note, dict) else None


def new_claim(
    walk_id: str,
    trace: str,
    trace_sha256: str,
    policy: str,
    cap: float,
    gaps: list[tuple[int, int]],
) -> WalkClaim:
    return WalkClaim(
        walk_id=walk_id,
        trace=trace,
        trace_sha256=trace_sha256,
        policy=policy,
        cap=float(cap),
        gaps=[(int(a), int(b)) for a, b in gaps],
        pid=os.getpid(),
        host=socket.gethostname(),
        started_at=datetime.now().isoformat(timespec="seconds"),
    )


def _held_elsewhere(handle: IO[str], mode: int = fcntl.LOCK_EX) -> bool:
    """Whether another open file (a live walk) holds the lock; if not, we now hold it."""
    try:
        fcntl.flock(handle, mode | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    return False


def _read_claim(handle: IO[str]) -> WalkClaim | None:
    try:
        raw = json.load(handle)
        raw["gaps"] = [(int(a), int(b)) for a, b in raw["gaps"]]
        return WalkClaim(**raw)
    except (ValueError, KeyError, TypeError):
        return None  # not a claim this version wrote: it cannot be compared, so it is ignored


def live_claims(store_path: Path) -> list[WalkClaim]:
    """The claims of walks running on the store now; dead walks' claims are removed.
    Call with the directory's lock held (`claimed` does)."""
    found: list[WalkClaim] = []
    for path in sorted(claims_dir(store_path).glob("*.json")):
        try:
            handle = open(path)  # noqa: SIM115 - closed below on every path
        except FileNotFoundError:
            continue
        with handle:
            if not _held_elsewhere(handle):
                path.unlink(missing_ok=True)  # its walk is gone: the kernel dropped its lock
                _drop_progress(store_path, path.stem)
                continue
            claim = _read_claim(handle)
            if claim is not None:
                found.append(claim)
    return found


def running_walks(store_path: Path, wait_s: float = 1.0) -> list[WalkClaim] | None:
    """The claims of walks running on the store now, for a reader that is not a walk (the
    dashboard): nothing is removed, and a dead walk's claim is left for the next walk to
    remove. The directory's lock is taken shared, so no walk claims or checks while we look
    (our brief lock on a dead claim would pass it for a live one); None if a walk holds that
    lock for longer than `wait_s` (it is held for milliseconds, unless a walk was stopped in
    the middle of claiming), so that a reader never hangs on it."""
    directory = claims_dir(store_path)
    try:
        # read-only: a reader may not be allowed to write beside the store (flock does not
        # need it); the lock file comes before the first claim, so without it there is none
        directory_lock = open(directory / ".lock")  # noqa: SIM115 - closed by `with` below
    except FileNotFoundError:
        return []
    found: list[WalkClaim] = []
    with directory_lock:
        deadline = time.monotonic() + wait_s
        while _held_elsewhere(directory_lock, fcntl.LOCK_SH):
            if time.monotonic() > deadline:
                return None
            time.sleep(0.05)
        for path in sorted(directory.glob("*.json")):
            try:
                handle = open(path)  # noqa: SIM115 - closed below on every path
            except FileNotFoundError:
                continue  # its walk ended while we looked
            with handle:
                if _held_elsewhere(handle, fcntl.LOCK_SH):  # its walk is alive
                    claim = _read_claim(handle)
                    if claim is not None:
                        found.append(claim)
    return found


def _count(n: int, noun: str) -> str:
    return f"{n:,} {noun}{'' if n == 1 else 's'}"


def describe_walk(
    claim: WalkClaim, progress: dict[str, Any] | None, peak: int | None = None
) -> str:
    """One line on a running walk, as the dashboard and `dtr-landscape walking` show it: its
    settings, the budgets it had to walk when it started, its process and its last progress
    note (ratios too if the trace's peak is known)."""
    low, high = claim.gaps[0][0], claim.gaps[-1][1]
    ratios = f" (ratios {low / peak:.4f}-{high / peak:.4f})" if peak else ""
    if not progress:
        so_far = "no progress note yet"
    else:
        runs, elapsed = int(progress["runs"]), float(progress["elapsed_s"])
        rate = f", {runs / elapsed:.1f} a second" if elapsed > 0 else ""
        so_far = f"{_count(runs, 'run')} so far{rate}, {100 * float(progress['share']):.2f}%"
        so_far += " of its range"
    return (
        f"{claim.policy} (cap {claim.cap:g} s): budgets {low:,}..{high:,}{ratios}, "
        f"{_count(claim.budget_count(), 'byte')} in {_count(len(claim.gaps), 'gap')}; "
        f"process {claim.pid} on {claim.host}, since {claim.started_at.replace('T', ' ')}; "
        f"{so_far}"
    )


def _refusal(theirs: WalkClaim, overlap: tuple[int, int]) -> str:
    a, b = overlap
    return (
        f"a walk of {theirs.trace} ({theirs.policy}, cap {theirs.cap:g} s) is running on this "
        f"store over budgets {a:,}..{b:,} that this walk would run too (walk {theirs.walk_id}, "
        f"process {theirs.pid} on {theirs.host}, started {theirs.started_at}): wait for it to "
        "end, stop it (SIGTERM keeps what it ran), or walk a range it does not cover"
    )


@contextlib.contextmanager
def claimed(store_path: Path, claim: WalkClaim) -> Iterator[None]:
    """Hold `claim` while inside; raises WalkOverlap, claiming nothing, if a live walk on the
    store has claimed any of its budgets."""
    directory = claims_dir(store_path)
    directory.mkdir(parents=True, exist_ok=True)
    mine = directory / f"{claim.walk_id}.json"
    with open(directory / ".lock", "w") as directory_lock:
        fcntl.flock(directory_lock, fcntl.LOCK_EX)
        for theirs in live_claims(store_path):
            overlap = claim.first_overlap(theirs)
            if overlap is not None:
                raise WalkOverlap(_refusal(theirs, overlap))
        handle = open(mine, "w")  # noqa: SIM115 - held for the walk, closed in `finally`
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            json.dump(asdict(claim), handle)
            handle.flush()
        except BaseException:
            mine.unlink(missing_ok=True)  # a claim half written is no claim
            handle.close()
            raise
    try:
        yield
    finally:
        _drop_progress(store_path, claim.walk_id)
        mine.unlink(missing_ok=True)
        handle.close()
