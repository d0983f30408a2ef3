"""`dtr-landscape landscape`: exact walks over same-execution intervals, in real processes
with real DuckDB stores, on the shipped synthetic trace (it completes from ~0.4 of its peak)."""

from __future__ import annotations

import random
import signal
from pathlib import Path

import pytest

from engine.landscape.store import Store
from engine.landscape.walk import policy_certified, walk_landscape
from engine.landscape.walk_claims import running_walks
from engine.sim.policies import DTR, POLICIES
from engine.sim.simulate import run_point
from tests.helpers import (
    SLOW_WALK,
    cli,
    cli_json,
    compared_records,
    three_chunks,
    walk_in_progress,
    walk_in_slices,
    walk_with_asks,
)

SYNTHETIC = "synthetic-mlp"
# A stretch of synthetic-mlp around its first success: a few dozen intervals, ok and oom.
FROM, TO = "0.395", "0.402"


@pytest.fixture()
def env(tmp_path: Path) -> dict[str, str]:
    return {"DTR_LANDSCAPE_CACHE": str(tmp_path / "cache"), "DTR_LANDSCAPE_TRACES": ""}


def _walk(db: Path, env: dict[str, str], *extra: str) -> dict:
    args = ("landscape", SYNTHETIC, "--from", FROM, "--to", TO, "--db", str(db), "--json")
    return cli_json(*args, *extra, env=env)


def _contiguous(intervals: list[dict]) -> None:
    for below, above in zip(intervals, intervals[1:], strict=False):
        assert above["lo"] == below["hi"] + 1


def test_walk_classifies_every_byte_and_stores_it(tmp_path: Path, env: dict[str, str]) -> None:
    db = tmp_path / "landscape.duckdb"
    walk = _walk(db, env)
    intervals = walk["intervals"]
    peak = run_point(SYNTHETIC, ratio=0.5)["peak"]
    assert walk["from_budget"] == int(float(FROM) * peak)
    assert walk["to_budget"] == int(float(TO) * peak)
    assert len(intervals) > 10
    assert {i["status"] for i in intervals} == {"ok", "oom"}  # the walk crosses first success
    _contiguous(intervals)
    assert intervals[0]["lo"] <= walk["from_budget"] <= intervals[0]["hi"]
    assert intervals[-1]["lo"] <= walk["to_budget"] <= intervals[-1]["hi"]
    assert walk["coverage"] == 1.0 and walk["bytes_certified"] == walk["bytes_asked"]
    assert walk["complete"] and walk["stopped_at"] is None and walk["certified"]
    assert walk["runs_executed"] == len(intervals) and walk["runs_reused"] == 0
    assert walk["runs_from_scratch"] == 1  # one chunk, each slice resuming the one before
    said = cli("landscape", SYNTHETIC, "--from", FROM, "--to", TO, "--db", str(db), env=env)
    assert said.returncode == 0 and said.stderr.splitlines()[-1].startswith(
        "walk synthetic-mlp 100.00% of the bytes | 0 runs (0 from scratch) | "
    )  # the progress line, again over the stored walk

    store = Store.open(db)
    runs = store.query("SELECT * FROM runs WHERE walk_id = ?", [walk["walk_id"]])
    assert sorted(runs["run_id"]) == sorted(i["run_id"] for i in intervals)
    assert set(runs["stage"]) == {"walk"} and set(runs["source"]) == {"engine"}
    assert set(runs["cap"]) == {60.0}
    row = store.query("SELECT * FROM walks WHERE walk_id = ?", [walk["walk_id"]]).iloc[0]
    assert row["kind"] == "landscape" and bool(row["complete"])
    assert row["reached"] == walk["to_budget"] and row["runs"] == len(intervals)

    # Any budget inside an interval replays that interval's execution (seeded sample).
    rng = random.Random(20240607)
    for interval in rng.sample(intervals, 12):
        budget = rng.randint(interval["lo"], interval["hi"])
        again = run_point(SYNTHETIC, budget=budget)
        assert again["status"] == interval["status"]
        assert again["overhead"] == interval["overhead"]
        assert again["same_execution"] == {"lo": interval["lo"], "hi": interval["hi"]}

    # A second walk over the same range runs nothing: every budget is covered by a stored run.
    second = _walk(db, env)
    assert second["runs_executed"] == 0 and second["runs_reused"] == len(intervals)
    assert [(i["lo"], i["hi"], i["run_id"]) for i in second["intervals"]] == [
        (i["lo"], i["hi"], i["run_id"]) for i in intervals
    ]
    assert second["complete"] and second["coverage"] == 1.0


