"""Run ids (engine/landscape/ids.py): what the store accepts, and paths that stay in their
folder, for the importers, the store and the dashboard's event logs."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.plans import PlanError, plan
from engine.landscape.ids import PathEscapeError, RunIdError, check_run_id, inside, is_run_id
from engine.landscape.store import Store, StoreError
from engine.sim.simulate import run_point

GOOD = ["0f3a9c", "A-000101", "evidence:1a2b3c4d:A-000101", "pareto:1a2b3c4d:0:1", "r.1_b-2"]
BAD = ["", "../../x", "..", "a..b", "a/b", "a\\b", ".hidden", "-x", "a b", "a\x00b", ":a", "a:"]


@pytest.mark.parametrize("text", GOOD)
def test_good_ids(text: str) -> None:
    assert is_run_id(text) and check_run_id(text) == text


@pytest.mark.parametrize("text", [*BAD, "x" * 129, ":".join(["x" * 100] * 3), None, 12])
def test_bad_ids_say_what_was_expected(text: object) -> None:
    assert not is_run_id(text)
    with pytest.raises(RunIdError, match="expected a run id of 1 to 128 letters"):
        check_run_id(text)


def test_inside_keeps_a_name_in_its_folder(tmp_path: Path) -> None:
    assert inside(tmp_path, "a.parquet") == tmp_path.resolve() / "a.parquet"
    for name in ("../a.parquet", "sub/a.parquet", "/etc/passwd", ".."):
        with pytest.raises(PathEscapeError):
            inside(tmp_path, name)
    (tmp_path / "link.parquet").symlink_to("/tmp")
    with pytest.raises(PathEscapeError):  # a symbolic link out counts as leaving
        inside(tmp_path, "link.parquet/x")


def test_the_store_publishes_no_bad_id(tmp_path: Path) -> None:
    store = Store.open(tmp_path / "landscape.duckdb")
    record = run_point("synthetic-mlp", ratio=0.5)
    with pytest.raises(StoreError, match=r"runs.run_id: expected a run id .* got '\.\./\.\./x'"):
        store.add_runs([{**record, "run_id": "../../x"}])
    with pytest.raises(StoreError, match="runs.run_id"):
        store.add_rows("runs", [{"run_id": "ok-1"}, {"run_id": "a/b"}])
    assert list(store.parts_dir.iterdir()) == [] and store.stats()["runs"] == 0


def test_event_log_paths_stay_in_events(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from app import data

    monkeypatch.setenv("DTR_LANDSCAPE_DB", str(tmp_path / "landscape.duckdb"))
    assert data.events_path_for("abc") == tmp_path.resolve() / "events" / "abc.parquet"
    for bad in ("../../x", "a/b", ".."):
        with pytest.raises(ValueError):
            data.events_path_for(bad)
    spec = {"kind": "events", "trace": "synthetic-mlp", "policy": "DTR", "cap": 60.0}
    spec.update(budget=500, run_id="../../x")
    with pytest.raises(PlanError, match="event log of run '../../x'"):
        plan(spec, db=tmp_path / "landscape.duckdb", commands={"run"})
