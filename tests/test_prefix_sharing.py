"""Prefix and suffix sharing: a run resumed from the state where it first differs from the
previous budget's run, which merges into that run's rest where their states meet again or skips
ahead where it would replay it, gives the same record as a fresh run, field for field.

Checked against unmodified simrd's records (the golden set and the differential fixtures:
the walk starts one byte below a recorded interval, so the recorded execution is reached by
resuming) and against fresh runs of the C runtime along longer walks, with the state hash
recomputed from scratch at every boundary (a write that bypassed it fails the walk)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.sim import native
from engine.sim.events import EventLog
from engine.sim.policies import make_policy
from engine.sim.record import EXACT_FIELDS
from engine.sim.simulate import baseline, limit_for, load, make_record, run_point
from engine.sim.trace import Program
from engine.sim.walk_tracking import TrackingChoice
from tests.test_golden import RECORDS as GOLDEN
from traces.random_traces import generate

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "differential"
DIFFERENTIAL = [
    json.loads(line)
    for line in (FIXTURES / "expected.jsonl").read_text().splitlines()
    if line.strip()
]
COMPARED = tuple(f for f in EXACT_FIELDS if f != "budget")


def _walk(
    trace: str,
    start: int,
    policy: str,
    *,
    traces: Path | None = None,
    cap: float = 60,
    retain: frozenset[int] = frozenset(),
    steps: int = 2,
    verify_hash: bool = True,
    max_log_bytes: int | None = None,
    max_run_log_bytes: int = native.MAX_RUN_LOG_BYTES,
    checkpoint_words: int = -1,
    tracking: str | TrackingChoice = "always",
    point_every: int = native.POINT_EVERY,
) -> tuple[list[dict], dict]:
    """The records of the first `steps` executions from `start` up, and the walk's counters
    (every run keeps its trajectory unless `tracking` says otherwise: these tests are the
    merges' and jumps'; tests/test_walk_tracking.py chooses). `point_every` 1: a point after
    every computation inside a cascade, as walks kept before; the random traces' cascades are
    too short for the default's points to fall inside many of them."""
    ref, program = load(trace, traces)
    base = baseline(program)
    the_policy = make_policy(policy)
    walk = native.Walk(
        program,
        start,
        the_policy,
        remat_limit=limit_for(base, cap),
        retain=retain,
        verify_hash=verify_hash,
        max_log_bytes=max_log_bytes,
        max_run_log_bytes=max_run_log_bytes,
        checkpoint_words=checkpoint_words,
        tracking=tracking,
        point_every=point_every,
    )
    records = []
    for step in walk:
        record = make_record(ref, program, base, step.result, the_policy.spec, None, retain)
        record["resumed_operator"] = step.resumed_operator
        record["merged_operator"] = step.merged_operator
        records.append(record)
        if len(records) == steps or step.result.same_execution["hi"] is None:
            break
    return records, walk.stats()


def _resumed_equals(expected: dict, record: dict) -> None:
    assert record["budget"] == expected["same_execution"]["lo"]
    for name in COMPARED:
        want = expected[name]
        got = record[name]
        if name == "failure" and got is not None:
            # bytes over the budget: the same allocation, measured against another budget
            if "over_by" in want:
                assert got["over_by"] + record["budget"] == want["over_by"] + expected["budget"]
            got = {k: v for k, v in got.items() if k != "over_by"}
            want = {k: v for k, v in want.items() if k != "over_by"}
        assert got == want, name
    assert record["overhead"] == expected["overhead"]