def test_max_runs_stops_and_says_where(tmp_path: Path, env: dict[str, str]) -> None:
    db = tmp_path / "landscape.duckdb"
    partial = _walk(db, env, "--max-runs", "4")
    intervals = partial["intervals"]
    assert partial["runs_executed"] == 4 and len(intervals) == 4
    _contiguous(intervals)
    assert not partial["complete"]
    assert partial["stopped_at"] == intervals[-1]["hi"] + 1
    assert partial["bytes_certified"] == intervals[-1]["hi"] - partial["from_budget"] + 1
    assert 0 < partial["coverage"] < 1
    row = Store.open(db).query("SELECT * FROM walks WHERE walk_id = ?", [partial["walk_id"]])
    assert not bool(row.iloc[0]["complete"])
    assert row.iloc[0]["reached"] == partial["stopped_at"] - 1 and row.iloc[0]["runs"] == 4

    # Walking on reuses the four runs and finishes the range.
    rest = _walk(db, env)
    assert rest["runs_reused"] == 4 and rest["complete"]
    assert rest["intervals"][:4] == [{**i, "reused": True} for i in intervals]
    _contiguous(rest["intervals"])


def test_walk_in_bytes_reuses_runs_of_other_sources(tmp_path: Path) -> None:
    store = Store.open(tmp_path / "landscape.duckdb")
    record = run_point(SYNTHETIC, ratio=0.4)
    same = record["same_execution"]
    store.add_runs([record], source="sweep", cap=60)
    walk = walk_landscape(store, SYNTHETIC, start=same["lo"] + 1, end=same["hi"] + 10)
    assert walk["runs_reused"] == 1 and walk["intervals"][0]["lo"] == same["lo"]
    assert walk["runs_executed"] == len(walk["intervals"]) - 1 >= 1
    assert walk["coverage"] == 1.0
    # another cap is another experiment: nothing to reuse
    other = walk_landscape(store, SYNTHETIC, start=same["lo"], end=same["hi"], cap=30)
    assert other["runs_reused"] == 0


def test_two_phase_intervals_are_certified(tmp_path: Path) -> None:
    store = Store.open(tmp_path / "landscape.duckdb")
    peak = run_point(SYNTHETIC, ratio=0.5)["peak"]
    start = int(0.45 * peak)
    walk = walk_landscape(store, SYNTHETIC, start=start, end=start + 20_000, policy="TwoPhase")
    assert walk["certified"] and walk["policy"] == "TwoPhase@k=8" and walk["coverage"] == 1.0
    rng = random.Random(11)
    for interval in rng.sample(walk["intervals"], min(6, len(walk["intervals"]))):
        budget = rng.randint(interval["lo"], interval["hi"])
        again = run_point(SYNTHETIC, budget=budget, policy="TwoPhase")
        assert again["same_execution"] == {"lo": interval["lo"], "hi": interval["hi"]}
        assert again["status"] == interval["status"]


class BudgetReadingDTR(DTR):
    """A policy that says it reads the budget without recording those comparisons."""

    name = "BudgetReadingDTR"
    reads_budget = True


