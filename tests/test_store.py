"""The DuckDB store: real files, real processes reading while others write."""

from __future__ import annotations

import json
import multiprocessing
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import duckdb
import pytest

from engine.landscape.store import SCHEMA_VERSION, Store
from engine.sim.simulate import run_point
from tests.helpers import REPO, cli


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


def test_runs_of_one_budget_and_start_are_listed_in_one_order(tmp_path: Path) -> None:
    """Two runs of one budget can share a start time (a walk's run re-entered beside a
    grid's); every read of the store, by pandas or in plain rows, all columns or some,
    before and after compaction, lists them in one order: by run id."""
    from engine.landscape.listing import stored_runs

    store = Store.open(tmp_path / "landscape.duckdb")
    base = run_point("synthetic-mlp", ratio=0.5)
    for stage in ("grid", "walk", "refine"):
        store.add_runs([base] * 12, source="engine", cap=60, stage=stage)
        if stage == "walk":
            store.compact()
    sha = base["trace_sha256"]
    for _ in range(2):
        ids = store.runs(sha)["run_id"].tolist()
        assert len(ids) == 36 and ids == sorted(ids)
        assert store.runs(sha, columns=["run_id", "stage"])["run_id"].tolist() == ids
        listed = stored_runs("synthetic-mlp", db=str(tmp_path / "landscape.duckdb"))
        assert [r["run_id"] for r in listed] == ids
        store.compact()


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


# The writer: a 500-run sweep, one part per run and a compaction every 100 runs. At three
# points mid-sweep it stops in its most intrusive state, compaction's exclusive lock held and
# a part half written (under its temporary name), and marks the pause in a file; it resumes
# only when the test says so, which the test does only after readers finished reads inside
# the pause. So a read that waited for the writer would never return, whatever the timing.
WRITER = """
import fcntl, os, sys
from engine.sim.simulate import run_point
from engine.landscape.store import Store
store = Store.open(sys.argv[1])
marker = sys.argv[2]
base = run_point("synthetic-mlp", ratio=0.5)
for i in range(1, 501):
    store.add_runs([{**base, "budget": base["budget"] + i}], source="engine")
    if i % 100 == 0:
        store.compact()
    if i in (125, 250, 375):
        with open(store.lock_path, "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            half = store.parts_dir / f".runs-paused-{i}.parquet.tmp"
            half.write_bytes(b"PAR1 half a part")
            with open(marker + ".tmp", "w") as f:
                f.write(str(i))
            os.replace(marker + ".tmp", marker)
            print(f"paused {i}", flush=True)
            sys.stdin.readline()
            os.unlink(marker)
            half.unlink()
print("done", flush=True)
"""

# A reader: reads until it has seen all 500 runs, one JSON line per read. `pause` names the
# writer's pause that the read began and ended in (the marker's content, the same before and
# after), or null. Errors are reported, not raised, so the test sees every one.
READER = """
import json, sys
from engine.landscape.store import Store
store = Store.open(sys.argv[1])
marker = sys.argv[2]
def pause():
    try:
        with open(marker) as f:
            return f.read()
    except FileNotFoundError:
        return None
while True:
    before = pause()
    try:
        frame = store.query(
            "SELECT count(*) AS n, count(status) AS s, count(clock) AS c FROM runs"
        )
    except Exception as exc:
        print(json.dumps({"error": f"{type(exc).__name__}: {exc}"}), flush=True)
        continue
    after = pause()
    n, s, c = (int(frame.iloc[0][k]) for k in ("n", "s", "c"))
    within = before if before is not None and before == after else None
    print(json.dumps({"n": n, "s": s, "c": c, "pause": within}), flush=True)
    if n == 500:
        break
"""

# How long a process may stay silent before the test gives up on it: a guard against a
# hang (a read that waits for the paused writer never returns), not a measure of speed.
SILENT_LIMIT_S = 300


