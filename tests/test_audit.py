"""`dtr-landscape audit`: a store's walked executions run again from scratch, in real processes
over a real store, and compared field for field (on unmodified simrd too, with SIMRD_DIR)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from engine.landscape.audit import DECIDED, differences
from engine.landscape.store import Store
from engine.sim.simulate import run_point
from tests.helpers import REPO, cli, cli_json

SYNTHETIC = "synthetic-mlp"


@pytest.fixture(scope="module")
def walked(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int, int]:
    """A store holding a walk of synthetic-mlp across its turn from ok to oom (about 0.4034 of
    its peak): resumed runs of both outcomes, failures with their bytes over the budget."""
    db = tmp_path_factory.mktemp("audit") / "walk.duckdb"
    peak = run_point(SYNTHETIC, ratio=0.5)["peak"]
    start, end = int(0.4025 * peak), int(0.4045 * peak)
    out = cli_json(
        "landscape",
        SYNTHETIC,
        "--from-budget",
        str(start),
        "--to-budget",
        str(end),
        "--db",
        str(db),
        "--json",
    )
    assert out["complete"] and {i["status"] for i in out["intervals"]} == {"ok", "oom"}
    return db, start, end


def _audit(db: Path, *args: str) -> tuple[int, Any, str]:
    done = cli("audit", SYNTHETIC, "--db", str(db), *args)
    out: Any = done.stdout
    if "--json" in args and done.returncode in (0, 1):
        out = json.loads(done.stdout)
    return done.returncode, out, done.stderr


def test_a_walked_store_audits_clean(walked: tuple[Path, int, int]) -> None:
    """Every stored execution (fewer than the sample) run again at a byte drawn inside its
    interval gives its record; the same seed draws the same bytes, in two worker processes too."""
    db, _, _ = walked
    stored = Store.existing(db).query("SELECT count(*) AS n FROM runs")["n"][0]
    code, out, err = _audit(db, "--sample", "500", "--json")
    assert code == 0, err
    assert out["agrees"] is True and out["stored"] == stored == len(out["audited"])
    assert {a["status"] for a in out["audited"]} == {"ok", "oom"}
    for a in out["audited"]:
        assert a["agrees"] and a["lo"] <= a["budget"]
        assert a["hi"] is None or a["budget"] <= a["hi"]
    # drawn inside, not only at an end, where the failing runs' bytes over the budget differ
    inside = [a for a in out["audited"] if a["budget"] != a["lo"] and a["status"] == "oom"]
    assert inside
    code, again, err = _audit(db, "--sample", "500", "--json", "--workers", "2")
    assert code == 0, err
    assert again["audited"] == out["audited"]
    code, other, err = _audit(db, "--sample", "500", "--json", "--seed", "7")
    assert code == 0, err
    assert [a["budget"] for a in other["audited"]] != [a["budget"] for a in out["audited"]]


def test_a_sample_is_drawn_from_the_range_asked(walked: tuple[Path, int, int]) -> None:
    db, start, end = walked
    middle = (start + end) // 2
    code, out, err = _audit(
        db, "--from-budget", str(middle), "--to-budget", str(end), "--sample", "3", "--json"
    )
    assert code == 0, err
    assert len(out["audited"]) == 3 and out["stored"] > 3
    assert all(a["hi"] is None or a["hi"] >= middle for a in out["audited"])
    code, text, err = _audit(db, "--sample", "2")
    assert code == 0, err
    assert f"{SYNTHETIC} DTR: 2 of " in text and "every record as stored" in text


@pytest.mark.parametrize(
    ("column", "change", "field"),
    [("clock", 1, "clock"), ("same_hi", 1, "same_execution"), ("failure_depth", 1, "failure")],
)
def test_a_record_unlike_a_fresh_run_is_named(
    tmp_path: Path, walked: tuple[Path, int, int], column: str, change: int, field: str
) -> None:
    """A stored failing record with one decided field changed: the audit exits 1 and names the
    run, the field, and both values; the store is left as it was."""
    source, _, _ = walked
    db = tmp_path / "tampered.duckdb"
    store = Store.open(db)
    rows = Store.existing(source).rows("SELECT * FROM runs WHERE status = 'oom' ORDER BY same_lo")
    bad = dict(rows[0], run_id="0" * 32)
    bad[column] += change
    store.add_rows("runs", [bad])
    before = store.query("SELECT * FROM runs ORDER BY run_id")
    code, text, _ = _audit(db, "--sample", "5")
    assert code == 1
    assert "1 differ" in text and f"run {'0' * 32} " in text
    assert f"    {field}: stored " in text and ", fresh " in text
    code, out, _ = _audit(db, "--sample", "5", "--json")
    assert code == 1 and out["agrees"] is False
    [audited] = out["audited"]
    assert audited["problems"] and audited["problems"][0].startswith(f"{field}: ")
    assert store.query("SELECT * FROM runs ORDER BY run_id").equals(before)


def test_over_by_is_compared_as_the_memory_the_allocation_needed() -> None:
    """A failure's bytes over the budget move with the budget inside one interval; the excess
    plus the budget is what the execution decides."""
    failure = {"operator": 9, "request": 64, "pinned": 900, "depth": 2, "over_by": 30}
    stored = {"budget": 1000, "failure": failure, "status": "oom"}
    same = {"budget": 1010, "failure": {**failure, "over_by": 20}, "status": "oom"}
    other = {"budget": 1010, "failure": {**failure, "over_by": 21}, "status": "oom"}
    assert differences(stored, same) == []
    assert differences(stored, other) == [
        f"failure: stored {failure!r}, fresh {other['failure']!r}"
    ]
    assert "over_by" not in DECIDED and "budget" not in DECIDED and "clock" in DECIDED


def test_bad_input_is_refused_before_any_run(tmp_path: Path, walked: tuple[Path, int, int]) -> None:
    db, start, _ = walked
    code, _, err = _audit(tmp_path / "none.duckdb")
    assert code == 2 and "no store at" in err
    assert not (tmp_path / "none.duckdb").exists()
    code, _, err = _audit(db, "--from-budget", "1", "--to-budget", "2")
    assert code == 2 and "no stored execution of synthetic-mlp (DTR, cap 60) meets [1, 2]" in err
    code, _, err = _audit(db, "--from", "0.4")
    assert code == 2 and "--from and --to go together" in err
    code, _, err = _audit(db, "--from-budget", str(start + 1), "--to-budget", str(start))
    assert code == 2 and "--from-budget must be below --to-budget" in err
    code, _, err = _audit(db, "--from", "0.4", "--to-budget", "9")
    assert code == 2 and "give either --from R --to R or --from-budget B --to-budget B" in err
    code, _, err = _audit(db, "--backend", "simrd", "--workers", "2")
    assert code == 2 and "--backend simrd runs in this process" in err
    code, _, err = _audit(db, "--sample", "0")
    assert code == 2 and "expected a whole number of at least 1, got '0'" in err
    code, _, err = _audit(db, "--policy", "LRU")
    assert code == 2 and "no stored execution of synthetic-mlp (LRU, cap 60)" in err


def test_the_published_lstm_runs_audit_clean(tmp_path: Path, traces_dir: Path) -> None:
    """The LSTM's complete walk as the project exports it (docs/runs/lstm.parquet), imported
    into a new store: executions drawn from its cheap stretch run again on the real trace."""
    db = str(tmp_path / "lstm.duckdb")
    env = {"DTR_LANDSCAPE_TRACES": str(traces_dir)}
    cli_json("import-records", str(REPO / "docs" / "runs" / "lstm.parquet"), "--db", db, env=env)
    done = cli(
        "audit",
        "lstm",
        "--db",
        db,
        "--from",
        "0.3",
        "--to",
        "0.6",
        "--sample",
        "4",
        "--workers",
        "2",
        "--json",
        env=env,
    )
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["agrees"] and len(out["audited"]) == 4 and out["stored"] > 1000


def test_walked_executions_audit_clean_on_unmodified_simrd(
    walked: tuple[Path, int, int], simrd_dir: Path
) -> None:
    db, _, _ = walked
    done = cli(
        "audit",
        SYNTHETIC,
        "--db",
        str(db),
        "--sample",
        "4",
        "--backend",
        "simrd",
        "--json",
        env={"SIMRD_DIR": str(simrd_dir)},
    )
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["agrees"] and out["backend"] == "simrd" and len(out["audited"]) == 4
