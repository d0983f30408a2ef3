"""The engine process stays under 1 GB on every trace (max RSS of a real run process)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

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
import json, resource, sys
from engine.sim.simulate import run_point
record = run_point(sys.argv[1], ratio=float(sys.argv[2]), time_limit=20, traces=sys.argv[3] or None)
print(json.dumps({"status": record["status"],
                  "max_rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}))
"""


def _max_rss(trace: str, ratio: float, traces: str) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, trace, str(ratio), traces],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_shipped_trace() -> None:
    assert _max_rss("synthetic-mlp", 0.4, "")["max_rss"] < LIMIT_BYTES


@pytest.mark.parametrize(("trace", "ratio"), sorted(POINTS.items()))
def test_dtr_traces(traces_dir: Path, trace: str, ratio: float) -> None:
    result = _max_rss(trace, ratio, str(traces_dir))
    assert result["status"] in {"ok", "oom", "thrashed", "timeout"}
    assert result["max_rss"] < LIMIT_BYTES, result
