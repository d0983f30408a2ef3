"""`dtr-landscape diff-records`: two stores' records of a trace's executions compared field by
field, in real processes over real DuckDB stores (the synthetic trace: no DTR traces needed)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from tests.helpers import cli

TRACE = "synthetic-mlp"
RANGE = ("--from", "0.3", "--to", "0.6")


@pytest.fixture(scope="module")
def walked(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The same range walked in one process and with 2 workers (whose chunks enter some
    intervals at another budget than the one process's walk does)."""
    folder = tmp_path_factory.mktemp("diff")
    one, two = folder / "one.duckdb", folder / "two.duckdb"
    for db, extra in ((one, ()), (two, ("--workers", "2"))):
        done = cli("landscape", TRACE, *RANGE, *extra, "--db", str(db))
        assert done.returncode == 0, done.stderr
    return one, two


def _diff(ours: Path, theirs: Path, *extra: str) -> tuple[int, dict]:
    done = cli("diff-records", TRACE, "--db", str(ours), "--against", str(theirs), "--json", *extra)
    assert done.returncode in (0, 1), done.stderr
    return done.returncode, json.loads(done.stdout)


def test_two_walks_of_the_same_range_agree(walked: tuple[Path, Path]) -> None:
    one, two = walked
    code, found = _diff(one, two)
    assert code == 0 and found["agree"], found
    assert found["shared"] > 1000 and found["only_ours"] == found["only_theirs"] == 0
    assert found["differing"] == found["conflicting"] == 0
    text = cli("diff-records", TRACE, "--db", str(one), "--against", str(two))
    assert text.returncode == 0 and text.stdout.rstrip().endswith("agree"), text.stdout
    assert f"{found['shared']:,} executions in both stores" in text.stdout


def test_sampled_budgets_are_the_walks_executions_entered_elsewhere(
    walked: tuple[Path, Path], tmp_path: Path
) -> None:
    """A sweep's runs at three ratios are three of the walk's executions, each entered at a
    budget inside its interval instead of at its first byte: the same records but for the
    budget and ratio. (Where a 2-worker walk's chunks begin inside an interval depends on when
    they report, so the fixture's pair shows this only some of the time.)"""
    one, _ = walked
    sampled = tmp_path / "sampled.duckdb"
    done = cli("sweep", TRACE, "--ratios", "0.35,0.45,0.55", "--db", str(sampled))
    assert done.returncode == 0, done.stderr
    listed = cli("runs", TRACE, "--json", "--db", str(sampled))
    runs = [json.loads(line) for line in listed.stdout.splitlines() if line.strip()]
    inside = [r for r in runs if r["budget"] != r["same_execution"]["lo"]]
    assert len(runs) == 3 and inside, runs
    code, found = _diff(one, sampled)
    assert code == 0 and found["agree"], found
    assert found["shared"] == 3 and found["only_theirs"] == 0
    assert found["entered_elsewhere"] == len(inside)


def _exported(walked: tuple[Path, Path], tmp_path: Path) -> pd.DataFrame:
    """The 2-worker walk's runs, exported and read back, to be altered and `_stored`."""
    _, two = walked
    exported = tmp_path / "runs.parquet"
    done = cli("export", "--parquet", str(exported), "--db", str(two))
    assert done.returncode == 0, done.stderr
    runs = pd.read_parquet(exported, dtype_backend="numpy_nullable")  # whole numbers stay so
    return runs.sort_values("same_lo", ignore_index=True)


def _stored(runs: pd.DataFrame, tmp_path: Path) -> Path:
    """`runs` imported into a new store (import-records, as another store's export)."""
    tmp_path.mkdir(exist_ok=True)
    runs.to_parquet(tmp_path / "altered.parquet")
    db = tmp_path / "altered.duckdb"
    done = cli("import-records", str(tmp_path / "altered.parquet"), "--db", str(db))
    assert done.returncode == 0, done.stderr
    return db


def test_a_record_that_differs_is_named_with_its_runs(
    walked: tuple[Path, Path], tmp_path: Path
) -> None:
    one, _ = walked
    runs = _exported(walked, tmp_path)
    changed = runs.index[len(runs) // 2]
    runs.loc[changed, "evictions"] += 1
    code, found = _diff(one, _stored(runs, tmp_path))
    assert code == 1 and not found["agree"]
    assert (found["differing"], found["conflicting"]) == (1, 0)
    (example,) = found["examples"]
    assert example["fields"] == {
        "evictions": [int(runs.loc[changed, "evictions"]) - 1, int(runs.loc[changed, "evictions"])]
    }
    assert example["other_run_id"] == runs.loc[changed, "run_id"]
    assert example["same_lo"] == runs.loc[changed, "same_lo"]


def test_bytes_given_to_different_executions_conflict(
    walked: tuple[Path, Path], tmp_path: Path
) -> None:
    """An interval cut short in one store overlaps the other's: both sides count it."""
    one, _ = walked
    runs = _exported(walked, tmp_path)
    wide = runs.index[(runs["same_hi"] - runs["same_lo"] > 2).to_numpy()][0]
    runs.loc[wide, "same_hi"] -= 1
    code, found = _diff(one, _stored(runs, tmp_path))
    assert code == 1 and found["conflicting"] == 2 and found["differing"] == 0, found
    assert found["only_ours"] == found["only_theirs"] == 1


def test_a_failure_entered_at_another_budget_differs_only_by_that_shift(
    walked: tuple[Path, Path], tmp_path: Path
) -> None:
    """A run entered 1 byte higher in its interval: its budget and ratio move, and the bytes a
    failure was over the budget by move back by as much. Anything else is a difference."""
    one, _ = walked
    runs = _exported(walked, tmp_path)
    failed = runs.index[(runs["status"] == "oom") & (runs["same_hi"] > runs["budget"]).to_numpy()][
        0
    ]
    runs.loc[failed, "budget"] += 1
    runs.loc[failed, "ratio"] = None
    runs.loc[failed, "failure_over_by"] -= 1
    code, found = _diff(one, _stored(runs, tmp_path))
    assert code == 0 and found["differing"] == 0, found
    runs.loc[failed, "failure_over_by"] -= 1  # one byte too many
    code, found = _diff(one, _stored(runs, tmp_path / "again"))
    assert code == 1 and list(found["examples"][0]["fields"]) == ["failure_over_by"]


def test_stores_of_disjoint_ranges_compare_nothing_and_do_not_agree(
    walked: tuple[Path, Path], tmp_path: Path
) -> None:
    one, _ = walked
    other = tmp_path / "other.duckdb"
    done = cli("landscape", TRACE, "--from", "0.7", "--to", "0.72", "--db", str(other))
    assert done.returncode == 0, done.stderr
    code, found = _diff(one, other)
    assert code == 1 and not found["agree"] and found["shared"] == 0, found
    assert found["only_ours"] > 1000 and found["only_theirs"] > 0
    text = cli("diff-records", TRACE, "--db", str(one), "--against", str(other))
    assert text.returncode == 1 and "nothing compared: no execution is in both" in text.stdout


def test_bad_input_says_what_is_wrong(walked: tuple[Path, Path], tmp_path: Path) -> None:
    one, _ = walked
    missing = tmp_path / "no-such.duckdb"
    done = cli("diff-records", TRACE, "--db", str(one), "--against", str(missing))
    assert done.returncode == 2 and f"no store at {missing}" in done.stderr, done.stderr
    assert not missing.exists()  # nothing made where there was nothing
    done = cli("diff-records", "resnet23", "--db", str(one), "--against", str(one))
    assert done.returncode == 2 and "neither store holds runs of 'resnet23'" in done.stderr