def test_every_policy_certifies_and_an_unrecorded_budget_read_does_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert all(policy_certified(cls) for cls in POLICIES.values())
    assert not policy_certified(BudgetReadingDTR)
    monkeypatch.setitem(POLICIES, BudgetReadingDTR.name, BudgetReadingDTR)
    store = Store.open(tmp_path / "landscape.duckdb")
    peak = run_point(SYNTHETIC, ratio=0.5)["peak"]
    start = int(0.45 * peak)
    walk = walk_landscape(
        store, SYNTHETIC, start=start, end=start + 5_000, policy=BudgetReadingDTR.name
    )
    assert not walk["certified"] and not walk["complete"]
    assert walk["bytes_certified"] == 0 and walk["stopped_at"] == start


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--from", "0.5", "--to", "0.4"], "--from must be below --to"),
        (["--from", "0.4", "--to", "0.4"], "--from must be below --to"),
        (["--from-budget", "200", "--to-budget", "100"], "--from-budget must be below --to-budget"),
        (["--from", "0", "--to", "0.4"], "expected a positive number"),
        (["--from", "0.1", "--to", "2.5"], "expected a ratio in (0, 2]"),
        (["--from", "-0.1", "--to", "0.5"], "expected a positive number"),
        (["--from", "0.1"], "--from and --to go together"),
        (["--from", "0.1", "--to-budget", "100"], "give either --from R --to R or"),
        ([], "give either --from R --to R or"),
        (["--from", "0.3", "--to", "0.4", "--policy", "Nope"], "unknown policy 'Nope'"),
        (["--from", "0.3", "--to", "0.4", "--max-runs", "0"], "of at least 1"),
    ],
)
def test_bad_input_is_one_line(
    tmp_path: Path, env: dict[str, str], args: list[str], words: str
) -> None:
    done = cli("landscape", SYNTHETIC, *args, "--db", str(tmp_path / "db.duckdb"), env=env)
    assert done.returncode == 2, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert words in done.stderr


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["landscape", "no-such-trace", "--from", "0.3", "--to", "0.4"], "unknown trace"),
        (["edges", "no-such-trace"], "unknown trace"),
        (["edges", SYNTHETIC, "--policy", "Nope"], "unknown policy 'Nope'"),
        (["edges", SYNTHETIC], "no stored runs of synthetic-mlp"),
        (["holes", "no-such-trace"], "no stored runs of no-such-trace"),
        (["holes", SYNTHETIC, "--policy", "Nope"], "unknown policy 'Nope'"),
        (["holes", SYNTHETIC, "--cap", "-3"], "expected a positive number"),
    ],
)
def test_unknown_names_are_one_line(
    tmp_path: Path, env: dict[str, str], args: list[str], words: str
) -> None:
    Store.open(tmp_path / "db.duckdb")  # a store, empty
    done = cli(*args, "--db", str(tmp_path / "db.duckdb"), env=env)
    assert done.returncode == 2, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert words in done.stderr


def _outcomes(walk: dict) -> list[tuple]:
    return [(i["lo"], i["hi"], i["status"], i["overhead"]) for i in walk["intervals"]]


def test_a_walk_in_parallel_chunks_equals_one_in_order(tmp_path: Path, env: dict[str, str]) -> None:
    """Two worker processes walking chunks side by side, stitched at the seams: the same
    intervals as one walk from the bottom up, each execution stored once."""
    wide = ("--from", "0.05", "--to", "1.5")
    one = cli_json(
        "landscape", SYNTHETIC, *wide, "--db", str(tmp_path / "a.duckdb"), "--json", env=env
    )
    two = cli_json(
        "landscape",
        SYNTHETIC,
        *wide,
        "--workers",
        "2",
        "--db",
        str(tmp_path / "b.duckdb"),
        "--json",
        env=env,
    )
    assert len(one["intervals"]) > 500
    assert _outcomes(one) == _outcomes(two)
    # one process began one run from scratch; two began one per chunk they were given
    assert one["runs_from_scratch"] == 1 and two["runs_from_scratch"] >= 2
    assert two["complete"] and two["coverage"] == 1.0
    stored = Store.open(tmp_path / "b.duckdb").query("SELECT same_lo, same_hi FROM runs")
    assert len(stored) == two["runs_executed"] == len(two["intervals"])  # no seam stored twice
    _contiguous(two["intervals"])


