"""The dashboard under load (app/load_bench.py, small): locust users browse a real
`dtr-landscape serve` while a real sweep writes runs into the same store. Every request must
succeed and every run must be written; the times are printed, never asserted. The full
figure is `dtr-landscape bench-dashboard --load` (50 users, 1,000 runs)."""

from __future__ import annotations

from pathlib import Path

from app.load_bench import bench_load


def test_browsing_during_a_sweep_has_no_errors(tmp_path: Path) -> None:
    result = bench_load(users=5, runs=60, spawn_rate=5, min_seconds=5, folder=tmp_path)
    print("\n".join(result.lines()))
    assert result.errors == 0, result.failures
    assert result.runs_written == 60
    assert result.requests > 0 and result.page_views > 0
    assert {"/", "/trace/<name>", "/run/<run_id>"} >= set(result.page_p95_by_kind_ms)
