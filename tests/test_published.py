"""The paper's published points (docs/DOMAIN.md, "Published facts") reproduce."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.sim.simulate import run_point


def _run(trace: str, ratio: float, traces_dir: Path, **kwargs: object) -> dict:
    return run_point(trace, ratio=ratio, traces=traces_dir, **kwargs)  # type: ignore[arg-type]


def _statuses(trace: str, ratios: list[float], traces_dir: Path) -> list[str]:
    return [_run(trace, r, traces_dir)["status"] for r in ratios]


def test_resnet32_hole(traces_dir: Path) -> None:
    ratios = [0.101, 0.102, 0.103, 0.104, 0.105, 0.106, 0.107]
    assert _statuses("resnet32", ratios, traces_dir) == ["ok"] + ["oom"] * 5 + ["ok"]


def test_resnet32_same_execution_at_0104(traces_dir: Path) -> None:
    record = _run("resnet32", 0.104, traces_dir)
    assert record["same_execution"] == {"lo": 1_024_815_872, "hi": 1_069_615_983}


def test_unet_holes(traces_dir: Path) -> None:
    lower = [0.422, 0.423, 0.424, 0.425, 0.426]
    upper = [0.431, 0.432, 0.433, 0.434, 0.435, 0.436]
    assert _statuses("unet", lower, traces_dir) == ["ok", "oom", "oom", "oom", "ok"]
    assert _statuses("unet", upper, traces_dir) == ["ok", "oom", "oom", "oom", "oom", "ok"]


def test_inceptionv4_lower_region_edges(traces_dir: Path) -> None:
    assert _statuses("inceptionv4", [0.209, 0.212, 0.222, 0.223], traces_dir) == [
        "ok",
        "oom",
        "oom",
        "ok",
    ]


def test_inceptionv4_0_2343_completes_at_1_471(traces_dir: Path) -> None:
    record = _run("inceptionv4", 0.2343, traces_dir)
    assert record["budget"] == 2_634_785_825
    assert record["status"] == "ok"
    assert round(record["overhead"], 3) == 1.471


def test_inceptionv4_0_235_fails_in_operator_2270(traces_dir: Path) -> None:
    record = _run("inceptionv4", 0.235, traces_dir)
    assert record["budget"] == 2_642_657_571
    assert record["status"] == "oom"
    assert record["failure"]["operator"] == 2270
    assert record["max_nesting_depth"] == 193
    assert record["depth_at_peak_pinned"] == 188
    assert round(record["peak_pinned"] / 1e9, 2) == 2.63


def test_inceptionv4_retaining_storage_3131_completes(traces_dir: Path) -> None:
    """The paper's Section 5 intervention: 3131 never offered to DTR, same budget."""
    record = _run("inceptionv4", 0.235, traces_dir, retain=frozenset({3131}))
    assert record["status"] == "ok"
    assert round(record["overhead"], 3) == 1.477
    assert round(record["peak_pinned"] / 1e9, 2) == 0.99
    assert record["max_nesting_depth"] == 30


@pytest.mark.parametrize(
    ("policy", "expected"),
    [
        ("DTR", [10.10, 1.38, 8.78, 1.39]),
        ("NbhdPenalty@b=0.25", [1.31, 2.89, 1.31, 2.93]),
    ],
)
def test_lstm_overhead_regimes(traces_dir: Path, policy: str, expected: list[float]) -> None:
    overheads = [
        round(_run("lstm", r, traces_dir, policy=policy)["overhead"], 2)
        for r in (0.266, 0.265, 0.264, 0.262)
    ]
    assert overheads == expected


def test_resnet32_retaining_storage_612_completes(traces_dir: Path) -> None:
    """The paper's second retention instance: ResNet-32 at 0.104 completes at 2.24x."""
    record = _run("resnet32", 0.104, traces_dir, retain=frozenset({612}))
    assert record["status"] == "ok"
    assert round(record["overhead"], 2) == 2.24