@pytest.mark.parametrize(
    "golden",
    [g for g in GOLDEN if g["policy"] in native.NATIVE_POLICIES and g["same_execution"]["lo"] > 0],
    ids=lambda g: f"{g['trace']}-{g['policy']}-{g['ratio']}",
)
def test_resumed_runs_reproduce_the_golden_records(golden: dict, traces_dir: Path) -> None:
    lo = golden["same_execution"]["lo"]
    # the state hash is checked in the walks of the fixtures and of random traces: here it
    # would cost a full hash per operator of the DTR traces
    records, stats = _walk(
        golden["trace"], lo - 1, golden["policy"], traces=traces_dir, verify_hash=False
    )
    assert records[0]["same_execution"]["hi"] == lo - 1  # intervals tile the budgets
    assert stats["resumed_runs"] == 1 and stats["fresh_runs"] == 1
    _resumed_equals(golden, records[1])


def _chunks(size: int) -> list[list[dict]]:
    usable = [
        r
        for r in DIFFERENTIAL
        if r["policy"] in native.NATIVE_POLICIES and r["same_execution"]["lo"] > 0
    ]
    return [usable[i : i + size] for i in range(0, len(usable), size)]


@pytest.mark.parametrize("chunk", _chunks(150), ids=lambda c: c[0]["args"]["trace"])
def test_resumed_runs_reproduce_the_differential_fixtures(chunk: list[dict]) -> None:
    for expected in chunk:
        args = expected["args"]
        lo = expected["same_execution"]["lo"]
        records, stats = _walk(
            str(FIXTURES / args["trace"]),
            lo - 1,
            args["policy"],
            cap=args["cap"],
            retain=frozenset(args["retain"]),
        )
        assert stats["resumed_runs"] == 1, args
        _resumed_equals(expected, records[1])


@pytest.mark.parametrize("policy", ["DTR", "MSPS", "NbhdPenalty@b=0.25", "LRU", "HEStar"])
def test_long_walks_equal_fresh_runs(policy: str) -> None:
    """Forty executions in a row, each resumed from its predecessor's state, against fresh
    runs at the same budgets: every field but the wall time."""
    peak = run_point("synthetic-mlp", ratio=0.5)["peak"]
    records, stats = _walk("synthetic-mlp", int(0.38 * peak), policy, steps=40)
    assert stats["resumed_runs"] == len(records) - 1 >= 20
    assert any(r["resumed_operator"] > 0 for r in records[1:])
    _equal_fresh_runs("synthetic-mlp", policy, records)


def _equal_fresh_runs(trace: str, policy: str, records: list[dict]) -> None:
    for record in records:
        fresh = run_point(trace, budget=record["budget"], policy=policy)
        for name in fresh:
            if name not in ("wall_s",):
                assert record[name] == fresh[name], (name, record["budget"])


@pytest.mark.parametrize("point_every", [1, 3, native.POINT_EVERY])
@pytest.mark.parametrize("seed", range(16))
def test_merged_and_skipping_walks_equal_fresh_runs(
    tmp_path: Path, seed: int, point_every: int
) -> None:
    """Long walks over random traces (aliases, mutations, releases, multi-output operators)
    from several budgets, with a point inside cascades after every computation, after about
    one in three, and the default: every record equals a fresh run's."""
    path = tmp_path / f"rand-{seed}.log"
    path.write_text(generate(5000 + seed, n_ops=60 + seed * 10))
    peak = run_point(str(path), ratio=1.0)["peak"]
    policy = ("DTR", "MSPS", "NbhdPenalty@b=0.25", "CostStale")[seed % 4]
    for ratio in (0.3, 0.45, 0.6):
        records, _ = _walk(str(path), int(ratio * peak), policy, steps=30, point_every=point_every)
        _equal_fresh_runs(str(path), policy, records)


