"""`dtr-landscape check-report`: the published report's holes checked by running their edges,
in real processes over the real traces (and, with SIMRD_DIR, on unmodified simrd)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from engine.landscape.record_diff import diff
from engine.landscape.report import markdown_table
from engine.landscape.report_check import Hole, TraceClaims, inconsistencies, read_report
from engine.landscape.store import Store
from tests.helpers import REPO, cli, cli_json

PUBLISHED = REPO / "docs" / "landscapes.json"
# the runs of the TreeLSTM's and the LSTM's complete walks, which the report names
# (`export --parquet`)
RUNS = REPO / "docs" / "runs"


def _env(traces_dir: Path) -> dict[str, str]:
    return {"DTR_LANDSCAPE_TRACES": str(traces_dir)}


def _check(report: Path, traces_dir: Path, *args: str) -> tuple[int, Any, str]:
    done = cli("check-report", str(report), *args, env=_env(traces_dir))
    out: Any = done.stdout
    if "--json" in args and done.returncode in (0, 1):
        out = json.loads(done.stdout)
    return done.returncode, out, done.stderr


def _published() -> dict[str, Any]:
    return json.loads(PUBLISHED.read_text(encoding="utf-8"))


def _only(report: dict[str, Any], trace: str, holes: slice = slice(None)) -> dict[str, Any]:
    """The report cut to one trace and some of its holes (its totals made to agree)."""
    [entry] = [t for t in report["traces"] if t["trace"] == trace]
    entry["holes"] = entry["holes"][holes]
    entry["failing_bytes_in_holes"] = sum(h["width"] for h in entry["holes"])
    return {**report, "traces": [entry]}


def _write(tmp_path: Path, report: dict[str, Any], name: str = "report.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(report), encoding="utf-8")
    return path


def test_the_published_holes_of_resnet32_and_unet_hold(traces_dir: Path) -> None:
    code, out, err = _check(
        PUBLISHED, traces_dir, "--trace", "resnet32", "--trace", "unet", "--json"
    )
    assert code == 0, err
    assert out["agrees"] is True
    by_trace = {t["trace"]: t for t in out["traces"]}
    assert sorted(by_trace) == ["resnet32", "unet"]
    assert (len(by_trace["resnet32"]["holes"]), by_trace["resnet32"]["runs"]) == (7, 28)
    assert (len(by_trace["unet"]["holes"]), by_trace["unet"]["runs"]) == (3, 12)
    # the paper's ResNet-32 region is the hole [1,024,657,200, 1,069,656,159]
    widest = max(by_trace["resnet32"]["holes"], key=lambda h: h["width"])
    assert (widest["first_fail_byte"], widest["last_fail_byte"]) == (1_024_657_200, 1_069_656_159)
    below, first, last, above = widest["edges"]
    assert (below["budget"], below["status"], below["same_hi"]) == (
        1_024_657_199,
        "ok",
        1_024_657_199,
    )
    assert (first["status"], first["same_lo"]) == ("oom", 1_024_657_200)
    assert (last["status"], last["same_hi"]) == ("oom", 1_069_656_159)
    assert (above["budget"], above["status"], above["same_lo"]) == (
        1_069_656_160,
        "ok",
        1_069_656_160,
    )


def _without_ids(value: Any) -> Any:
    """A report's content but what a new store's runs change: ids, seconds, stored runs."""
    if isinstance(value, dict):
        drop = {"run_ids", "run_id", "run_seconds", "runs_stored"}
        return {k: _without_ids(v) for k, v in value.items() if k not in drop}
    if isinstance(value, list):
        return [_without_ids(v) for v in value]
    return value


def test_full_walks_reproduce_the_published_report(tmp_path: Path, traces_dir: Path) -> None:
    """ResNet-32 and U-Net walked over 0.05-0.60 on this machine give their entries of
    docs/landscapes.json, every execution, stretch, hole and paper sample, byte for byte."""
    db = tmp_path / "walks.duckdb"
    for trace in ("resnet32", "unet"):
        args = ("landscape", trace, "--from", "0.05", "--to", "0.60", "--db", str(db))
        done = cli(*args, env=_env(traces_dir))
        assert done.returncode == 0, done.stderr
    report = cli("holes", "--all", "--db", str(db), "--json", env=_env(traces_dir))
    assert report.returncode == 0, report.stderr
    walked = {t["trace"]: t for t in json.loads(report.stdout)["traces"]}
    published = {t["trace"]: t for t in _published()["traces"]}
    assert sorted(walked) == ["resnet32", "unet"]
    for trace, entry in walked.items():
        assert _without_ids(entry) == _without_ids(published[trace]), trace
    assert (walked["resnet32"]["executions"], walked["unet"]["executions"]) == (6_760, 3_062)


def test_a_walk_its_report_and_the_check_agree(tmp_path: Path, traces_dir: Path) -> None:
    """Walk a range with four 128-byte holes, publish the report, check it into a second store."""
    walked = tmp_path / "walked.duckdb"
    done = cli(
        "landscape", "resnet32", "--from", "0.10631", "--to", "0.10634", "--db", str(walked),
        env=_env(traces_dir),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    report = cli("holes", "--all", "--db", str(walked), "--json", env=_env(traces_dir))
    assert report.returncode == 0, report.stderr
    path = tmp_path / "report.json"
    path.write_text(report.stdout, encoding="utf-8")
    checked = tmp_path / "checked.duckdb"
    code, out, err = _check(path, traces_dir, "--db", str(checked), "--workers", "2", "--json")
    assert code == 0, err
    [trace] = out["traces"]
    assert [h["width"] for h in trace["holes"]] == [128] * 4
    assert trace["runs"] == 16 and trace["problems"] == []
    # the runs are stored, each under the id the check printed
    stored = Store.open(checked).query("SELECT run_id, budget, status, stage FROM runs")
    printed = {e["run_id"]: e["budget"] for h in trace["holes"] for e in h["edges"]}
    assert dict(zip(stored["run_id"], stored["budget"], strict=True)) == printed
    assert set(stored["stage"]) == {"check"}


def test_a_moved_edge_is_found(tmp_path: Path, traces_dir: Path) -> None:
    """A hole said to start one byte lower (its width and ratios made to agree): the runs say no."""
    report = _only(_published(), "resnet32")
    hole = report["traces"][0]["holes"][2]
    peak = report["traces"][0]["peak"]
    hole["first_fail_byte"] -= 1
    hole["width"] += 1
    hole["first_fail_ratio"] = hole["first_fail_byte"] / peak
    hole["width_ratio"] = hole["width"] / peak
    report["traces"][0]["failing_bytes_in_holes"] += 1
    code, out, _ = _check(_write(tmp_path, report), traces_dir)
    assert code == 1
    assert "7 holes, 28 runs on the engine: 1 hole not as reported" in out
    assert "report:" not in out  # it agrees with itself; only the runs disagree
    assert (
        "hole [1,024,657,199, 1,069,656,159], ok below (budget 1,024,657,198): expected ok with "
        "a same-execution interval ending at 1,024,657,198, got ok with interval "
        "[1,024,656,944, 1,024,657,199]" in out
    )
    assert "first failing (budget 1,024,657,199): expected a failing status" in out


def test_a_report_that_contradicts_itself_is_found(tmp_path: Path, traces_dir: Path) -> None:
    report = _only(_published(), "unet")
    report["traces"][0]["holes"][0]["width"] += 5
    code, out, _ = _check(_write(tmp_path, report), traces_dir, "--json")
    assert code == 1 and out["agrees"] is False
    [problem] = out["traces"][0]["problems"]
    assert problem.startswith("traces[0] (unet): holes[0] [")
    assert "width is " in problem and "its bytes give" in problem
    assert all(h["agrees"] for h in out["traces"][0]["holes"])  # the runs themselves agree


def test_the_published_report_agrees_with_itself() -> None:
    report = read_report(PUBLISHED)
    assert (report.policy, report.cap) == ("DTR", 60)
    assert len(report.traces) == 8
    assert sum(len(t.holes) for t in report.traces) == 205
    for trace in report.traces:
        assert inconsistencies(trace) == [], trace.name


def test_the_readmes_table_is_the_reports() -> None:
    """README.md's table is `holes --all --markdown` of docs/landscapes.json, as it says."""
    table = markdown_table(_published())
    assert table.count("\n") == 2 + 8 - 1
    assert table in (REPO / "README.md").read_text(encoding="utf-8")


