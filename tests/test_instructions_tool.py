"""tools/instructions.py: the instructions of a run or a walk with an older commit's code and
this checkout's, counted by cachegrind side by side. Real processes: a git worktree of HEAD
built in place, valgrind, the shipped synthetic trace (so CI needs no DTR trace for it)."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

from tests.helpers import REPO

TOOL = REPO / "tools" / "instructions.py"


def _tool_module():
    spec = importlib.util.spec_from_file_location("instructions_tool", TOOL)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(TOOL), *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=900,
    )


def _totals(stdout: str) -> list[float]:
    return [float(x) for x in re.findall(r"^\s+\S+(?: tree)?\s+([0-9.]+)G\s+records", stdout, re.M)]


def test_a_fresh_run_counted_with_heads_code_and_this_checkouts():
    done = _run("synthetic-mlp", "0.5", "--top", "3")
    assert done.returncode == 0, done.stderr
    assert "a fresh run at synthetic-mlp 0.5" in done.stdout
    totals = _totals(done.stdout)
    assert len(totals) == 2 and all(t > 0 for t in totals), done.stdout
    # HEAD's runtime and this checkout's give the same records
    assert "the same records: True" in done.stdout
    digests = re.findall(r"records ([0-9a-f]{16})", done.stdout)
    assert len(digests) == 2 and digests[0] == digests[1]
    # the C runtime's functions are listed, at most --top of them
    listed = done.stdout.split("C runtime function", 1)[1].splitlines()[1:]
    assert 1 <= len(listed) <= 3, done.stdout
    assert all(re.fullmatch(r"  \w+ +\d+M +\d+M", line) for line in listed), listed


def test_a_walk_counts_its_executions():
    done = _run("synthetic-mlp", "0.3", "--walk", "5", "--top", "2")
    assert done.returncode == 0, done.stderr
    assert "a walk of 5 from synthetic-mlp 0.3" in done.stdout
    assert done.stdout.count("(5 executions)") == 2, done.stdout
    assert "the same records: True" in done.stdout


def test_an_unknown_revision_is_named():
    done = _run("synthetic-mlp", "0.5", "--rev", "no-such-revision")
    assert done.returncode != 0
    assert "cannot check out 'no-such-revision'" in done.stderr


def test_cachegrind_output_is_read_per_function_of_the_runtime(tmp_path: Path):
    out = tmp_path / "cachegrind.out"
    out.write_text(
        "desc: I1 cache: ...\ncmd: python\nevents: Ir\n"
        "fl=/x/engine/sim/_native/incremental.h\nfn=shrink_fresh_one\n10 700\n11 300\n"
        "fn=log_masks\n20 50\n"
        "fl=/usr/lib/libc.so.6\nfn=memcpy\n5 9999\n"
        "fl=/x/engine/sim/_native/hash.h\nfn=shrink_fresh_one\n90 25\n"
        "summary: 11074\n"
    )
    total, functions = _tool_module().per_function(out)
    assert total == 11074
    # inlined parts (hash.h's lines inside shrink_fresh_one) count for their function;
    # what is not the runtime's (libc) is left out
    assert functions == {"shrink_fresh_one": 1025, "log_masks": 50}
