"""Imports (DTR logs, the paper's evidence table, simrd's pareto JSON) and exports, end to end:
the real CLI in subprocesses, real DuckDB stores on disk."""

from __future__ import annotations

import csv
import hashlib
import io
import json
import shutil
import zipfile
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from engine.landscape.store import RUN_COLUMNS, Store
from engine.sim.simulate import run_point
from tests.helpers import REPO, cli, cli_json

FIXTURES = REPO / "tests" / "fixtures"
EVIDENCE = FIXTURES / "evidence" / "resnet-inception.csv"
PARETO = FIXTURES / "pareto" / "2020-10-02-ResNet-32 (56)-DTR.json"
SYNTHETIC = REPO / "traces" / "synthetic-mlp.log"
RESNET_SHA = "38c94cada99aca654ad9589d99eabc2267a51835593b598085f9f8221a7bacaf"


@pytest.fixture()
def env(tmp_path: Path) -> dict[str, str]:
    """A private cache, and a traces folder whose manifest knows resnet32 only."""
    traces = tmp_path / "dtr-traces"
    traces.mkdir()
    manifest = {"traces": [{"name": "resnet32", "file": "resnet32.log", "sha256": RESNET_SHA}]}
    (traces / "traces.json").write_text(json.dumps(manifest))
    return {"DTR_LANDSCAPE_CACHE": str(tmp_path / "cache"), "DTR_LANDSCAPE_TRACES": str(traces)}


@pytest.fixture()
def db(tmp_path: Path) -> Path:
    return tmp_path / "store" / "landscape.duckdb"


def _state(store: Store) -> tuple[dict[str, int], list[tuple[str, bytes]], bytes | None]:
    """Everything a failed import must not change: counts, every part's bytes, the snapshot."""
    parts = sorted((p.name, p.read_bytes()) for p in store.parts_dir.iterdir())
    snapshot = store.path.read_bytes() if store.path.exists() else None
    return store.stats(), parts, snapshot


def _evidence_rows() -> list[list[str]]:
    return list(csv.reader(io.StringIO(EVIDENCE.read_text())))


def _write_csv(path: Path, rows: list[list[str]]) -> Path:
    with open(path, "w", newline="") as f:
        csv.writer(f, lineterminator="\n").writerows(rows)
    return path


# -- the evidence table -------------------------------------------------------------------------
def test_evidence_table_imports_with_its_source_tag(db: Path, env: dict[str, str]) -> None:
    summary = cli_json("import-records", str(EVIDENCE), "--db", str(db), env=env)
    assert summary["format"] == "evidence"
    assert summary["source"] == "import:evidence:resnet-inception.csv"
    assert (summary["rows"], summary["imported"], summary["excluded"]) == (13, 13, 1)
    assert summary["statuses"] == {"ok": 5, "oom": 5, "timeout": 2, "recursion": 1}

    store = Store.open(db)
    runs = store.runs()
    assert len(runs) == 13
    assert set(runs["source"]) == {"import:evidence:resnet-inception.csv"}
    tag = hashlib.sha256(EVIDENCE.read_bytes()).hexdigest()[:8]
    assert all(rid.startswith(f"evidence:{tag}:") for rid in runs["run_id"])
    # paper spellings (resnet, ResNet-32, inception, InceptionV4) map onto our names
    assert set(runs["trace"]) == {"resnet32", "inceptionv4"}
    resnet = store.runs(trace="resnet32")
    assert list(resnet["ratio"]) == [0.101, 0.102, 0.104, 0.106, 0.107]
    assert list(resnet["status"]) == ["ok", "oom", "oom", "oom", "ok"]  # "OOM", "fail (OOM)"
    assert set(resnet["trace_sha256"]) == {RESNET_SHA}  # from the traces manifest
    assert store.runs(trace="inceptionv4")["trace_sha256"].isna().all()  # unknown: null

    record = store.run(f"evidence:{tag}:E-002343a")
    assert record is not None
    assert record["budget"] == 2_634_785_825 and record["overhead"] == pytest.approx(1.4709, 1e-4)
    assert (record["peak_pinned"], record["depth_at_peak_pinned"]) == (986_579_316, 1)
    assert record["max_nesting_depth"] == 30 and record["cap"] == 60.0 and record["stage"] == "E"
    oom = store.run(f"evidence:{tag}:E-002350a")
    assert oom is not None and oom["status"] == "oom" and oom["overhead"] is None
    recursion = store.run(f"evidence:{tag}:E-002350s")
    assert recursion is not None and recursion["status"] == "recursion"
    excluded = store.run(f"evidence:{tag}:E-002425b")
    assert excluded is not None
    assert excluded["stage"] == "excluded:E" and excluded["status"] == "timeout"
    kept = store.query("SELECT count(*) AS n FROM runs WHERE stage NOT LIKE 'excluded:%'")
    assert kept["n"][0] == 12

    # the same file again adds nothing: same run ids, no new part
    before = _state(store)
    again = cli_json("import-records", str(EVIDENCE), "--db", str(db), env=env)
    assert (again["imported"], again["already_imported"]) == (0, 13)
    assert _state(store) == before