def test_self_consistency_rules() -> None:
    def claims(certified: list[tuple[int, int | None]], holes: list[Hole]) -> TraceClaims:
        raw = {"failing_bytes_in_holes": sum(h.last - h.first + 1 for h in holes)}
        return TraceClaims(0, "t", "s", 1000, tuple(certified), tuple(holes), raw)

    good = claims([(0, 500), (600, None)], [Hole(10, 20, ("oom",)), Hole(22, 30, ("thrashed",))])
    assert inconsistencies(good) == []
    problems = inconsistencies(
        claims(
            [(0, 100), (90, 200), (300, 250)],
            [Hole(50, 60, ("oom",)), Hole(61, 70, ("oom",)), Hole(150, 140, ("oom",)),
             Hole(160, 170, ("ok",)), Hole(198, 205, ("oom",))],
        )
    )  # fmt: skip
    assert problems == [
        "traces[0] (t): certified[1] starts at 90, not after the one before",
        "traces[0] (t): certified[2] ends at 250, before it starts at 300",
        "traces[0] (t): holes[1] [61, 70]: not after the hole before it, with an ok byte between",
        "traces[0] (t): holes[2] [150, 140]: ends before it starts",
        "traces[0] (t): holes[3] [160, 170]: statuses ['ok'] are not failing statuses",
        "traces[0] (t): holes[4] [198, 205]: not inside one certified stretch with its ok bytes "
        "around it",
    ]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{", "report.json: not JSON"),
        ('{"policy": "DTR", "cap": 60}', "report.json: traces: missing"),
        (
            '{"policy": "DTR", "cap": 60, "traces": {}}',
            "report.json: traces: expected a list, got {}",
        ),
        (
            '{"policy": "DTR", "cap": 60, "traces": [{"trace": "resnet32", "trace_sha256": "ab",'
            ' "peak": 1.5}]}',
            "report.json: traces[0].peak: expected a whole number of bytes, got 1.5",
        ),
        (
            '{"policy": "DTR", "cap": 60, "traces": [{"trace": "resnet32", "trace_sha256": "ab",'
            ' "peak": 10, "executions": 3,'
            ' "certified": [{"from_budget": 1, "to_budget": "2"}]}]}',
            "report.json: traces[0].certified[0].to_budget: expected a whole number of bytes or "
            'null, got "2"',
        ),
    ],
)
def test_not_a_report(tmp_path: Path, traces_dir: Path, text: str, message: str) -> None:
    path = tmp_path / "report.json"
    path.write_text(text, encoding="utf-8")
    db = tmp_path / "store.duckdb"
    code, _, err = _check(path, traces_dir, "--db", str(db))
    assert code == 2
    assert err.startswith(f"dtr-landscape: error: {tmp_path / message.split(':')[0]}")
    assert message.split(": ", 1)[1] in err
    assert not db.exists()  # refused before the store is opened
    with pytest.raises(ValueError, match="expected|missing|not JSON"):
        read_report(path)