@pytest.mark.parametrize("point_every", [1, native.POINT_EVERY])
def test_walks_merge_and_skip_ahead(traces_dir: Path, point_every: int) -> None:
    """The economies happen on a DTR trace, and the walk still equals fresh runs: most runs
    merge into their predecessor's rest (some inside a cascade of rebuilds, with a point after
    every computation and with the default's spacing), and some skip ahead over a stretch
    where they would have replayed it. (From 0.2 of the peak runs now merge at an operator's
    start, before the cascade where they merged while a storage out of the pool kept its
    links; from 0.12 they still merge inside cascades.)"""
    ref, program = load("resnet32", traces_dir)
    start = int(0.12 * baseline(program).peak)
    records, stats = _walk(
        "resnet32", start, "DTR", traces=traces_dir, steps=60, point_every=point_every
    )
    assert stats["merges"] > len(records) / 2
    assert stats["mid_cascade_merges"] > 0
    assert stats["jumps"] > 0
    assert stats["log_compactions"] > 0  # in place, segments moved down in log order
    assert sum(r["merged_operator"] is not None for r in records) == stats["merges"]
    _equal_fresh_runs(str(ref.path), "DTR", records)


def _decisions(program: Program, budget: int, limit: float) -> tuple[list[tuple], list[int]]:
    """A fresh run's evictions and rebuilds in order, and the operator of each."""
    log = EventLog(program)
    policy = make_policy("DTR")
    native.NativeSimulation(program, budget, policy, remat_limit=limit, events=log).run()
    return list(zip(log.rows["kind"], log.rows["storage"], strict=True)), log.rows["operator"]


def test_runs_merge_once_their_decisions_agree_again(traces_dir: Path) -> None:
    """A resumed run makes other decisions than its predecessor for a while, then often the
    same ones again. From there their states are equal but for words nothing reads, and those
    must be equal too, or the state hashes differ and the run replays on: a storage out of the
    pool kept the links it had in it (ResNet-32 from 0.095: two of 31 such runs merged 8 and
    119 operators late; on InceptionV4's band such runs replayed hundreds of computations). So
    each run that merges does it by the operator after the one where the two fresh runs'
    decisions become the same for good."""
    ref, program = load("resnet32", traces_dir)
    base = baseline(program)
    limit = limit_for(base, 60)
    records, _ = _walk("resnet32", int(0.095 * base.peak), "DTR", traces=traces_dir, steps=110)
    checked = 0
    for record in records[1:]:
        if record["merged_operator"] is None:
            continue
        before, _ = _decisions(program, record["budget"] - 1, limit)
        after, operators = _decisions(program, record["budget"], limit)
        if len(before) != len(after):
            continue
        pairs = enumerate(zip(before, after, strict=True))
        last = max((i for i, (x, y) in pairs if x != y), default=None)
        if last is None or last + 1 >= len(after):
            continue
        assert record["merged_operator"] <= operators[last + 1] + 1, record["budget"]
        checked += 1
    assert checked >= 20
    _equal_fresh_runs(str(ref.path), "DTR", records)


def test_a_thrashing_band_jumps_along_its_encoded_log(traces_dir: Path) -> None:
    """InceptionV4 at 0.20: every run thrashes up to the cap (~90,000 evictions) and changes
    ~87M memory words (some 14M between the default's points, where a word rewritten by
    several computations is logged once), which the log keeps encoded (old ^ new, bitset
    bits). Resumed runs
    merge into their predecessor at once and jump along it, from the state copied at a
    checkpoint before or after where they land, then applying the words: each record equals
    a fresh run's."""
    ref, program = load("inceptionv4", traces_dir)
    start = int(0.2 * baseline(program).peak)
    records, stats = _walk(
        "inceptionv4", start, "DTR", traces=traces_dir, steps=8, verify_hash=False
    )
    assert {r["status"] for r in records} == {"thrashed"}
    assert stats["merges"] >= 5 and stats["jumps"] > 0 and stats["jumps_refused"] == 0
    assert stats["checkpoint_restores"] > 0
    assert stats["words_logged"] > 10_000_000
    assert stats["log_bytes"] < 8 * stats["words_logged"]  # 12 bytes a word unencoded
    _equal_fresh_runs(str(ref.path), "DTR", records)