def test_source_tag_option(db: Path, env: dict[str, str]) -> None:
    summary = cli_json(
        "import-records", str(EVIDENCE), "--source", "paper-v1", "--db", str(db), env=env
    )
    assert summary["source"] == "paper-v1"
    assert set(Store.open(db).runs()["source"]) == {"paper-v1"}


def _bad_ratio_and_status(rows: list[list[str]]) -> list[list[str]]:
    header = rows[0]
    rows[2][header.index("budget_ratio")] = "abc"  # line 3
    rows[4][header.index("budget_ratio")] = "2.5"  # line 5
    rows[6][header.index("status")] = "maybe"  # line 7
    rows[9][header.index("budget_bytes")] = "12.5"  # line 10
    return rows


def _missing_columns(rows: list[list[str]]) -> list[list[str]]:
    drop = [rows[0].index("budget_ratio"), rows[0].index("status")]
    return [[cell for i, cell in enumerate(row) if i not in drop] for row in rows]


def _repeated_id_and_trace(rows: list[list[str]]) -> list[list[str]]:
    rows[3][0] = rows[1][0]  # line 4 repeats line 2's run id
    rows[8][rows[0].index("trace")] = "vgg16"  # line 9
    return rows


def _path_in_run_id(rows: list[list[str]]) -> list[list[str]]:
    rows[2][0] = "../../x"  # line 3: would be events/../../x.parquet
    rows[5][0] = "a/b"  # line 6
    return rows


@pytest.mark.parametrize(
    ("spoil", "words"),
    [
        (
            _path_in_run_id,
            [
                "row 3: run_id must be 1 to 128 letters, digits, '_', '.' or '-' starting with "
                "a letter or digit, without '..' (segments may be joined by ':'), got '../../x'",
                "row 6: run_id must be",
            ],
        ),
        (
            _bad_ratio_and_status,
            [
                "rows 3, 5: budget_ratio must be a number in (0, 2]; row 7: unknown status 'maybe'",
                "row 10: budget_bytes must be a whole number of bytes",
            ],
        ),
        (_missing_columns, ["line 1: missing columns budget_ratio, status"]),
        (
            _repeated_id_and_trace,
            ["row 4: run_id 'A-000101' repeats row 2", "row 9: unknown trace 'vgg16'"],
        ),
    ],
)
def test_malformed_evidence_leaves_the_store_unchanged(
    tmp_path: Path, db: Path, env: dict[str, str], spoil: Any, words: list[str]
) -> None:
    # a store with a snapshot and a part, so both must survive untouched
    cli_json("import-records", str(PARETO), "--db", str(db), env=env)
    Store.open(db).compact()
    cli_json("import-records", str(EVIDENCE), "--source", "first", "--db", str(db), env=env)
    store = Store.open(db)
    before = _state(store)
    bad = _write_csv(tmp_path / "evidence.csv", spoil(_evidence_rows()))
    done = cli("import-records", str(bad), "--db", str(db), env=env)
    assert done.returncode == 2
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert done.stderr.startswith(f"dtr-landscape: error: {bad}: ")
    assert all(w in done.stderr for w in words), done.stderr
    assert _state(store) == before
    # nothing was written anywhere else either (an id like ../../x names no file)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dtr-traces", "evidence.csv", "store"]


def test_many_problems_stay_on_one_line(tmp_path: Path, db: Path, env: dict[str, str]) -> None:
    rows = _evidence_rows()
    for i, row in enumerate(rows[1:], start=1):
        row[rows[0].index("status")] = f"odd{i}"
    bad = _write_csv(tmp_path / "odd.csv", rows)
    done = cli("import-records", str(bad), "--db", str(db), env=env)
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1
    assert "row 2: unknown status 'odd1'" in done.stderr and "and 3 more problems" in done.stderr
    assert Store.open(db).stats()["runs"] == 0