class _Output:
    """A child's stdout, line by line, read by a thread so the test can wait on it."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        self.process = process
        self.lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)

    def next(self) -> str:
        try:
            line = self.lines.get(timeout=SILENT_LIMIT_S)
        except queue.Empty:
            pytest.fail(f"no output for {SILENT_LIMIT_S} s: a read waiting for the writer?")
        if line is None:
            pytest.fail(f"process ended early (exit {self.process.wait()})")
        return line


def test_readers_never_wait_for_a_500_run_sweep(tmp_path: Path) -> None:
    db, marker = str(tmp_path / "landscape.duckdb"), str(tmp_path / "writer-paused")
    start = {"cwd": REPO, "stdout": subprocess.PIPE, "text": True}
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER, db, marker], stdin=subprocess.PIPE, **start
    )
    readers = [subprocess.Popen([sys.executable, "-c", READER, db, marker], **start)]
    readers.append(subprocess.Popen([sys.executable, "-c", READER, db, marker], **start))
    try:
        from_writer = _Output(writer)
        reads: list[list[dict]] = [[], []]
        outputs = [_Output(reader) for reader in readers]
        for published in (125, 250, 375):
            assert from_writer.next() == f"paused {published}"
            # Each reader completes three reads that begin and end while the writer is
            # stopped mid-sweep, lock held: they cannot have waited for it.
            for seen, output in zip(reads, outputs, strict=True):
                while sum(r.get("pause") == str(published) for r in seen) < 3:
                    seen.append(json.loads(output.next()))
            assert writer.stdin is not None
            writer.stdin.write("go\n")
            writer.stdin.flush()
        assert from_writer.next() == "done"
        for seen, output in zip(reads, outputs, strict=True):
            while not seen or seen[-1].get("n") != 500:
                seen.append(json.loads(output.next()))
        assert writer.wait() == 0 and all(reader.wait() == 0 for reader in readers)
    finally:
        for process in (writer, *readers):
            process.kill()
            process.wait()

    for seen in reads:
        assert [r["error"] for r in seen if "error" in r] == []  # no read failed, on a lock or else
        counts = [r["n"] for r in seen]
        assert all(r["n"] == r["s"] == r["c"] for r in seen)  # never a half-written run
        assert counts == sorted(counts) and counts[-1] == 500  # counts only grow: nothing lost
        paused = [r for r in seen if r["pause"] is not None]
        assert all(r["n"] == int(r["pause"]) for r in paused)  # exactly what was published
        assert len([n for n in counts if 0 < n < 500]) >= 9  # many reads mid-sweep
    assert Store.open(db).stats()["runs"] == 500


def test_newest_part_wins_before_and_after_compaction(tmp_path: Path) -> None:
    store = Store.open(tmp_path / "landscape.duckdb")
    for reached in (10, 20, 30):
        store.add_walk(walk_id="w1", kind="landscape", trace="t", reached=reached, complete=False)
    assert store.query("SELECT reached FROM walks")["reached"].tolist() == [30]
    store.compact()
    store.add_walk(walk_id="w1", kind="landscape", trace="t", reached=40, complete=True)
    assert store.query("SELECT reached FROM walks")["reached"].tolist() == [40]


def test_a_part_replaces_the_snapshot_row_under_a_filter(tmp_path: Path) -> None:
    # The views rank only the parts and keep the snapshot's rows no part replaces: a
    # filtered, projected read sees each run once, in its newest form.
    store = Store.open(tmp_path / "landscape.duckdb")
    ids = store.add_runs(_records(4), source="engine")
    store.compact()
    first = store.runs().to_dict("records")[0]
    store.add_rows("runs", [{**first, "status": "oom"}])
    store.add_rows("runs", [{**first, "status": "thrashed"}])
    frame = store.query(
        "SELECT run_id, status FROM runs WHERE trace = ? AND status <> 'x' ORDER BY run_id",
        [first["trace"]],
    )
    assert sorted(frame["run_id"]) == sorted(ids)
    assert dict(zip(frame["run_id"], frame["status"], strict=True))[first["run_id"]] == "thrashed"
    assert store.stats()["runs"] == 4
    store.compact()  # the snapshot alone, then the parts alone (a fresh store)
    assert store.run(first["run_id"])["status"] == "thrashed"  # type: ignore[index]
    fresh = Store.open(tmp_path / "parts-only.duckdb")
    fresh.add_rows("runs", [{**first, "status": "oom"}])
    fresh.add_rows("runs", [{**first, "status": "ok"}])
    assert fresh.query("SELECT status FROM runs")["status"].tolist() == ["ok"]


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


def test_every_column_type_round_trips_without_pandas(tmp_path: Path) -> None:
    # Parts are written from Arrow buffers (engine/landscape/columns.py), not pyarrow's
    # conversion, which imports pandas. The values come back as written, nulls included, in
    # a process that never loads pandas.
    probe = f"""
import json
import sys
from datetime import datetime, timedelta, timezone
from engine.landscape.store import Store
store = Store.open({str(tmp_path / "s.duckdb")!r})
aware = datetime(2026, 3, 4, 5, 6, 7, 890123, tzinfo=timezone(timedelta(hours=2)))
store.add_walk(walk_id="w1", trace="t\u00e9", cap=60.0, from_budget=-(2**63), to_budget=2**63 - 1,
               complete=True, started_at=datetime(1969, 12, 31, 23, 59, 59, 999999), ended_at=aware)
