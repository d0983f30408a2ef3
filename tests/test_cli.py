"""The command line, end to end in real processes, on the shipped synthetic trace."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from engine.sim import native
from engine.sim.record import FIELD_NAMES
from tests.helpers import REPO, cli, cli_json

SYNTHETIC = "synthetic-mlp"


@pytest.fixture()
def cache_env(tmp_path: Path) -> dict[str, str]:
    return {"DTR_LANDSCAPE_CACHE": str(tmp_path / "cache"), "DTR_LANDSCAPE_TRACES": ""}


def test_run_prints_every_field(cache_env: dict[str, str]) -> None:
    record = cli_json("run", SYNTHETIC, "--ratio", "0.5", env=cache_env)
    assert tuple(record) == FIELD_NAMES
    assert record["trace"] == SYNTHETIC
    assert record["status"] == "ok"
    assert record["budget"] == int(0.5 * record["peak"])
    assert record["clock"] == 1 + record["model_compute"] + record["remat_compute"]
    assert record["overhead"] == pytest.approx(
        (record["model_compute"] + record["remat_compute"]) / record["model_compute"]
    )
    lo, hi = record["same_execution"]["lo"], record["same_execution"]["hi"]
    assert lo <= record["budget"] <= hi


def test_oom_is_a_result_not_an_error(cache_env: dict[str, str]) -> None:
    record = cli_json("run", SYNTHETIC, "--ratio", "0.05", env=cache_env)
    assert record["status"] == "oom"
    failure = record["failure"]
    assert set(failure) == {"operator", "request", "pinned", "depth", "over_by"}
    assert failure["over_by"] == failure["pinned"] + failure["request"] - record["budget"]
    assert record["overhead"] is None


def test_budget_in_bytes_and_same_execution_interval(cache_env: dict[str, str]) -> None:
    first = cli_json("run", SYNTHETIC, "--ratio", "0.3", env=cache_env)
    lo, hi = first["same_execution"]["lo"], first["same_execution"]["hi"]
    for budget in {lo, (lo + hi) // 2, hi}:
        again = cli_json("run", SYNTHETIC, "--budget", str(budget), env=cache_env)
        for name in ("status", "clock", "evictions", "rematerializations", "peak_pinned"):
            assert again[name] == first[name]
        assert again["same_execution"] == first["same_execution"]
    below = cli_json("run", SYNTHETIC, "--budget", str(lo - 1), env=cache_env)
    assert below["same_execution"]["hi"] == lo - 1


def test_thrash_cap(cache_env: dict[str, str]) -> None:
    loose = cli_json("run", SYNTHETIC, "--ratio", "0.4", env=cache_env)
    assert loose["status"] == "ok" and loose["overhead"] > 1.0
    tight = cli_json("run", SYNTHETIC, "--ratio", "0.4", "--cap", "1.0001", env=cache_env)
    assert tight["status"] == "thrashed"


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["run", SYNTHETIC, "--ratio", "abc"], "expected a number, got 'abc'"),
        (["run", SYNTHETIC, "--ratio", "-1"], "expected a positive number"),
        (["run", SYNTHETIC, "--budget", "1.5"], "expected a whole number of bytes"),
        (["run", SYNTHETIC], "one of the arguments --ratio --budget is required"),
        (["run", SYNTHETIC, "--ratio", "0.5", "--policy", "Nope"], "unknown policy 'Nope'"),
        (["run", SYNTHETIC, "--ratio", "0.5", "--policy", "NbhdPenalty@c=1"], "has no parameter c"),
        (["run", SYNTHETIC, "--ratio", "0.5", "--retain", "x1"], "--retain expects storage ids"),
        (["run", SYNTHETIC, "--ratio", "0.5", "--retain", "99999999"], "not a storage id"),
        (["run", "no-such-trace", "--ratio", "0.5"], "unknown trace 'no-such-trace'"),
        (["run", "missing/file.log", "--ratio", "0.5"], "does not exist"),
    ],
)
def test_bad_input_is_one_line(cache_env: dict[str, str], args: list[str], words: str) -> None:
    done = cli(*args, env=cache_env)
    assert done.returncode == 2
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert words in done.stderr


def test_simrd_backend_without_simrd_says_how(cache_env: dict[str, str]) -> None:
    done = cli(
        "run", SYNTHETIC, "--ratio", "0.5", "--backend", "simrd", env={**cache_env, "SIMRD_DIR": ""}
    )
    assert done.returncode == 2
    assert "SIMRD_DIR" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_events_log(tmp_path: Path, cache_env: dict[str, str]) -> None:
    events = tmp_path / "run.parquet"
    record = cli_json("run", SYNTHETIC, "--ratio", "0.4", "--events", str(events), env=cache_env)
    table = pq.read_table(events).to_pandas()
    kinds = table["kind"].value_counts().to_dict()
    assert kinds.get("evict_policy", 0) == record["policy_evictions"]
    assert kinds.get("evict_policy", 0) + kinds.get("evict_eager", 0) == record["evictions"]
    assert kinds.get("remat", 0) == record["rematerializations"]
    assert kinds["operator"] == record["operators"]
    evictions = table[table["kind"].str.startswith("evict")]
    assert list(evictions["seq"]) == list(range(1, record["evictions"] + 1))
    operators = table[table["kind"] == "operator"]
    assert operators["max_pinned"].max() == record["peak_pinned"]
    assert operators["max_depth"].max() == record["max_nesting_depth"]


def test_retained_storage_is_never_evicted(tmp_path: Path, cache_env: dict[str, str]) -> None:
    events = tmp_path / "run.parquet"
    cli_json("run", SYNTHETIC, "--ratio", "0.4", "--events", str(events), env=cache_env)
    table = pq.read_table(events).to_pandas()
    victim = int(table[table["kind"] == "evict_policy"]["storage"].iloc[0])
    events2 = tmp_path / "retained.parquet"
    record = cli_json(
        "run",
        SYNTHETIC,
        "--ratio",
        "0.4",
        "--retain",
        str(victim),
        "--events",
        str(events2),
        env=cache_env,
    )
    assert record["retained"] == [victim]
    table2 = pq.read_table(events2).to_pandas()
    assert victim not in set(table2[table2["kind"] == "evict_policy"]["storage"])


def test_traces_lists_the_shipped_trace(cache_env: dict[str, str]) -> None:
    done = cli("traces", "--json", env=cache_env)
    assert done.returncode == 0, done.stderr
    rows = [json.loads(line) for line in done.stdout.splitlines()]
    synthetic = next(row for row in rows if row["name"] == SYNTHETIC)
    assert synthetic["operators"] > 100
    assert synthetic["peak"] > 0 and synthetic["model_compute"] > 0


def test_a_reader_gone_away_ends_a_command_quietly(cache_env: dict[str, str]) -> None:
    """`dtr-landscape traces | head -1`: the pipe's reader closes it before the output is
    written; the command stops with the status of a broken pipe (128 + SIGPIPE, as shell
    tools give) and no traceback."""
    command = [sys.executable, "-m", "engine.cli.main", "traces", "--json"]
    proc = subprocess.Popen(
        command,
        cwd=REPO,
        env={**os.environ, **cache_env},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # before it writes: its first write meets a closed pipe
    error = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 128 + signal.SIGPIPE, error
    assert "Traceback" not in error and "BrokenPipe" not in error, error


def test_traces_and_bench_say_first_which_runtime_runs(cache_env: dict[str, str]) -> None:
    expected = native.backend_description()
    listed = cli("traces", env=cache_env)
    assert listed.returncode == 0, listed.stderr
    assert listed.stderr.splitlines()[0] == expected  # stdout stays the table
    assert listed.stdout.splitlines()[0].startswith("name")
    bench = cli("bench", "--points", f"{SYNTHETIC}:0.5", "--no-store", env=cache_env)
    assert bench.returncode == 0, bench.stderr
    assert bench.stdout.splitlines()[0] == expected


def test_cache_notices_a_changed_file(tmp_path: Path, cache_env: dict[str, str]) -> None:
    trace = tmp_path / "copy.log"
    shutil.copy(REPO / "traces" / f"{SYNTHETIC}.log", trace)
    first = cli_json("run", str(trace), "--ratio", "0.5", env=cache_env)
    assert list((tmp_path / "cache").glob(f"{first['trace_sha256']}.program.*"))
    # Change the trace: one operator twice as slow. The cached parse must not be reused.
    text = trace.read_text()
    marker = '"TIME":"'
    at = text.index(marker, text.index('"CALL"')) + len(marker)
    end = text.index('"', at)
    trace.write_text(text[:at] + str(int(text[at:end]) * 2 + 1) + text[end:])
    second = cli_json("run", str(trace), "--ratio", "0.5", env=cache_env)
    assert second["trace_sha256"] != first["trace_sha256"]
    assert second["model_compute"] != first["model_compute"]


def test_time_limit_gives_timeout(cache_env: dict[str, str]) -> None:
    record = cli_json("run", SYNTHETIC, "--ratio", "0.5", "--time-limit", "1e-9", env=cache_env)
    assert record["status"] == "timeout"
    assert record["overhead"] is None and record["failure"] is None
    assert record["operators"] < 274  # stopped early


def test_no_recursion_limit_ends_a_deep_rebuild(tmp_path: Path, cache_env: dict[str, str]) -> None:
    """A chain of 5,000 operators whose activations are all evicted: rebuilding the last one
    nests 5,000 deep, far past Python's recursion limit, and the run still resolves."""
    lines = ['{"ANNOTATION":"START","INSTRUCTION":"ANNOTATE"}']
    lines.append('{"INSTRUCTION":"CONSTANT","NAME":"x0"}')  # x0 is pinned
    lines.append('{"INSTRUCTION":"MEMORY","MEMORY":"100","NAME":"x0"}')
    n = 5000
    for i in range(1, n + 1):
        lines.append(
            f'{{"ARGS":["x{i - 1}"],"INSTRUCTION":"CALL","NAME":"f","RESULT":["x{i}"],"TIME":"1"}}'
        )
        lines.append(f'{{"INSTRUCTION":"MEMORY","MEMORY":"100","NAME":"x{i}"}}')
        lines.append(f'{{"ALIAS":"-1","INSTRUCTION":"ALIAS","NAME":"x{i}"}}')
        if i > 1:  # x_{i-1} dies: freed at once, yet still x_i's parent if x_i is rebuilt
            lines.append(f'{{"INSTRUCTION":"RELEASE","NAME":"x{i - 1}"}}')
    # Ten more tensors push x_n out; then x_n is needed again.
    for k in range(10):
        lines.append(
            f'{{"ARGS":["x0"],"INSTRUCTION":"CALL","NAME":"h","RESULT":["z{k}"],"TIME":"1000000000"}}'
        )
        lines.append(f'{{"INSTRUCTION":"MEMORY","MEMORY":"100","NAME":"z{k}"}}')
        lines.append(f'{{"ALIAS":"-1","INSTRUCTION":"ALIAS","NAME":"z{k}"}}')
    lines.append(f'{{"ARGS":["x{n}"],"INSTRUCTION":"CALL","NAME":"g","RESULT":["y"],"TIME":"1"}}')
    lines.append('{"INSTRUCTION":"MEMORY","MEMORY":"100","NAME":"y"}')
    lines.append('{"ALIAS":"-1","INSTRUCTION":"ALIAS","NAME":"y"}')
    for name in [f"x{n}"] + [f"z{k}" for k in range(10)]:
        lines.append(f'{{"INSTRUCTION":"RELEASE","NAME":"{name}"}}')
    trace = tmp_path / "chain.log"
    trace.write_text("\n".join(lines) + "\n")
    record = cli_json("run", str(trace), "--budget", "600", env=cache_env)
    assert record["status"] == "ok"
    assert record["max_nesting_depth"] > n  # the whole chain, rebuilt in one nested cascade
