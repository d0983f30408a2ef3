"""The engine process stays under 1 GB on every trace (max RSS of a real run process)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import REPO

LIMIT_BYTES = 1 << 30
# A demanding point per trace (deep rebuild cascades or thrashing), cut at 20 s of simulation.
POINTS = {
    "inceptionv4": 0.235,
    "lstm": 0.25,
    "resnet32": 0.101,
    "transformer": 0.1,
    "treelstm": 0.1,
    "densenet121": 0.1,
    "unet": 0.433,
    "unrolled_gan": 0.15,
}
PROBE = """
import json, sys
from engine.cli.bench_walk import peak_rss_bytes
from engine.sim.simulate import run_point
record = run_point(sys.argv[1], ratio=float(sys.argv[2]), time_limit=20, traces=sys.argv[3] or None)
print(json.dumps({"status": record["status"], "max_rss": peak_rss_bytes()}))
"""


def _probe(code: str, *args: str) -> Any:
    """What a fresh Python process running `code` prints, as JSON."""
    done = subprocess.run(
        [sys.executable, "-c", code, *args], cwd=REPO, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def _max_rss(trace: str, ratio: float, traces: str) -> dict:
    return _probe(PROBE, trace, str(ratio), traces)


def test_shipped_trace() -> None:
    assert _max_rss("synthetic-mlp", 0.4, "")["max_rss"] < LIMIT_BYTES


@pytest.mark.parametrize(("trace", "ratio"), sorted(POINTS.items()))
def test_dtr_traces(traces_dir: Path, trace: str, ratio: float) -> None:
    result = _max_rss(trace, ratio, str(traces_dir))
    assert result["status"] in {"ok", "oom", "thrashed", "timeout"}
    assert result["max_rss"] < LIMIT_BYTES, result


# -- a walk: its snapshots and its trajectory log share one budget -------------------------------
@pytest.mark.parametrize("trace", sorted(POINTS))
def test_a_walks_snapshots_and_log_share_one_budget(traces_dir: Path, trace: str) -> None:
    """Each alone kept a walk under 2 GB, together they did not (an LSTM walk reached 1.96 GB):
    the log's limit is what the snapshots leave of WALK_MEMORY_BYTES, at most MAX_LOG_BYTES."""
    from engine.sim import native
    from engine.sim.policies import make_policy
    from engine.sim.simulate import load

    _, program = load(trace, traces_dir)
    walk = native.Walk(program, 1 << 30, make_policy("DTR"))  # built, not run
    snapshots = walk.max_snapshots * native.state_bytes(program)
    assert snapshots <= native.SNAPSHOT_BYTES
    assert 0 < walk.max_log_bytes <= native.MAX_LOG_BYTES
    assert snapshots + walk.max_log_bytes <= native.WALK_MEMORY_BYTES
    if trace in ("lstm", "treelstm"):  # large states: their snapshots leave less than the cap
        assert walk.max_log_bytes == native.WALK_MEMORY_BYTES - snapshots < native.MAX_LOG_BYTES
    # an explicit limit (bench's "unlimited" 0 among them) is kept as given
    assert native.Walk(program, 1 << 30, make_policy("DTR"), max_log_bytes=0).max_log_bytes == 0


def test_a_childs_peak_is_its_own() -> None:
    """The peak a run process reports is its own: Linux carries ru_maxrss over an exec from the
    process that forked it (here 300 MB), so the probes above read VmHWM instead."""
    held = bytearray(300 << 20)
    for i in range(0, len(held), 4096):
        held[i] = 1
    code = (
        "import json, resource; from engine.cli.bench_walk import peak_rss_bytes; "
        "print(json.dumps([peak_rss_bytes(), "
        "resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024]))"
    )
    own, inherited = _probe(code)
    assert inherited >= 300 << 20  # the trap: the parent's resident set
    assert own < 200 << 20, own
    del held