# -- simrd's pareto output ----------------------------------------------------------------------
def test_pareto_json_imports_one_run_per_trial(db: Path, env: dict[str, str]) -> None:
    summary = cli_json("import-records", str(PARETO), "--db", str(db), env=env)
    assert summary["format"] == "pareto" and summary["source"] == f"import:pareto:{PARETO.name}"
    assert summary["statuses"] == {"oom": 1, "thrashed": 2, "ok": 2}
    runs = Store.open(db).runs()
    config = json.loads(PARETO.read_text())["config"]
    compute = config["baseline_compute"]
    assert list(runs["ratio"]) == [0.1, 0.3, 0.3, 0.5, 1.0]
    assert list(runs["status"]) == ["oom", "thrashed", "thrashed", "ok", "ok"]
    assert list(runs["repeat"]) == [0, 0, 1, 0, 0]
    assert set(runs["trace"]) == {"resnet32"} and set(runs["trace_sha256"]) == {RESNET_SHA}
    assert set(runs["policy"]) == {"DTR"} and set(runs["cap"]) == {2.0}
    assert set(runs["peak"]) == {config["baseline_memory"]} and set(runs["model_compute"]) == {
        compute
    }
    assert set(runs["stage"]) == {"RuntimeV2EagerOptimized"}
    ok = runs[runs["status"] == "ok"]
    # simrd's clock starts at 1: the clock is recovered exactly and the overhead is ours
    assert list(ok["clock"]) == [1 + compute + 80_123_456, 1 + compute]
    assert list(ok["remat_compute"]) == [80_123_456, 0]
    assert list(ok["overhead"]) == [(compute + 80_123_456) / compute, 1.0]
    assert runs[runs["status"] != "ok"]["overhead"].isna().all()


def test_malformed_pareto_is_rejected(tmp_path: Path, db: Path, env: dict[str, str]) -> None:
    doc = json.loads(PARETO.read_text())
    doc["results"][1]["OOM"] = [False, "no"]
    doc["results"][2]["overhead"] = []
    del doc["config"]["baseline_compute"]
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(doc))
    done = cli("import-records", str(bad), "--db", str(db), env=env)
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1
    assert "config.baseline_compute: must be a positive whole number" in done.stderr
    doc["config"]["baseline_compute"] = 1000
    bad.write_text(json.dumps(doc))
    done = cli("import-records", str(bad), "--db", str(db), env=env)
    assert "results[1].OOM: must be a list of true/false" in done.stderr
    assert "results[2]: OOM, remat_exceeded, overhead, total_time need one entry" in done.stderr
    bad.write_text("{")
    done = cli("import-records", str(bad), "--db", str(db), env=env)
    assert done.returncode == 2 and "line 1: invalid JSON" in done.stderr
    assert Store.open(db).stats()["runs"] == 0


# -- DTR logs -----------------------------------------------------------------------------------
def test_import_traces_from_a_folder_by_hash(tmp_path: Path, db: Path, env: dict[str, str]) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    shutil.copy(SYNTHETIC, logs / SYNTHETIC.name)
    sha = hashlib.sha256(SYNTHETIC.read_bytes()).hexdigest()
    summary = cli_json("import-traces", str(logs), "--db", str(db), env=env)
    assert [t["sha256"] for t in summary["registered"]] == [sha] and summary["skipped"] == []
    traces = Store.open(db).query("SELECT * FROM traces")
    row = traces.iloc[0]
    assert (row["name"], row["sha256"]) == ("synthetic", sha)  # the stem up to the first '-'
    assert (row["peak"], row["operators"], row["model_compute"]) == (39_796_892, 274, 658_964_740)
    assert row["source"] == str(logs.resolve()) and row["path"] == str(logs / SYNTHETIC.name)

    store = Store.open(db)
    before = _state(store)
    again = cli_json("import-traces", str(logs), "--db", str(db), env=env)
    assert again["registered"] == [] and [t["sha256"] for t in again["skipped"]] == [sha]
    assert _state(store) == before