def test_dropping_old_states_only_costs_replays() -> None:
    """With room for one kept state, a walk replays from the start when it needs an older
    one, and still gives the same records."""
    ref, program = load("synthetic-mlp")
    base = baseline(program)
    start = int(0.38 * base.peak)
    outs = []
    for keep in (1, 64):
        walk = native.Walk(
            program, start, make_policy("DTR"), remat_limit=limit_for(base, 60), max_snapshots=keep
        )
        results = []
        for step in walk:
            step.result.wall_s = 0.0
            results.append(step.result)
            if len(results) == 30:
                break
        outs.append((results, walk.stats()))
    assert outs[0][0] == outs[1][0]
    assert outs[0][1]["fresh_runs"] >= outs[1][1]["fresh_runs"]


def test_a_walk_past_its_log_limits_equals_fresh_runs(traces_dir: Path) -> None:
    """Past the trajectory log's limit (thrashing runs change ~50M words each) a segment keeps
    its point but not its changed words: runs still merge where their states meet, and replay
    the segments a jump would have skipped. Every record equals a fresh run's."""
    ref, program = load("resnet32", traces_dir)
    start = int(0.2 * baseline(program).peak)
    records, stats = _walk(
        "resnet32", start, "DTR", traces=traces_dir, steps=60, max_run_log_bytes=2000
    )
    assert stats["unlogged_segments"] > 0 and stats["jumps_refused"] > 0
    assert stats["merges"] > len(records) / 4
    _equal_fresh_runs(str(ref.path), "DTR", records)