def test_a_killed_walk_resumes_from_the_store(tmp_path: Path, env: dict[str, str]) -> None:
    """SIGKILL in the middle of a walk, then the same command: it reuses what was stored and
    ends as an uninterrupted walk."""
    db = tmp_path / "killed.duckdb"
    proc, _ = walk_in_progress(db, env)
    try:
        proc.send_signal(signal.SIGKILL)
        proc.communicate()
    finally:
        if proc.poll() is None:
            proc.kill()
    resumed = cli_json(*SLOW_WALK, "--db", str(db), "--json", env=env)
    assert resumed["complete"] and resumed["coverage"] == 1.0
    assert resumed["runs_reused"] >= 50
    fresh = cli_json(*SLOW_WALK, "--db", str(tmp_path / "fresh.duckdb"), "--json", env=env)
    assert _outcomes(resumed) == _outcomes(fresh)
    assert resumed["runs_reused"] + resumed["runs_executed"] >= len(fresh["intervals"])


def test_a_terminated_walk_records_how_far_it_got(tmp_path: Path, env: dict[str, str]) -> None:
    """SIGTERM (how the dashboard's runner cancels a job) is taken as Ctrl-C: the walk
    publishes the runs it made, records itself as incomplete with its runs, and exits 143;
    the same command then goes on from there."""
    db = tmp_path / "terminated.duckdb"
    proc, stored = walk_in_progress(db, env)
    try:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 143, err
    assert b"walk interrupted; what it ran is stored" in err
    store = Store.open(db)
    (walk,) = store.query("SELECT * FROM walks").to_dict("records")
    ran = int(store.query("SELECT count(*) AS n FROM runs")["n"][0])
    assert walk["complete"] is False and walk["runs"] == ran >= stored
    resumed = cli_json(*SLOW_WALK, "--db", str(db), "--json", env=env)
    assert resumed["complete"] and resumed["runs_reused"] >= ran


def test_a_second_walk_over_a_running_walks_budgets_is_refused(
    tmp_path: Path, env: dict[str, str]
) -> None:
    """A walk running on a store (here stopped with SIGSTOP: still alive, holding its claim)
    keeps a second walk off its budgets: refused in one line, exit 2, nothing stored. Another
    stretch of the trace, or the same one under another policy, walks beside it; once the
    first walk is killed, its claim goes with it and the refused command walks."""
    db = tmp_path / "claimed.duckdb"
    proc, _ = walk_in_progress(db, env)
    try:
        proc.send_signal(signal.SIGSTOP)
        store = Store.open(db)
        before = int(store.query("SELECT count(*) AS n FROM runs")["n"][0])
        overlapping = ("landscape", SYNTHETIC, "--from", "0.44", "--to", "0.46")
        refused = cli(*overlapping, "--policy", "DTREqClass", "--db", str(db), env=env)
        assert refused.returncode == 2, refused.stderr
        (line,) = refused.stderr.splitlines()
        assert f"a walk of {SYNTHETIC} (DTREqClass, cap 60 s) is running on this store" in line
        assert f"process {proc.pid} " in line and "stop it (SIGTERM keeps what it ran)" in line
        assert int(store.query("SELECT count(*) AS n FROM runs")["n"][0]) == before
        assert len(store.query("SELECT * FROM walks")) == 0  # the refused walk left no row
        (running,) = running_walks(db)  # what the dashboard reads: the stopped walk, alive
        assert (running.pid, running.trace, running.policy) == (proc.pid, SYNTHETIC, "DTREqClass")
        peak = run_point(SYNTHETIC, ratio=0.5)["peak"]
        assert running.gaps[-1][1] == int(0.45 * peak)  # the slow walk's end, still to walk
        listed = cli("walking", "--db", str(db), env=env)  # the same, from the command line
        (line,) = listed.stdout.splitlines()
        assert line.startswith(f"{SYNTHETIC} DTREqClass (cap 60 s): budgets "), line
        assert "-0.4500), " in line and f"; process {proc.pid} on " in line
        (listed_json,) = cli_json("walking", "--db", str(db), "--json", env=env)
        assert listed_json["pid"] == proc.pid and listed_json["gaps"][-1][1] == int(0.45 * peak)
        beside = ("landscape", SYNTHETIC, "--from", "0.46", "--to", "0.47", "--json")
        elsewhere = cli_json(*beside, "--policy", "DTREqClass", "--db", str(db), env=env)
        assert elsewhere["complete"] and elsewhere["runs_executed"] > 0
        other_policy = cli_json(*overlapping, "--json", "--db", str(db), env=env)
        assert other_policy["complete"] and other_policy["runs_executed"] > 0
        proc.send_signal(signal.SIGKILL)
        proc.communicate()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    # a dead walk's claim is not a running walk, and the reader leaves it for a walk to remove
    assert running_walks(db) == []
    assert cli("walking", "--db", str(db), env=env).stdout == f"no walk is running on {db}\n"
    assert len(list((tmp_path / "claimed.duckdb.walking").glob("*.json"))) == 1
    walked = cli_json(*overlapping, "--policy", "DTREqClass", "--json", "--db", str(db), env=env)
    assert walked["complete"] and walked["runs_executed"] > 0
    # the dead walk's claim and progress note went with the next walk's claim, and its own
    assert list((tmp_path / "claimed.duckdb.walking").glob("*")) == [
        tmp_path / "claimed.duckdb.walking" / ".lock"
    ]


