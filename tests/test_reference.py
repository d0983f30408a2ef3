"""`--backend simrd`: the same point through unmodified simrd agrees with the engine.
These run when SIMRD_DIR points at simrd/ of a uwsampl/dtr-prototype checkout."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.sim.record import EXACT_FIELDS, FIELD_NAMES
from engine.sim.simulate import run_point
from tests.helpers import cli_json
from traces.random_traces import generate

COMPARED = (*EXACT_FIELDS, "policy_evictions", "overhead", "retained", "trace_sha256")


def _agree(ours: dict, theirs: dict) -> None:
    assert {k: ours[k] for k in COMPARED} == {k: theirs[k] for k in COMPARED}


def test_cli_backend_prints_the_same_record(simrd_dir: Path) -> None:
    env = {"SIMRD_DIR": str(simrd_dir)}
    ours = cli_json("run", "synthetic-mlp", "--ratio", "0.4", env=env)
    theirs = cli_json("run", "synthetic-mlp", "--ratio", "0.4", "--backend", "simrd", env=env)
    assert tuple(theirs) == FIELD_NAMES
    assert theirs["engine_version"].startswith("simrd")
    _agree(ours, theirs)


@pytest.mark.parametrize("seed", range(5000, 5012))
def test_fresh_random_traces(simrd_dir: Path, tmp_path: Path, seed: int) -> None:
    from engine.sim.reference import run_reference

    path = tmp_path / f"rand-{seed}.log"
    path.write_text(generate(seed))
    for ratio in (0.25, 0.4, 0.6, 0.9):
        for policy in ("DTR", "DTREqClass", "MSPS"):
            ours = run_point(str(path), ratio=ratio, policy=policy)
            theirs = run_reference(str(path), ratio=ratio, policy=policy, simrd_dir=str(simrd_dir))
            _agree(ours, theirs)


def test_seeded_random_storage(simrd_dir: Path) -> None:
    from engine.sim.reference import run_reference
    from tests.helpers import REPO

    trace = str(REPO / "traces" / "synthetic-mlp.log")
    for seed in (0, 7):
        ours = run_point(trace, ratio=0.6, policy=f"RandomStorage@seed={seed}")
        theirs = run_reference(
            trace, ratio=0.6, policy="RandomStorage", seed=seed, simrd_dir=str(simrd_dir)
        )
        _agree({**ours, "policy": "x"}, {**theirs, "policy": "x"})


def test_retention_what_if_on_resnet32(simrd_dir: Path, traces_dir: Path) -> None:
    from engine.sim.reference import run_reference

    ours = run_point("resnet32", ratio=0.104, traces=traces_dir, retain=frozenset({612}))
    path = next(traces_dir.glob("resnet32-*.log"))
    theirs = run_reference(
        str(path), name="resnet32", ratio=0.104, retain=frozenset({612}), simrd_dir=str(simrd_dir)
    )
    _agree(ours, theirs)
