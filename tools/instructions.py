"""The instructions a run or a walk executes, counted by cachegrind, in this checkout and at an
older commit, side by side, with the records compared.

A shared machine's seconds move by 10-40% from one minute to the next, and its speed from one
day to the next (docs/WALKS.md, "Counted, not timed"), while cachegrind counts the same
instructions on every run. On a machine with a large L2 the C runtime is bound by the
instructions it executes (WALKS.md, "Instructions, not loads"); on one with a small L2 its
loads count as well. Either way the count is how a change is measured before it is timed:

    python tools/instructions.py [--rev REV] [--walk N] [--top K] TRACE RATIO

runs one fresh run at RATIO of TRACE's peak (or, with --walk, a walk of N executions from
there in one process, keeping trajectories as the walk chooses) under
`valgrind --tool=cachegrind --cache-sim=no`, with this checkout's code and with REV's (built in
a temporary worktree; default HEAD, so that uncommitted changes are measured), and prints the
totals, their ratio, the K functions of the C runtime that executed the most, and whether the
records are the same (a digest of every field but the wall time). Needs valgrind
(`apt-get install valgrind`), and for the DTR traces DTR_LANDSCAPE_TRACES (the shipped
synthetic-mlp needs nothing). Under cachegrind a run takes some 50 times its time, and the two
counts run at once: a fresh InceptionV4 run at 0.2005 takes about a minute, a walk of 40
executions from there one to two.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def workload(trace: str, ratio: float, walk: int) -> str:
    """Runs the workload in this process with whatever `engine` is on the path; returns the
    digest of its records."""
    import dataclasses
    import hashlib

    from engine.sim import native
    from engine.sim.native import NativeSimulation
    from engine.sim.policies import make_policy
    from engine.sim.simulate import baseline, budget_for, limit_for, load

    _, program = load(trace)
    base = baseline(program)
    budget, limit = budget_for(ratio, base.peak), limit_for(base, 60)
    digest = hashlib.sha256()
    if walk == 0:
        result = NativeSimulation(program, budget, make_policy("DTR"), remat_limit=limit).run()
        digest.update(repr(dataclasses.replace(result, wall_s=0.0)).encode())
        return digest.hexdigest()[:16]
    count = 0
    for step in native.Walk(program, budget, make_policy("DTR"), remat_limit=limit):
        digest.update(repr(dataclasses.replace(step.result, wall_s=0.0)).encode())
        count += 1
        if count == walk or step.result.same_execution["hi"] is None:
            break
    return f"{digest.hexdigest()[:16]} ({count} executions)"


def per_function(out: Path) -> tuple[int, collections.Counter[str]]:
    """The total and the C runtime's functions (their inlined parts included) from a
    cachegrind output file."""
    total, functions = 0, collections.Counter[str]()
    in_runtime, function = False, ""
    with out.open(encoding="utf-8", errors="replace") as lines:
        for line in lines:
            if line.startswith("fl="):
                in_runtime = "_native" in line
            elif line.startswith("fn="):
                function = line[3:].strip()
            elif line.startswith("summary:"):
                total = int(line.split()[1])
            elif in_runtime and line[:1].isdigit():
                fields = line.split()
                if len(fields) > 1:
                    functions[function] += int(fields[1])
    return total, functions


@contextlib.contextmanager
def built_worktree(rev: str) -> Iterator[Path]:
    """REV checked out in a temporary worktree, its C runtime built in place."""
    work = Path(tempfile.mkdtemp())
    tree = work / "tree"
    try:
        added = subprocess.run(
            ["git", "-C", str(REPO), "worktree", "add", "--detach", "--force", str(tree), rev],
            capture_output=True,
            text=True,
        )
        if added.returncode != 0:
            sys.exit(f"cannot check out {rev!r} (git worktree add): {added.stderr.strip()}")
        built = subprocess.run(
            [sys.executable, "setup.py", "-q", "build_ext", "--inplace"],
            cwd=tree,
            capture_output=True,
            text=True,
        )
        if built.returncode != 0:
            sys.exit(f"cannot build the C runtime of {rev!r}: {built.stderr.strip()[-2000:]}")
        yield tree
    finally:
        subprocess.run(
            ["git", "-C", str(REPO), "worktree", "remove", "--force", str(tree)],
            capture_output=True,
        )
        shutil.rmtree(work, ignore_errors=True)


def start_counting(tree: Path, args: argparse.Namespace, out: Path) -> subprocess.Popen[str]:
    """The workload with `tree`'s code under cachegrind, started (both trees' run at once, one
    a core: cachegrind runs one thread)."""
    command = [
        "valgrind", "--tool=cachegrind", "--cache-sim=no", f"--cachegrind-out-file={out}",
        sys.executable, str(Path(__file__).resolve()), "--run-workload",
        "--walk", str(args.walk), args.trace, str(args.ratio),
    ]  # fmt: skip
    env = dict(os.environ, PYTHONPATH=str(tree))
    return subprocess.Popen(
        command, cwd=tree, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def digest_of(run: subprocess.Popen[str], tree: Path) -> str:
    stdout, stderr = run.communicate()
    if run.returncode != 0:
        sys.exit(f"the workload failed under cachegrind with {tree}'s code:\n{stderr[-2000:]}")
    return stdout.strip().splitlines()[-1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trace")
    parser.add_argument("ratio", type=float)
    parser.add_argument("--rev", default="HEAD", help="the commit to compare with (HEAD)")
    parser.add_argument("--walk", type=int, default=0, help="a walk of this many executions")
    parser.add_argument("--top", type=int, default=10, help="functions listed (10)")
    parser.add_argument("--run-workload", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.run_workload:
        print(workload(args.trace, args.ratio, args.walk))
        return
    if shutil.which("valgrind") is None:
        sys.exit("valgrind is not installed (apt-get install valgrind)")
    what = f"a walk of {args.walk} from" if args.walk else "a fresh run at"
    print(f"{what} {args.trace} {args.ratio:g}, DTR: instructions (cachegrind)")
    with tempfile.TemporaryDirectory() as scratch, built_worktree(args.rev) as old_tree:
        outs = {"then": Path(scratch, "then.out"), "now": Path(scratch, "now.out")}
        trees = {"then": old_tree, "now": REPO}
        runs = {name: start_counting(trees[name], args, outs[name]) for name in outs}
        digests = {name: digest_of(runs[name], trees[name]) for name in outs}
        counts = {name: per_function(out) for name, out in outs.items()}
    (then, then_f), (now, now_f) = counts["then"], counts["now"]
    print(f"  {args.rev:<12} {then / 1e9:8.2f}G  records {digests['then']}")
    print(f"  {'this tree':<12} {now / 1e9:8.2f}G  records {digests['now']}")
    same = digests["then"] == digests["now"]
    print(f"  now / then {now / then:.3f}; the same records: {same}")
    print(f"  {'C runtime function':<28} {'then':>9} {'now':>9}")
    for name, _ in now_f.most_common(args.top):
        print(f"  {name[:28]:<28} {then_f[name] / 1e6:8.0f}M {now_f[name] / 1e6:8.0f}M")
    if not same:
        sys.exit(1)


if __name__ == "__main__":
    main()