def test_claims_conflict_only_on_shared_budgets_of_one_trace_policy_and_cap(
    tmp_path: Path,
) -> None:
    from engine.landscape.walk_claims import WalkOverlap, claimed, new_claim

    path = tmp_path / "s.duckdb"
    first = new_claim("a" * 32, "t", "sha", "DTR", 60, [(100, 200), (300, 400)])
    with claimed(path, first):
        for gaps, policy, cap in (([(201, 299)], "DTR", 60), ([(150, 160)], "LRU", 60)):
            with claimed(path, new_claim("b" * 32, "t", "sha", policy, cap, gaps)):
                pass
        with claimed(path, new_claim("c" * 32, "t", "sha", "DTR", 30, [(150, 160)])):
            pass
        late = new_claim("d" * 32, "t", "sha", "DTR", 60, [(250, 420)])
        with pytest.raises(WalkOverlap, match=r"over budgets 300\.\.400 "), claimed(path, late):
            pass
    with claimed(path, new_claim("d" * 32, "t", "sha", "DTR", 60, [(250, 420)])):
        pass  # the first claim ended with its walk


def test_a_reader_of_running_walks_never_waits_on_a_walk_claiming(tmp_path: Path) -> None:
    """The dashboard's read: the live claims; None, not a hang, while a walk holds the claims'
    directory lock (here taken by this test, as a walk stopped while claiming would)."""
    import fcntl

    from engine.landscape.walk_claims import claimed, claims_dir, new_claim

    path = tmp_path / "s.duckdb"
    assert running_walks(path) == []
    claim = new_claim("a" * 32, "t", "sha", "DTR", 60, [(100, 200)])
    with claimed(path, claim):
        assert running_walks(path) == [claim]
        with open(claims_dir(path) / ".lock", "a") as directory_lock:
            fcntl.flock(directory_lock, fcntl.LOCK_EX)
            assert running_walks(path, wait_s=0.2) is None
        assert running_walks(path) == [claim]
    assert running_walks(path) == []