def test_import_traces_from_a_zip(tmp_path: Path, db: Path, env: dict[str, str]) -> None:
    archive = tmp_path / "logs.zip"
    manifest = {"traces": [{"name": "mlp", "file": "synthetic-mlp.log"}]}
    with zipfile.ZipFile(archive, "w") as zf:
        zf.write(SYNTHETIC, "logs/synthetic-mlp.log")
        zf.writestr("logs/traces.json", json.dumps(manifest))
    sha = hashlib.sha256(SYNTHETIC.read_bytes()).hexdigest()
    summary = cli_json("import-traces", str(archive), "--db", str(db), env=env)
    content = db.parent / "traces" / f"{sha}.log"
    assert summary["registered"] == [{"name": "mlp", "sha256": sha, "path": str(content)}]
    assert content.read_bytes() == SYNTHETIC.read_bytes()
    assert sorted(p.name for p in content.parent.iterdir()) == [content.name]  # no temporaries
    row = Store.open(db).query("SELECT * FROM traces").iloc[0]
    assert row["source"] == str(archive.resolve()) and row["path"] == str(content)
    again = cli_json("import-traces", str(archive), "--db", str(db), env=env)
    assert again["registered"] == [] and len(again["skipped"]) == 1


@pytest.mark.needs_simrd
def test_import_the_dtr_artifact_zip(simrd_dir: Path, db: Path) -> None:
    """simrd/logs.zip as released: logs/*.log with simrd's own manifest.json."""
    archive = simrd_dir / "logs.zip"
    summary = cli_json(
        "import-traces", str(archive), "--db", str(db), env={"DTR_LANDSCAPE_TRACES": ""}
    )
    names = {t["name"]: t["sha256"] for t in summary["registered"]}
    assert sorted(names) == [
        "densenet121",
        "inceptionv4",
        "lstm",
        "resnet32",
        "transformer",
        "treelstm",
        "unet",
        "unrolled_gan",
    ]
    assert names["resnet32"] == RESNET_SHA
    peaks = Store.open(db).query("SELECT name, peak FROM traces WHERE name = 'inceptionv4'")
    assert peaks["peak"][0] == 11_245_351_368  # 0.2343 of it is the paper's 2,634,785,825


def _broken_log(path: Path) -> Path:
    lines = SYNTHETIC.read_text().splitlines()
    lines[4] = '{"INSTRUCTION": "RELEASE", "NAME": '  # line 5: cut short
    path.write_text("\n".join(lines) + "\n")
    return path


def test_a_malformed_log_registers_nothing(tmp_path: Path, db: Path, env: dict[str, str]) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    shutil.copy(SYNTHETIC, logs / SYNTHETIC.name)
    broken = _broken_log(logs / "zz-broken.log")
    done = cli("import-traces", str(logs), "--db", str(db), env=env)
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert f"{broken}:5: invalid JSON" in done.stderr
    assert Store.open(db).stats()["traces"] == 0 and Store.open(db).stats()["parts"] == 0

    archive = tmp_path / "logs.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.write(SYNTHETIC, "logs/synthetic-mlp.log")
        zf.write(broken, "logs/zz-broken.log")
    done = cli("import-traces", str(archive), "--db", str(db), env=env)
    assert done.returncode == 2
    assert f"{archive}:logs/zz-broken.log:5: invalid JSON" in done.stderr
    assert Store.open(db).stats()["traces"] == 0
    assert list((db.parent / "traces").iterdir()) == []  # nothing extracted either


def test_import_traces_bad_source(tmp_path: Path, db: Path, env: dict[str, str]) -> None:
    for source, words in [
        (tmp_path / "nowhere", "no such file"),
        (tmp_path, "no *.log files"),
        (SYNTHETIC, "neither a folder of DTR logs nor a zip"),
    ]:
        done = cli("import-traces", str(source), "--db", str(db), env=env)
        assert done.returncode == 2 and words in done.stderr, done.stderr


