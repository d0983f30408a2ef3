"""Every golden record produced by unmodified simrd is reproduced exactly."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from engine.sim.record import EXACT_FIELDS
from engine.sim.simulate import run_point
from tests.helpers import skip_or_fail

# CI lays shared/ beside the clone; DTR_LANDSCAPE_GOLDEN points elsewhere (as for `bench`).
GOLDEN = Path(
    os.environ.get("DTR_LANDSCAPE_GOLDEN")
    or Path(__file__).resolve().parent.parent.parent / "shared" / "golden" / "simrd-golden.jsonl"
)


def _golden() -> list[dict]:
    if not GOLDEN.is_file():
        return []
    return [json.loads(line) for line in GOLDEN.read_text().splitlines() if line.strip()]


RECORDS = _golden()


def test_golden_records_are_present() -> None:
    if not RECORDS:
        skip_or_fail(
            f"golden records not available at {GOLDEN} (CI lays ../shared beside the clone)"
        )
    assert len(RECORDS) >= 100


@pytest.mark.parametrize(
    "golden", RECORDS, ids=[f"{r['trace']}-{r['policy']}-{r['ratio']}" for r in RECORDS]
)
def test_reproduces_simrd(golden: dict, traces_dir: Path) -> None:
    ours = run_point(
        golden["trace"], ratio=golden["ratio"], policy=golden["policy"], traces=traces_dir
    )
    if ours["failure"] is not None:
        ours["failure"].pop("over_by")
    for name in EXACT_FIELDS:
        assert ours[name] == golden[name], name
    assert ours["overhead"] == golden["overhead"]  # the same float, bit for bit