def test_a_chunk_that_stopped_early_continues_its_walk_in_the_same_process(
    env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A chunk that reports early (its run or time limit) leaves its walk positioned at the
    next budget; the chunk continuing it in this process resumes that state instead of a
    fresh run, and the records are those of one uninterrupted chunk."""
    from engine.landscape.chunks import ChunkTask, walk_chunk
    from engine.sim.catalog import resolve
    from engine.sim.simulate import baseline, budget_for, load

    # (without the C runtime a chunk replays every run afresh, and this test fails: the
    # runtime is part of the product, and tests/test_native.py says so first)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    ref = resolve(SYNTHETIC)
    peak = baseline(load(ref)[1]).peak
    start, end = budget_for(0.395, peak), budget_for(0.402, peak)
    whole = walk_chunk(ref, ChunkTask("DTR", 60.0, start, end, max_runs=12))
    first = walk_chunk(ref, ChunkTask("DTR", 60.0, start, end, max_runs=5))
    assert first.next_budget is not None and first.fresh_runs == 1
    rest = walk_chunk(ref, ChunkTask("DTR", 60.0, first.next_budget, end, max_runs=7))
    assert rest.fresh_runs == 0 and rest.resumed_runs == 7  # no fresh run: the walk went on
    assert compared_records(first) + compared_records(rest) == compared_records(whole)
    # a chunk elsewhere (another budget) starts afresh, and the kept walk is dropped
    other = walk_chunk(ref, ChunkTask("DTR", 60.0, start, end, max_runs=3))
    assert other.fresh_runs == 1 and compared_records(other) == compared_records(whole)[:3]


@pytest.mark.parametrize("workers", [1, 2])
def test_the_rest_of_a_chunk_continues_where_its_walk_is_live(
    workers: int, env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Three chunks walked in slices of 10 runs, by one process or two spawned ones: each
    slice's rest is run next by the process that ran the slice, so every chunk begins with
    one fresh run and no slice after its first does (the rest queued behind the other chunks
    began each slice afresh), and the records are those of each chunk walked whole. (On Dask:
    tests/test_distributed.py.)"""
    from engine.landscape.chunks import ChunkRunner

    for key, value in env.items():
        monkeypatch.setenv(key, value)
    ref, sha256, chunks, whole = three_chunks(SYNTHETIC)
    used = walk_in_slices(ChunkRunner(ref, sha256, workers=workers), chunks, whole)
    assert used == ({None} if workers == 1 else {0, 1})  # two processes: both busy


def test_an_idle_worker_asks_a_busy_chunk_for_half_its_rest(
    env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two processes, one given a single execution and one a long chunk: the idle one asks the
    long chunk to report and takes the upper half of its rest, until it is walked. (On Dask:
    tests/test_distributed.py.)"""
    from engine.landscape.chunks import ChunkRunner
    from engine.sim.catalog import resolve
    from engine.sim.simulate import load

    for key, value in env.items():
        monkeypatch.setenv(key, value)
    ref = resolve(SYNTHETIC)
    sha256 = load(ref)[1].sha256
    assert sha256
    assert walk_with_asks(ChunkRunner(ref, sha256, workers=2)) == {0, 1}


def test_an_idle_worker_s_half_is_worth_a_fresh_run() -> None:
    """The rest of a chunk asked for an idle worker is cut in two halves of its bytes when, at
    the pace of its last 16 executions, it would take more than two fresh runs; else it stays
    whole with the chunk's live walk."""
    from datetime import datetime

    from engine.landscape.chunks import ChunkDone, ChunkTask, Timed, rest_halves

    now = datetime.now()
    runs = [
        Timed(
            {"same_execution": {"lo": 1000 + 100 * k, "hi": 1099 + 100 * k}, "wall_s": 0.5},
            now,
            now,
        )
        for k in range(40)
    ]  # 40 executions of 100 bytes, 0.5 s each: [1000, 4999]
    done = ChunkDone(ChunkTask("DTR", 60.0, 1000, 10_000), runs, next_budget=5000, asked=True)
    # the last 16 covered 1,600 bytes in 8 s: the 5,001 bytes left take some 25 s
    assert rest_halves(done, restart_s=12.0) == [(5000, 7499), (7500, 10_000)]
    assert rest_halves(done, restart_s=13.0) == [(5000, 10_000)]
    assert rest_halves(ChunkDone(ChunkTask("DTR", 60.0, 0, 5001), runs, next_budget=5000), 0.0) == [
        (5000, 5001)
    ]


def test_an_estimate_samples_the_range_and_stores_nothing(
    tmp_path: Path, env: dict[str, str]
) -> None:
    """`landscape --estimate`: short walks in strata say about how many executions a full walk
    has (within a few times the truth) and what it costs, and nothing is written."""
    wide = ("landscape", SYNTHETIC, "--from", "0.05", "--to", "1.5")
    db = tmp_path / "never.duckdb"
    guess = cli_json(*wide, "--estimate", "12", "--db", str(db), "--json", env=env)
    assert not db.exists() and not db.with_name(db.name + ".parts").exists()
    # 12 strata, then the costliest halved 12 times: 24 contiguous strata over the range
    assert len(guess["strata"]) == 24 and guess["seconds"] > 0
    assert guess["strata"][0]["lo"] == guess["from_budget"]
    assert guess["strata"][-1]["hi"] == guess["to_budget"]
    _contiguous([{"lo": s["lo"], "hi": s["hi"]} for s in guess["strata"]])
    plain = cli_json(*wide, "--estimate", "12", "--estimate-refine", "0", "--json", env=env)
    assert len(plain["strata"]) == 12
    truth = cli_json(*wide, "--db", str(tmp_path / "walked.duckdb"), "--json", env=env)
    executions = len(truth["intervals"])
    assert executions / 3 < guess["executions"] < executions * 3
    statuses = {k for s in guess["strata"] for k in s["statuses"]}
    assert statuses == {o["status"] for o in truth["intervals"]}
    # a time limit per sample: past it (here at once) a sample stops after two executions
    quick = ("--estimate", "4", "--estimate-seconds", "1e-9", "--json")
    brief = cli_json(*wide, *quick, env=env)
    assert brief["sample_seconds"] == 1e-9 and len(brief["strata"]) == 8  # 4, halved 4 times
    # two executions a sample, but one where the sample starts in the walk's last, unbounded
    # interval (its first execution already reaches every larger budget); which strata the
    # halvings pick depends on the samples' timings, so there may be several such strata
    unbounded = truth["intervals"][-1]
    assert unbounded["hi"] is None
    sampled = [(s["sampled_from"], s["executions_sampled"]) for s in brief["strata"]]
    assert [n for _, n in sampled] == [
        1 if middle >= unbounded["lo"] else 2 for middle, _ in sampled
    ], sampled
    assert any(n == 2 for _, n in sampled) and any(n == 1 for _, n in sampled), sampled
    assert max(s["executions_sampled"] for s in guess["strata"]) == 25  # unlimited: 25


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (("--estimate", "0"), "--estimate: expected a whole number of at least 1"),
        (("--estimate", "2", "--estimate-refine", "-1"), "expected a whole number of at least 0"),
        (("--estimate", "3", "--policy", "TwoPhase"), "does not share work for TwoPhase"),
        (("--estimate", "3", "--estimate-seconds", "0"), "--estimate-seconds: expected a positive"),
    ],
)
def test_a_bad_estimate_is_one_line(
    extra: tuple[str, ...], message: str, env: dict[str, str]
) -> None:
    out = cli("landscape", SYNTHETIC, "--from", "0.3", "--to", "0.5", *extra, env=env)
    assert out.returncode == 2 and message in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize(
    ("seconds", "said"),
    [
        (0.2, "under 1 s"),
        (0.6, "1 s"),
        (40, "40 s"),
        (720, "12 min"),
        (12_600, "3.5 h"),
        (216_000, "2.5 days"),
    ],
)
def test_an_estimate_s_time_reads_as_a_reader_weighs_it(seconds: float, said: str) -> None:
    """The estimate's sentence (CLI and jobs panel): a tiny walk's time is not "0 s"."""
    from engine.landscape.estimate import duration

    assert duration(seconds) == said