# -- export -------------------------------------------------------------------------------------
def test_export_round_trips(tmp_path: Path, db: Path, env: dict[str, str]) -> None:
    cli_json("import-records", str(EVIDENCE), "--db", str(db), env=env)
    cli_json("import-records", str(PARETO), "--db", str(db), env=env)
    store = Store.open(db)
    # engine runs carry same-execution intervals
    records = [run_point("synthetic-mlp", ratio=r) for r in (0.5, 0.3, 0.05)]
    store.add_runs(records, source="engine", cap=60)
    total = store.stats()["runs"]
    assert total == 13 + 5 + 3
    names = [name for name, _ in RUN_COLUMNS]

    out = cli_json("export", "--csv", str(tmp_path / "runs.csv"), "--db", str(db), env=env)
    assert out == {"table": "runs", "format": "csv", "path": str(tmp_path / "runs.csv"), "rows": 21}
    frame = pd.read_csv(tmp_path / "runs.csv")
    assert len(frame) == total and list(frame.columns) == names
    assert set(frame["run_id"]) == set(store.runs()["run_id"])

    cli_json("export", "--parquet", str(tmp_path / "runs.parquet"), "--db", str(db), env=env)
    table = pq.read_table(tmp_path / "runs.parquet")
    assert table.num_rows == total and table.column_names == names
    assert str(table.schema.field("budget").type) == "int64"
    # zstd, which keeps a walk's export (docs/runs/) at about half snappy's size
    metadata = pq.ParquetFile(tmp_path / "runs.parquet").metadata
    assert {metadata.row_group(0).column(i).compression for i in range(len(names))} == {"ZSTD"}

    resnet = tmp_path / "resnet.parquet"
    out = cli_json("export", "--parquet", str(resnet), "--trace", "resnet32", "--db", str(db))
    assert out["rows"] == 5 + 5 and set(pq.read_table(resnet).column("trace").to_pylist()) == {
        "resnet32"
    }

    intervals = tmp_path / "intervals.csv"
    args = ["export", "--table", "intervals", "--csv", str(intervals), "--db", str(db)]
    out = cli_json(*args, env=env)
    frame = pd.read_csv(intervals)
    assert out["rows"] == 3 and list(frame["budget"]) == sorted(r["budget"] for r in records)
    assert list(frame.columns) == [
        "trace",
        "trace_sha256",
        "policy",
        "cap",
        "budget",
        "same_lo",
        "same_hi",
        "status",
        "overhead",
        "run_id",
    ]
    assert (frame["same_lo"] <= frame["budget"]).all()
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []


def test_export_bad_input(tmp_path: Path, db: Path, env: dict[str, str]) -> None:
    Store.open(db)  # a store, empty: the file named is what is wrong
    for args, words in [
        (["--csv", str(tmp_path / "x.parquet")], "--csv"),
        (["--parquet", str(tmp_path / "missing" / "x.parquet")], "does not exist"),
        (["--table", "nope", "--csv", str(tmp_path / "x.csv")], "invalid choice: 'nope'"),
        ([], "one of the arguments --csv --parquet is required"),
    ]:
        done = cli("export", *args, "--db", str(db), env=env)
        assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1
        assert words in done.stderr, done.stderr


# -- runs exported by another store, imported here ----------------------------------------------
def _walk_and_export(tmp_path: Path, name: str, start: float, end: float, env: dict) -> Path:
    """A walk of synthetic-mlp from `start` to `end` (ratios) into a store of its own, exported
    as `export --parquet` writes it."""
    db = tmp_path / name / "landscape.duckdb"
    walked = ("landscape", "synthetic-mlp", "--from", str(start), "--to", str(end))
    cli_json(*walked, "--db", str(db), "--json", env=env)
    out = tmp_path / f"{name}.parquet"
    cli_json("export", "--parquet", str(out), "--db", str(db), env=env)
    return out