store.add_walk(walk_id="w2", trace=None, cap=float("nan"), from_budget=12.0, complete=False)
rows = store.rows("SELECT walk_id, trace, cap, from_budget, to_budget, complete, started_at, "
                  "ended_at FROM walks ORDER BY walk_id")
# a batch at a time (through Arrow): the same values, of the same types
every = "SELECT * FROM walks ORDER BY walk_id"
batches = list(store.row_batches(every, size=1))
assert [len(b) for b in batches] == [1, 1]
assert repr([r for b in batches for r in b]) == repr(store.rows(every))
assert "pandas" not in sys.modules
print(json.dumps(rows, default=datetime.isoformat))
"""
    out = subprocess.run(
        [sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout
    assert json.loads(out) == [
        {
            "walk_id": "w1",
            "trace": "t\u00e9",
            "cap": 60.0,
            "from_budget": -(2**63),
            "to_budget": 2**63 - 1,
            "complete": True,
            "started_at": "1969-12-31T23:59:59.999999",
            "ended_at": "2026-03-04T03:06:07.890123",  # its UTC wall clock
        },
        {
            "walk_id": "w2",
            "trace": None,
            "cap": None,
            "from_budget": 12,
            "to_budget": None,
            "complete": False,
            "started_at": None,
            "ended_at": None,
        },
    ]


@pytest.mark.parametrize(
    ("column", "value", "message"),
    [
        ("from_budget", 1.5, r"walks\.from_budget: row 1: expected BIGINT, got 1\.5"),
        ("from_budget", "12", r"walks\.from_budget: row 1: expected BIGINT, got '12'"),
        ("from_budget", 2**63, r"from_budget: row 1: expected BIGINT, got 9223372036854775808"),
        ("cap", "60", r"walks\.cap: row 1: expected DOUBLE, got '60'"),
        ("trace", 7, r"walks\.trace: row 1: expected text, got 7"),
        ("complete", 1, r"walks\.complete: row 1: expected BOOLEAN, got 1"),
        ("started_at", "2026-01-01", r"walks\.started_at: row 1: expected TIMESTAMP, got '2026"),
    ],
)
def test_a_wrong_value_is_refused_by_column_and_row(
    tmp_path: Path, column: str, value: object, message: str
) -> None:
    from engine.landscape.store import StoreError

    store = Store.open(tmp_path / "s.duckdb")
    good = {"walk_id": "w0", "trace": "t", "cap": 60.0, "from_budget": 1, "complete": True}
    with pytest.raises(StoreError, match=message):
        store.add_rows("walks", [good, {**good, "walk_id": "w1", column: value}])
    assert store.stats()["walks"] == 0 and not list(store.parts_dir.iterdir())


def _count(store: Store) -> int:
    return int(store.rows("SELECT count(*) AS n FROM runs")[0]["n"])


def _count_in_child(path: str, out: Any) -> None:
    out.put(_count(Store.open(path)))


def test_a_reading_connection_is_kept_until_the_store_changes(tmp_path: Path) -> None:
    path = tmp_path / "landscape.duckdb"
    store = Store.open(path)
    store.add_runs(_records(3), source="engine")
    with store.connect() as first:
        pass
    with Store.open(path).connect() as again:  # another Store of the same file: the same
        assert again is first
    assert _count(store) == 3
    store.add_runs([{**_records(4)[3]}], source="engine")  # a part published: new views
    with store.connect() as after_publish:
        assert after_publish is not first
    assert _count(store) == 4
    store.compact()  # a new snapshot, the parts gone
    with store.connect() as after_compaction:
        assert after_compaction is not after_publish
        assert _count(store) == 4  # a read inside a read has a connection of its own
    assert store.stats() == {"runs": 4, "traces": 0, "walks": 0, "sweeps": 0, "parts": 0}
    with pytest.raises(duckdb.Error):
        store.rows("SELECT no_such_column FROM runs")
    with store.connect() as after_error:  # a failed read leaves no connection behind
        assert after_error is not after_compaction
    assert _count(store) == 4
    # another thread has its own connection; a child process forked while this one holds
    # its connection opens its own and reads the same
    seen: list[int] = []
    thread = threading.Thread(target=lambda: seen.append(_count(Store.open(path))))
    thread.start()
    thread.join()
    assert seen == [4]
    context = multiprocessing.get_context("fork")
    out = context.Queue()
    child = context.Process(target=_count_in_child, args=(str(path), out))
    child.start()
    assert out.get(timeout=120) == 4
    child.join(timeout=120)
    assert child.exitcode == 0
    assert _count(store) == 4


def test_a_read_of_a_store_that_is_not_there_says_so_and_makes_nothing(tmp_path: Path) -> None:
    """A mistyped --db on a read (holes, runs, export, diverge) names the path instead of
    answering from an empty store it would make; a file that is not a store is refused by
    readers and writers alike, and nothing is made beside it."""
    from engine.landscape.store import StoreError

    env = {"DTR_LANDSCAPE_CACHE": str(tmp_path / "cache"), "DTR_LANDSCAPE_TRACES": ""}
    missing = tmp_path / "typo.duckdb"
    with pytest.raises(StoreError, match=r"no store at .*typo\.duckdb: neither the file nor"):
        Store.existing(missing)
    for args in (
        ["holes", "synthetic-mlp"],
        ["holes", "--all"],
        ["runs", "synthetic-mlp"],
        ["export", "--csv", str(tmp_path / "out.csv")],
        ["diverge", "--runs", "a" * 32, "b" * 32],
    ):
        done = cli(*args, "--db", str(missing), env=env)
        assert done.returncode == 2, (args, done.stderr)
        assert done.stderr.strip() == (
            f"dtr-landscape: error: no store at {missing}: neither the file nor "
            "typo.duckdb.parts/ beside it exists (sweep, landscape and import-records make one)"
        )
    text = tmp_path / "notes.txt"
    text.write_text("not a store\n")
    folder = tmp_path / "folder.duckdb"
    folder.mkdir()
    for path, words in ((text, "not a DuckDB database file"), (folder, "not a file")):
        for opened in (Store.open, Store.existing):
            with pytest.raises(StoreError, match=words):
                opened(path)
        done = cli("sweep", "synthetic-mlp", "--grid", "0.4:0.5:0.1", "--db", str(path), env=env)
        assert done.returncode == 2 and words in done.stderr, done.stderr
        assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    made = sorted(p.name for p in tmp_path.iterdir() if p.name != "cache")
    assert made == ["folder.duckdb", "notes.txt"]
    assert text.read_text() == "not a store\n"
    Store.open(missing).add_runs([])  # a writer makes the store; then a reader finds it
    assert Store.existing(missing).stats()["runs"] == 0


def test_query_frames_from_arrow_equal_duckdbs_own(tmp_path: Path) -> None:
    """`query` builds its DataFrame from the result's Arrow table (several times faster for
    text); it is the frame DuckDB's `.df()` gives, dtypes and nulls included: integers with a
    NULL as Int64, text of NULLs only as objects, empty results, a snapshot and parts."""
    import pandas as pd

    from engine.landscape.store_frames import frame_from_arrow

    store = Store.open(tmp_path / "landscape.duckdb")
    runs = [run_point("synthetic-mlp", ratio=r) for r in (0.05, 0.3, 0.6, 1.0)]
    store.add_runs(runs, source="engine", cap=60)
    store.compact()  # some rows in the snapshot, some in a part
    store.add_runs([{**runs[1], "same_execution": None}], source="import:test", cap=60)
    statuses = set(store.query("SELECT status FROM runs")["status"])
    assert "ok" in statuses and statuses - {"ok"}  # failing runs: failure_* set and NULL
    queries = [
        "SELECT * FROM runs",
        "SELECT * FROM runs WHERE false",
        "SELECT run_id, retained, stage, same_lo, same_hi, started_at FROM runs ORDER BY run_id",
        "SELECT status, count(*) AS n, fsum(wall_s) AS s FROM runs GROUP BY status",
        "SELECT DISTINCT policy FROM runs",
        "SELECT * FROM walks",
        "SELECT sum(budget) AS total FROM runs",  # HUGEINT: not a store type, .df() converts
        "SELECT run_id, budget, budget FROM runs",  # a name twice: .df() names the second
    ]
    converted = 0
    for sql in queries:
        with store.connect() as con:
            expected = con.execute(sql).df()
            converted += frame_from_arrow(con.sql(sql).to_arrow_table()) is not None
        pd.testing.assert_frame_equal(store.query(sql), expected, check_column_type=True)
    assert converted == len(queries) - 3  # walks' booleans, the sum, the repeated name: .df()
    frame = store.runs("synthetic-mlp", columns=["run_id", "same_hi", "failure_operator"])
    assert (
        str(frame["failure_operator"].dtype) == "Int64" and frame["failure_operator"].isna().any()
    )