@pytest.mark.parametrize("seed", range(4))
def test_random_walks_past_their_log_limits_equal_fresh_runs(tmp_path: Path, seed: int) -> None:
    """The same over random traces, with a limit just above the first run's log, and with a
    resumed run's own words limited: in the middle of a cascade or between operators."""
    path = tmp_path / f"rand-{seed}.log"
    path.write_text(generate(7000 + seed, n_ops=80 + seed * 10))
    peak = run_point(str(path), ratio=1.0)["peak"]
    policy = ("DTR", "MSPS", "NbhdPenalty@b=0.25", "CostStale")[seed % 4]
    unlogged = 0
    for ratio in (0.3, 0.45, 0.6):
        _, first = _walk(str(path), int(ratio * peak), policy, steps=1, max_log_bytes=0)
        logged = first["log_bytes"] + first["frame_bytes"] + first["checkpoint_bytes"]
        own = first["run_bytes"]
        for limits in ((logged * 13 // 10, 0), (0, own // 20)):
            records, stats = _walk(
                str(path),
                int(ratio * peak),
                policy,
                steps=30,
                max_log_bytes=limits[0],
                max_run_log_bytes=limits[1],
            )
            unlogged += stats["unlogged_segments"]
            _equal_fresh_runs(str(path), policy, records)
    assert unlogged > 0


@pytest.mark.parametrize("seed", range(8))
def test_jumps_from_checkpoints_equal_fresh_runs(tmp_path: Path, seed: int) -> None:
    """A jump starts from the copy of the state at the last checkpoint before where it lands,
    or from the first one after it and undoes the segments back to there, whichever applies
    fewer words (copies go along with their points when a run takes its predecessor's rest
    over, and are released when no point holds them). With a point after every computation
    inside cascades and a copy at every point, runs over
    random traces jump from copies all the time, and snapshot inside jumps too; with a copy
    once in 160 words some jumps go back from the copy after; with a log limit just above
    the first run's words the copies give their room up to the log. Every record equals a
    fresh run's, the state hash (recomputed at every boundary) holds, and the walk without
    copies gives the same records."""
    path = tmp_path / f"rand-{seed}.log"
    path.write_text(generate(9000 + seed, n_ops=80 + seed * 10))
    peak = run_point(str(path), ratio=1.0)["peak"]
    policy = ("DTR", "MSPS", "NbhdPenalty@b=0.25", "CostStale")[seed % 4]
    restores = backward = shed = 0
    for ratio in (0.3, 0.45, 0.6):
        start = int(ratio * peak)
        plain, plain_stats = _walk(
            str(path), start, policy, steps=30, checkpoint_words=0, point_every=1
        )
        assert plain_stats["checkpoints_taken"] == plain_stats["checkpoint_restores"] == 0
        expected = [_exact(r) for r in plain]
        _, first = _walk(
            str(path), start, policy, steps=1, max_log_bytes=0, checkpoint_words=0, point_every=1
        )
        for limit in (0, (first["log_bytes"] + first["frame_bytes"]) * 11 // 10):
            # a copy at every point; or a copy once in a while, so that a jump may land
            # nearer the copy after it than the one before and undo the log back from there
            for every in (1, 160):
                copied, stats = _walk(
                    str(path),
                    start,
                    policy,
                    steps=30,
                    checkpoint_words=every,
                    max_log_bytes=limit,
                    point_every=1,
                )
                assert [_exact(r) for r in copied] == expected
                restores += stats["checkpoint_restores"]
                backward += stats["checkpoint_restores_backward"]
                shed += stats["checkpoints_shed"]
        _equal_fresh_runs(str(path), policy, plain)
    assert restores > backward > 0 and shed > 0


def _exact(record: dict) -> dict:
    """What a record says of its execution (not how the walk reached it: where it resumed
    and merged depends on what the log kept)."""
    return {name: record[name] for name in EXACT_FIELDS}


@pytest.mark.parametrize(("trace", "ratio", "steps"), [("unrolled_gan", 0.22, 2), ("lstm", 0.2, 4)])
def test_walks_keep_reverse_rows_fresh_exactly(
    traces_dir: Path, trace: str, ratio: float, steps: int
) -> None:
    """Reverse rows kept fresh in place (_native/incremental.h), and new storages' forward rows
    derived from a parent's (regions.h, derive_forward), along walks that resume and jump,
    where the maintained neighbourhoods are not always what a fresh search finds (the
    Unrolled GAN near 0.22): under verify_hash every row taken as fresh or derived is compared
    with a fresh search as it is made, and every record equals a fresh run's that searches
    every neighbourhood from scratch."""
    ref, program = load(trace, traces_dir)
    base = baseline(program)
    policy = make_policy("DTR")
    records, stats = _walk(trace, int(ratio * base.peak), "DTR", traces=traces_dir, steps=steps)
    assert stats["incremental_searches"] > 0 and stats["fresh_absorbs"] > 0
    assert stats["derived_searches"] > 0 and stats["split_derivations"] > 0
    assert stats["cut_derivations"] > 0
    assert stats["points_resumed"] > 0  # resumed runs, whose restored states start the log afresh
    for record in records:
        fresh = native.NativeSimulation(
            program,
            record["budget"],
            policy,
            remat_limit=limit_for(base, 60),
            incremental=False,
        )
        expected = make_record(ref, program, base, fresh.run(), policy.spec, None, frozenset())
        assert fresh.stats()["incremental_searches"] == fresh.stats()["derived_searches"] == 0
        for name in expected:
            if name != "wall_s":
                assert record[name] == expected[name], (name, record["budget"])


def test_deep_cascades_keep_their_stacks_as_deltas(traces_dir: Path) -> None:
    """A thrashing LSTM run's cascades are up to 955 frames deep at each of its 200,000 points:
    kept whole at every point, the frame stacks alone went past the log's limit (107,805 of
    the first two runs' segments lost their words, so no jump could skip them). Each point
    keeps what changed since the one before it, and the log holds every segment. (The stacks
    rebuilt from the deltas are checked against the points' hashes along
    test_walks_keep_reverse_rows_fresh_exactly's LSTM walk, under verify_hash.)"""
    ref, program = load("lstm", traces_dir)
    records, stats = _walk(
        "lstm", int(0.22 * baseline(program).peak), "DTR", traces=traces_dir, verify_hash=False
    )
    assert max(record["max_nesting_depth"] for record in records) > 900
    assert stats["unlogged_segments"] == 0 and stats["jumps_refused"] == 0
