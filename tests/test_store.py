"""The DuckDB store: real files, real processes reading while others write."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import duckdb

from engine.landscape.store import SCHEMA_VERSION, Store
from engine.sim.simulate import run_point
from tests.helpers import REPO


def _records(n: int) -> list[dict]:
    base = run_point("synthetic-mlp", ratio=0.5)
    return [{**base, "budget": base["budget"] + i} for i in range(n)]


def test_publish_read_compact(tmp_path: Path) -> None:
    store = Store.open(tmp_path / "landscape.duckdb")
    ids = store.add_runs(_records(3), source="engine", cap=60)
    assert store.stats()["runs"] == 3 and store.stats()["parts"] == 1
    assert store.compact() == 1
    assert store.stats() == {"runs": 3, "traces": 0, "walks": 0, "sweeps": 0, "parts": 0}
    assert store.schema_version() == SCHEMA_VERSION
    record = store.run(ids[0])
    assert record is not None
    assert record["status"] == "ok" and record["cap"] == 60.0
    assert record["same_execution"]["lo"] <= record["budget"]
    assert record["failure"] is None and record["retained"] == []
    # The same run published again (e.g. a reader racing a compaction) is counted once.
    store.add_rows("runs", store.runs().to_dict("records")[:1])
    assert store.stats()["runs"] == 3


def test_upgrades_an_older_snapshot(tmp_path: Path) -> None:
    path = tmp_path / "old.duckdb"
    con = duckdb.connect(str(path))
    # A version-0 store: no meta table, runs without several of today's columns.
    con.execute("CREATE TABLE runs (run_id VARCHAR, trace VARCHAR, budget BIGINT, status VARCHAR)")
    con.execute("INSERT INTO runs VALUES ('r1', 'resnet32', 1000, 'oom')")
    con.close()
    store = Store.open(path)
    assert store.schema_version() == 0
    store.compact()
    assert store.schema_version() == SCHEMA_VERSION
    frame = store.runs()
    assert list(frame["run_id"]) == ["r1"] and frame["overhead"].isna().all()


WRITER = """
import sys
from engine.sim.simulate import run_point
from engine.landscape.store import Store
store = Store.open(sys.argv[1])
base = run_point("synthetic-mlp", ratio=0.5)
for i in range(500):
    store.add_runs([{**base, "budget": base["budget"] + i}], source="engine")
    if i % 100 == 99:
        store.compact()
print("done")
"""

READER = """
import json, sys, time
from engine.landscape.store import Store
store = Store.open(sys.argv[1])
seen, slowest = [], 0.0
deadline = time.time() + 120
while time.time() < deadline:
    t = time.time()
    frame = store.query("SELECT count(*) AS n, count(status) AS s, count(clock) AS c FROM runs")
    slowest = max(slowest, time.time() - t)
    n, s, c = (int(frame.iloc[0][k]) for k in ("n", "s", "c"))
    assert n == s == c, (n, s, c)  # never a half-written run
    seen.append(n)
    if n == 500:
        break
print(json.dumps({"seen": seen, "slowest": slowest}))
"""


def test_readers_never_wait_for_a_500_run_sweep(tmp_path: Path) -> None:
    db = str(tmp_path / "landscape.duckdb")
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER, db], cwd=REPO, stdout=subprocess.PIPE, text=True
    )
    time.sleep(0.5)
    readers = [
        subprocess.Popen(
            [sys.executable, "-c", READER, db], cwd=REPO, stdout=subprocess.PIPE, text=True
        )
        for _ in range(2)
    ]
    out_w, _ = writer.communicate(timeout=300)
    assert writer.returncode == 0 and out_w.strip() == "done"
    for reader in readers:
        out, _ = reader.communicate(timeout=300)
        assert reader.returncode == 0
        result = json.loads(out)
        assert result["seen"] == sorted(result["seen"])  # counts only grow: nothing lost
        assert result["seen"][-1] == 500
        assert len(result["seen"]) > 3  # it read many times while the writer ran
    assert Store.open(db).stats()["runs"] == 500


def test_newest_part_wins_before_and_after_compaction(tmp_path: Path) -> None:
    store = Store.open(tmp_path / "landscape.duckdb")
    for reached in (10, 20, 30):
        store.add_walk(walk_id="w1", kind="landscape", trace="t", reached=reached, complete=False)
    assert store.query("SELECT reached FROM walks")["reached"].tolist() == [30]
    store.compact()
    store.add_walk(walk_id="w1", kind="landscape", trace="t", reached=40, complete=True)
    assert store.query("SELECT reached FROM walks")["reached"].tolist() == [40]


def test_compaction_removes_only_abandoned_temporaries(tmp_path: Path) -> None:
    import os

    store = Store.open(tmp_path / "landscape.duckdb")
    old = store.parts_dir / ".runs-1.parquet.tmp"
    fresh = store.parts_dir / ".runs-2.parquet.tmp"
    old.write_bytes(b"half a part")
    fresh.write_bytes(b"being written")
    os.utime(old, (time.time() - 3600, time.time() - 3600))
    store.add_runs(_records(1), source="engine")
    store.compact()
    assert not old.exists() and fresh.exists()