def test_a_binary_file_is_not_a_report(tmp_path: Path) -> None:
    path = tmp_path / "report.json"
    path.write_bytes(b'{"policy": "\xff"}')
    with pytest.raises(ValueError, match=r"report.json: not UTF-8 text \(byte 12\)"):
        read_report(path)


def test_another_trace_or_a_bad_choice_is_refused(tmp_path: Path, traces_dir: Path) -> None:
    report = _only(_published(), "resnet32")
    report["traces"][0]["trace_sha256"] = "0" * 64
    db = tmp_path / "store.duckdb"
    code, _, err = _check(_write(tmp_path, report), traces_dir, "--db", str(db))
    assert code == 2 and not db.exists()
    assert f"traces[0] (resnet32) was made from the trace of SHA-256 {'0' * 64};" in err
    assert "38c94cada99aca654ad9589d99eabc2267a51835593b598085f9f8221a7bacaf" in err
    code, _, err = _check(PUBLISHED, traces_dir, "--trace", "resnet23")
    assert code == 2
    assert "--trace: resnet23 not in" in err and "it has densenet121, inceptionv4" in err
    code, _, err = _check(PUBLISHED, traces_dir, "--backend", "simrd", "--workers", "2")
    assert code == 2 and "--backend simrd runs in this process" in err
    code, _, err = _check(PUBLISHED, traces_dir, "--backend", "simrd", "--interior")
    assert code == 2 and "--interior walks on the engine: not with --backend simrd" in err