def test_walks_in_pieces_on_other_stores_import_into_one_landscape(tmp_path: Path) -> None:
    """A range walked in two pieces with two stores (two machines, no shared scheduler),
    exported and imported into a third, is the landscape one walk of the whole range gives:
    the same holes, certified bytes and first success, byte for byte; the walk then goes on
    from the imported runs without running any; importing again adds nothing."""
    env = {"DTR_LANDSCAPE_CACHE": str(tmp_path / "cache"), "DTR_LANDSCAPE_TRACES": ""}
    low = _walk_and_export(tmp_path, "low", 0.398, 0.411, env)
    high = _walk_and_export(tmp_path, "high", 0.411, 0.425, env)
    whole = tmp_path / "whole" / "landscape.duckdb"
    whole_walk = ("landscape", "synthetic-mlp", "--from", "0.398", "--to", "0.425", "--json")
    cli_json(*whole_walk, "--db", str(whole), env=env)
    joined = tmp_path / "joined" / "landscape.duckdb"
    counts = [len(pq.read_table(f)) for f in (low, high)]
    for file, count in zip((low, high), counts, strict=True):
        done = cli_json("import-records", str(file), "--db", str(joined), env=env)
        assert done["format"] == "runs" and done["source"] == "as exported"
        assert done["imported"] == done["rows"] == count
    assert Store.open(joined).stats()["runs"] == sum(counts)

    def landscape(db: Path) -> dict:
        report = cli_json("holes", "synthetic-mlp", "--db", str(db), "--json", env=env)
        (entry,) = cli_json("holes", "--all", "--db", str(db), "--json", env=env)["traces"]
        first = report["exact_first_success"]
        return {
            "holes": [(h["first_fail_byte"], h["last_fail_byte"]) for h in entry["holes"]],
            "certified": entry["certified"],
            "first_success": (first["byte"], first["failing_from"]),
            "stable_from": report["exact_stable_from"]["byte"],
        }

    assert landscape(joined) == landscape(whole)
    assert len(landscape(whole)["holes"]) >= 2
    # the imported runs are the exported ones, field for field (ids and sources kept), but
    # for their event logs' paths, which stay behind
    again_out = tmp_path / "joined.parquet"
    cli_json("export", "--parquet", str(again_out), "--db", str(joined), env=env)

    def rows(*files: Path) -> list[dict]:
        found = [r for f in files for r in pq.read_table(f).to_pylist()]
        return sorted(({**r, "events_path": None} for r in found), key=lambda r: r["run_id"])

    assert rows(again_out) == rows(low, high)
    assert {r["events_path"] for r in pq.read_table(again_out).to_pylist()} == {None}
    # a walk over the joined store reuses what was imported, and a second import adds nothing
    again = ("landscape", "synthetic-mlp", "--from", "0.398", "--to", "0.425", "--json")
    walked = cli_json(*again, "--db", str(joined), env=env)
    assert walked["complete"] and walked["runs_executed"] == 0
    repeat = cli_json("import-records", str(low), "--db", str(joined), env=env)
    assert repeat["imported"] == 0 and repeat["already_imported"] == counts[0]
    tagged = tmp_path / "tagged" / "landscape.duckdb"
    cli_json("import-records", str(low), "--source", "lab-b", "--db", str(tagged), env=env)
    assert set(Store.open(tagged).query("SELECT source FROM runs")["source"]) == {"lab-b"}
    # an event log's path names a file on the machine that ran it: not carried over
    logged = tmp_path / "logged.parquet"
    pq.write_table(_set(pq.read_table(low), "events_path", 0, "events/elsewhere.parquet"), logged)
    elsewhere = tmp_path / "elsewhere" / "landscape.duckdb"
    cli_json("import-records", str(logged), "--db", str(elsewhere), env=env)
    stored = Store.open(elsewhere).query(
        "SELECT count(events_path) AS n, count(*) AS runs FROM runs"
    )
    assert stored["n"][0] == 0 and stored["runs"][0] == counts[0]


def test_a_walk_carried_over_stores_travels_in_parts(tmp_path: Path) -> None:
    """A walk stopped on one store is exported; its runs go on to a second store, whose walk
    goes on from them; `export --except` the first part writes only the runs walked since, and
    the parts, imported together in one call, give the landscape the second store holds. A bad
    file among those imported stores nothing of any."""
    env = {"DTR_LANDSCAPE_CACHE": str(tmp_path / "cache"), "DTR_LANDSCAPE_TRACES": ""}
    first = _walk_and_export(tmp_path, "first", 0.398, 0.411, env)
    second = tmp_path / "second" / "landscape.duckdb"
    cli_json("import-records", str(first), "--db", str(second), env=env)
    walked = ("landscape", "synthetic-mlp", "--from", "0.398", "--to", "0.425", "--json")
    assert cli_json(*walked, "--db", str(second), env=env)["runs_executed"] > 0
    part = tmp_path / "part-2.parquet"
    done = cli_json("export", "--parquet", str(part), "--except", str(first), "--db", str(second))
    first_ids = set(pq.read_table(first).column("run_id").to_pylist())
    part_ids = set(pq.read_table(part).column("run_id").to_pylist())
    assert done["rows"] == len(part_ids) > 0 and not part_ids & first_ids
    assert first_ids | part_ids == set(
        Store.open(second).query("SELECT run_id FROM runs")["run_id"]
    )

    joined = tmp_path / "joined" / "landscape.duckdb"
    bad = tmp_path / "bad.parquet"
    pq.write_table(_set(pq.read_table(part), "status", 0, "exploded"), bad)
    refused = cli("import-records", str(first), str(bad), "--db", str(joined), env=env)
    assert refused.returncode == 2 and f"{bad}: row 1: status" in refused.stderr, refused.stderr
    assert Store.open(joined).stats()["runs"] == 0
    done = cli("import-records", str(first), str(part), "--db", str(joined), env=env)
    summaries = [json.loads(line) for line in done.stdout.splitlines()]
    assert [(s["file"], s["imported"]) for s in summaries] == [
        (str(first), len(first_ids)),
        (str(part), len(part_ids)),
    ]

    def holes(db: Path) -> list[dict]:
        (entry,) = cli_json("holes", "--all", "--db", str(db), "--json", env=env)["traces"]
        return [entry["holes"], entry["certified"], entry["executions"]]

    assert holes(joined) == holes(second)
    # an --except names an earlier runs export, of runs only
    for args, words in [
        (["--except", str(tmp_path / "missing.parquet")], "missing.parquet: cannot read"),
        (["--except", str(REPO / "README.md")], "README.md: not a Parquet file that can be read"),
        (["--table", "walks", "--except", str(first)], "--except: leaves runs out, not walks"),
    ]:
        out = tmp_path / "out.parquet"
        refused = cli("export", "--parquet", str(out), *args, "--db", str(second), env=env)
        assert refused.returncode == 2 and words in refused.stderr, refused.stderr
        assert not out.exists()