def test_the_published_edges_on_unmodified_simrd(
    tmp_path: Path, traces_dir: Path, simrd_dir: Path
) -> None:
    """ResNet-32's two smallest-budget holes: the 8 edge runs on simrd itself."""
    report = _only(_published(), "resnet32", slice(0, 2))
    done = cli(
        "check-report", str(_write(tmp_path, report)), "--backend", "simrd", "--json",
        env={**_env(traces_dir), "SIMRD_DIR": str(simrd_dir)},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["backend"] == "simrd" and out["agrees"] is True
    assert out["traces"][0]["runs"] == 8


def test_every_byte_of_the_holes_walked_again(tmp_path: Path, traces_dir: Path) -> None:
    code, out, err = _check(
        PUBLISHED, traces_dir, "--trace", "resnet32", "--trace", "unet", "--interior", "--json"
    )
    assert code == 0, err
    for trace in out["traces"]:
        report = {h["first_fail_byte"]: h for t in _published()["traces"] for h in t["holes"]}
        for hole in trace["holes"]:
            assert hole["interior"]["agrees"] is True
            assert hole["interior"]["executions"] == report[hole["first_fail_byte"]]["intervals"]
    walked = [sum(h["interior"]["executions"] for h in t["holes"]) for t in out["traces"]]
    assert walked == [298, 47]


def test_two_holes_said_to_be_one_pass_the_edges_but_not_the_walk(
    tmp_path: Path, traces_dir: Path
) -> None:
    """Holes 4 and 5 of ResNet-32 (128 bytes each, ok bytes between) reported as one: its four
    edges are right, only walking it finds the ok executions inside."""
    report = _only(_published(), "resnet32")
    entry = report["traces"][0]
    peak, holes = entry["peak"], entry["holes"]
    merged = {**holes[3], "last_fail_byte": holes[4]["last_fail_byte"]}
    merged["width"] = merged["last_fail_byte"] - merged["first_fail_byte"] + 1
    merged["last_fail_ratio"] = merged["last_fail_byte"] / peak
    merged["width_ratio"] = merged["width"] / peak
    merged["intervals"] = holes[3]["intervals"] + holes[4]["intervals"]
    entry["holes"] = [*holes[:3], merged, *holes[5:]]
    entry["failing_bytes_in_holes"] = sum(h["width"] for h in entry["holes"])
    path = _write(tmp_path, report)
    code, out, err = _check(path, traces_dir)
    assert code == 0, err
    assert "6 holes, 24 runs on the engine: every hole as reported" in out
    code, out, _ = _check(path, traces_dir, "--interior")
    assert code == 1
    assert "6 holes, 24 runs on the engine, 305 executions walked inside: 1 hole not as" in out
    assert (
        "hole [1,069,692,896, 1,069,695,583], walked: inside the hole the walk found ok "
        "[1,069,693,024, " in out
    )


@pytest.mark.parametrize(("trace", "runs"), [("treelstm", 5762), ("lstm", 12852)])
def test_a_published_entry_is_what_its_exported_runs_say(
    tmp_path: Path, trace: str, runs: int
) -> None:
    """The runs the report names for the traces walked whole on a store of this machine travel
    with it: imported into an empty store (no trace needed), they give the report's entry,
    every stretch, hole and run id."""
    db = str(tmp_path / "store" / "landscape.duckdb")
    imported = cli_json("import-records", str(RUNS / f"{trace}.parquet"), "--db", db)
    assert imported["imported"] == imported["rows"] == runs
    ours = cli_json("holes", "--all", "--json", "--db", db)["traces"]
    published = json.loads(PUBLISHED.read_text())["traces"]
    assert ours == [t for t in published if t["trace"] == trace]


def test_a_walk_in_parts_gives_its_report_entry(tmp_path: Path) -> None:
    """InceptionV4's walk travels in parts (docs/runs/inceptionv4/, each `export --except` the
    ones before, the report's entry updated from the store with each): imported in one call
    they hold no run twice and no two intervals that disagree, and give the report's entry,
    every stretch, hole and run id, as a walk on another machine would go on from."""
    parts = sorted((RUNS / "inceptionv4").glob("part-*.parquet"))
    assert len(parts) >= 2
    db = str(tmp_path / "store" / "landscape.duckdb")
    done = cli("import-records", *map(str, parts), "--db", db)
    assert done.returncode == 0, done.stderr
    summaries = [json.loads(line) for line in done.stdout.splitlines()]
    assert [s["already_imported"] for s in summaries] == [0] * len(parts)
    (ours,) = cli_json("holes", "--all", "--json", "--db", db)["traces"]
    (report,) = [t for t in _published()["traces"] if t["trace"] == "inceptionv4"]
    assert ours["conflicting_intervals"] == 0
    assert ours["runs_stored"] == sum(s["imported"] for s in summaries)
    assert ours == report


def test_a_slice_of_the_band_walked_here_gives_the_stored_walks_records(
    tmp_path: Path, traces_dir: Path
) -> None:
    """InceptionV4's band, where every run thrashes up to the cap and some never rejoin their
    predecessor, walked afresh with 2 workers (chunks, seams, merges, jumps, points spaced
    inside cascades): every execution is the stored walk's (docs/runs/inceptionv4/, the code
    and machines of 2026-12-05), field for field (`diff-records`' comparison: a run entered at
    another budget of its interval differs only there)."""
    db = tmp_path / "slice.duckdb"
    args = ("landscape", "inceptionv4", "--from", "0.2005", "--to", "0.20053", "--workers", "2")
    done = cli(*args, "--db", str(db), env=_env(traces_dir))
    assert done.returncode == 0, done.stderr
    ours = Store.open(db).runs("inceptionv4")
    lo, hi = int(ours["same_lo"].min()), int(ours["same_hi"].max())
    stored = pd.concat(pd.read_parquet(p) for p in (RUNS / "inceptionv4").glob("part-*.parquet"))
    stored = stored[(stored["same_hi"] >= lo) & (stored["same_lo"] <= hi)]
    found = diff(ours, stored)
    assert (ours["status"] == "thrashed").all()
    assert found.agree and found.differing == 0 and found.conflicting == 0, found.examples
    assert found.shared == len(ours) > 300 and found.only_ours == found.only_theirs == 0