@pytest.mark.parametrize(
    ("spoil", "message"),
    [
        (lambda t: t.drop_columns(["same_hi"]), "columns missing: same_hi"),
        (
            lambda t: t.append_column("colour", pa.array(["red"] * len(t))),
            "columns unknown: colour",
        ),
        (
            lambda t: t.set_column(
                t.column_names.index("budget"), "budget", pa.array(["x"] * len(t))
            ),
            "column budget: must hold whole numbers (BIGINT), not string",
        ),
        (lambda t: _set(t, "status", 1, "exploded"), "row 2: status: expected one of ok, oom"),
        (lambda t: _set(t, "run_id", 2, "../x"), "row 3: run_id: expected a run id"),
        (lambda t: _set(t, "trace_sha256", 0, "abc"), "row 1: trace_sha256: expected the trace"),
        (lambda t: _set(t, "same_hi", 0, -5), "row 1: same_hi: expected at least same_lo"),
        (lambda t: _set(t, "run_id", 1, t.column("run_id")[0].as_py()), "row 2: run_id: the same"),
    ],
)
def test_a_malformed_runs_export_leaves_the_store_unchanged(
    tmp_path: Path, db: Path, env: dict[str, str], spoil: Any, message: str
) -> None:
    """A runs export that is not one, or with a bad row, names the file, the rows and the
    column and what was expected, and nothing of it is stored."""
    env = {**env, "DTR_LANDSCAPE_TRACES": ""}
    good = _walk_and_export(tmp_path, "other", 0.398, 0.40, env)
    store = Store.open(db)
    store.add_runs([run_point("synthetic-mlp", ratio=0.5)], source="engine", cap=60)
    before = _state(store)
    bad = tmp_path / "bad.parquet"
    pq.write_table(spoil(pq.read_table(good)), bad)
    done = cli("import-records", str(bad), "--db", str(db), env=env)
    assert done.returncode == 2, done.stdout
    assert f"{bad}: " in done.stderr and message in done.stderr, done.stderr
    assert _state(store) == before


def test_a_runs_export_in_csv_is_refused_with_the_way_to_carry_runs(
    tmp_path: Path, db: Path, env: dict[str, str]
) -> None:
    env = {**env, "DTR_LANDSCAPE_TRACES": ""}
    source = tmp_path / "source" / "landscape.duckdb"
    Store.open(source).add_runs([run_point("synthetic-mlp", ratio=0.5)], source="engine", cap=60)
    out = tmp_path / "runs.csv"
    cli_json("export", "--csv", str(out), "--db", str(source), env=env)
    done = cli("import-records", str(out), "--db", str(db), env=env)
    assert done.returncode == 2 and "a runs export in CSV" in done.stderr
    assert "export --parquet" in done.stderr and not db.exists()


def _set(table: Any, column: str, row: int, value: Any) -> Any:
    values = table.column(column).to_pylist()
    values[row] = value
    index = table.column_names.index(column)
    return table.set_column(index, column, pa.array(values, type=table.schema.field(column).type))
