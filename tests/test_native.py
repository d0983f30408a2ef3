"""The C runtime (engine/sim/_native/core.c) and the Python reference runtime make identical
runs: the same record field for field, the same event log row for row."""

from __future__ import annotations

import json
import math
import random
import re
from collections.abc import Callable
from functools import partial
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from engine.sim import native
from engine.sim.native import NativeSimulation
from engine.sim.policies import POLICIES as ALL_POLICIES
from engine.sim.policies import make_policy
from engine.sim.runtime import RunResult
from engine.sim.simulate import baseline, budget_for, load, run_point
from engine.sim.trace import Program
from traces.random_traces import TraceWriter, generate

C_POLICIES = [
    "DTR",
    "DTRLocal",
    "MSPS",
    "LRU",
    "LargestStorage",
    "NbhdPenalty@b=0.25",
    "HEStar",
    "CostStale",
    "TwoPhase@k=8",
]


def _same(trace: str, ratio: float, policy: str, **kwargs: object) -> None:
    c = run_point(trace, ratio=ratio, policy=policy, native=True, **kwargs)  # type: ignore[arg-type]
    python = run_point(trace, ratio=ratio, policy=policy, native=False, **kwargs)  # type: ignore[arg-type]
    c.pop("wall_s")
    python.pop("wall_s")
    assert c == python


def test_extension_is_built() -> None:
    # `make setup` compiles engine/sim/_native/core.c; without it runs are slower, not different.
    assert native.available()
    assert "native C" in native.backend_description()


def test_c_covers_every_policy_but_the_stateful_two() -> None:
    assert set(ALL_POLICIES) - native.NATIVE_POLICIES == {"DTREqClass", "RandomStorage"}
    assert {p.split("@")[0] for p in C_POLICIES} == native.NATIVE_POLICIES


@pytest.mark.parametrize("policy", C_POLICIES)
@pytest.mark.parametrize("ratio", [0.35, 0.45, 0.6])
def test_synthetic(policy: str, ratio: float) -> None:
    _same("synthetic-mlp", ratio, policy)


@pytest.mark.parametrize("seed", range(40))
def test_random_traces(tmp_path: Path, seed: int) -> None:
    path = tmp_path / f"rand-{seed}.log"
    path.write_text(generate(1000 + seed))
    rng = random.Random(seed)
    for ratio in (0.3, 0.5, 0.7):
        for policy in rng.sample(C_POLICIES, 3):
            _same(str(path), ratio, policy)


def _wide_trace(fan_in: int) -> str:
    """A trace whose `cat` has fan_in arguments, each its own storage, rebuilt under small
    budgets (its output and the chain after it are needed again in the backward pass)."""
    w = TraceWriter()
    w.annotate("START")
    x = w.call("input", [], [8], 1)[0]
    branches = [w.call("conv2d", [x], [4 + i % 3], 2 + i % 4)[0] for i in range(fan_in)]
    # each branch has a second child, so that a branch stays on a reverse frontier through it
    relus = [w.call("relu", [b], [4 + i % 3], 1 + i % 2)[0] for i, b in enumerate(branches)]
    cat = w.call("cat", branches, [4 * fan_in], 3)[0]
    other = w.call("cat", relus, [4 * fan_in], 3)[0]
    chain = [w.call("add", [cat, other], [4 * fan_in], 2)[0]]
    for i in range(6):
        chain.append(w.call("linear", [chain[-1]], [4 * fan_in], 4 + i)[0])
    loss = w.call("sum", [chain[-1]], [1], 1)[0]
    w.annotate("BACKWARD")
    grad = w.call("ones_like", [loss], [1], 1)[0]
    for saved in reversed(chain[1:]):
        grad = w.call("linear_backward", [grad, saved], [4 * fan_in], 4)[0]
    grad = w.call("cat_backward", [grad, cat, other], [4 * fan_in], 3)[0]
    for branch, relu in zip(branches, relus, strict=True):
        w.call("conv2d_backward", [grad, branch, relu], [4], 2)
    return w.text()


@pytest.mark.parametrize("fan_in", [8, 70])
def test_wide_operators(tmp_path: Path, fan_in: int) -> None:
    """Over 64 parents of a computation's new storages, the in-place reverse updates do not
    mark their resident children (incremental.h, note_parents) and scan every child instead:
    with either, the runs are the Python runtime's, and in a walk under verify_hash every
    reverse neighbourhood updated in place is what a fresh search finds."""
    path = tmp_path / f"wide-{fan_in}.log"
    path.write_text(_wide_trace(fan_in))
    _, program = load(str(path))
    peak = baseline(program).peak
    for ratio in (0.15, 0.2, 0.25, 0.3, 0.4, 0.5, 0.7):
        _same(str(path), ratio, "DTR")
        walk = native.Walk(program, budget_for(ratio, peak), make_policy("DTR"), verify_hash=True)
        assert len([step for _, step in zip(range(10), walk, strict=False)]) == 10
        assert walk.stats()["incremental_searches"] > 0


def _unsized(seed: int) -> str:
    """A random trace with a third of its storages of no size and a third of its operators of
    no compute: many candidates of the victim scan score inf, and some 0 (where it stops)."""
    rng = random.Random(seed)
    lines = []
    for line in generate(seed).splitlines():
        if '"INSTRUCTION":"MEMORY"' in line and rng.random() < 0.3:
            line = re.sub(r'"MEMORY":"\d+"', '"MEMORY":"0"', line)
        if '"TIME":"' in line and rng.random() < 0.3:
            line = re.sub(r'"TIME":"\d+"', '"TIME":"0"', line)
        lines.append(line)
    return "\n".join(lines) + "\n"


def _same_events(trace: str, ratio: float, policy: str, tmp_path: Path) -> list[dict]:
    """The C runtime's event log of one point, which is the Python runtime's row for row."""
    tables = []
    for use_c in (True, False):
        target = tmp_path / f"events-{use_c}.parquet"
        run_point(trace, ratio=ratio, policy=policy, events=target, native=use_c)
        tables.append(pq.read_table(target).to_pylist())
    c_rows, python_rows = tables
    assert len(c_rows) == len(python_rows)
    for ours, theirs in zip(c_rows, python_rows, strict=True):
        for key in ours:
            a, b = ours[key], theirs[key]
            if isinstance(a, float) and isinstance(b, float) and math.isnan(a):
                assert math.isnan(b)
            else:
                assert a == b, (key, ours, theirs)
    return c_rows


def test_victim_scan_past_storages_of_no_size(tmp_path: Path) -> None:
    """The scan for h_DTR and DTRLocal goes through the pool's storages with a size only
    (policy.h, choose_ratio): the victim, the runner-up and the candidates counted are the
    whole pool's, also where it stops at a score of 0 past storages of no size, and where the
    sized storages' runner-up scores inf (then it scans the whole pool). Records and event
    logs equal the Python runtime's, and both cases are reached."""
    reached = {"scans_whole_pool": 0, "scans_stopped_unsized": 0}
    for seed in range(2000, 2020):
        path = tmp_path / f"unsized-{seed}.log"
        path.write_text(_unsized(seed))
        _, program = load(str(path))
        peak = baseline(program).peak
        for ratio in (0.3, 0.5, 0.7):
            for policy in ("DTR", "DTRLocal"):
                _same(str(path), ratio, policy)
                _same_events(str(path), ratio, policy, tmp_path)
                sim = NativeSimulation(program, budget_for(ratio, peak), make_policy(policy))
                sim.run()
                for name in reached:
                    reached[name] += sim.stats()[name]
    assert all(reached.values()), reached


def test_retain_and_time_limit(tmp_path: Path) -> None:
    path = tmp_path / "rand.log"
    path.write_text(generate(77))
    _same(str(path), 0.4, "DTR", retain=frozenset({0, 3}))
    _same(str(path), 0.4, "DTR", time_limit=600.0)


@pytest.mark.parametrize("ratio", [0.101, 0.104])
def test_resnet32(traces_dir: Path, ratio: float) -> None:
    _same("resnet32", ratio, "DTR", traces=traces_dir)


def _ways_agree(program: Program, budget: int, remat_limit: int, ways: list[dict]) -> list[dict]:
    """Runs of one point, one per way of making the searches: the same record, the same number
    of searches and the same final state (every neighbourhood row); returns their stats."""
    runs = [
        NativeSimulation(
            program,
            budget,
            make_policy("DTR"),
            remat_limit=remat_limit,
            **way,
        )
        for way in ways
    ]
    results = [sim.run() for sim in runs]
    for result in results:
        result.wall_s = 0.0
    assert results[1:] == results[:1] * (len(ways) - 1)
    assert len({sim.core.state_digest() for sim in runs}) == 1
    stats = [sim.stats() for sim in runs]
    assert len({s["searches"] for s in stats}) == 1
    return stats


def test_shared_searches_equal_plain_ones(traces_dir: Path) -> None:
    """The shared neighbourhood searches find exactly what one search per storage finds,
    whichever way they make them: labels swept over the ids (the default where ids are a
    topological order), or one walk of the evicted region building rows by converting local
    unions bit by bit or from the region's global closures (forced here). A sweep takes up to
    512 bases at once (8 label words): also forced to 64 and 192, so that every pass of more
    is cut into several sweeps of other widths. And the reverse searches that only the
    computation's new storages changed are updated in place; two ways search them all from
    scratch."""
    # the label sweeps from scratch, so that every reverse pass reaches them at its full width
    ways: list[dict] = [
        {"shared_search": False},
        {"shared_rows": "auto"},
        {"shared_rows": "convert"},
        {"shared_rows": "closures"},
        {"shared_rows": "labels", "incremental": False},
        {"shared_rows": "labels", "sweep_words": 1, "incremental": False},
        {"shared_rows": "labels", "sweep_words": 3, "incremental": False},
        {"shared_search": False, "incremental": False},
        {"shared_rows": "auto", "incremental": False},
    ]
    widest, splits_abandoned = {}, {}
    for name, ratio in (
        ("resnet32", 0.101),
        ("unet", 0.433),
        ("densenet121", 0.2),
        ("lstm", 0.15),
        ("inceptionv4", 0.235),
    ):
        _, program = load(name, traces_dir)
        base = baseline(program)
        budget = budget_for(ratio, base.peak)
        stats = _ways_agree(program, budget, base.model_compute * 59, ways)
        plain, auto, convert, closures, labels, narrow, three, scratch, swept = stats
        widest[name] = labels["sweep_widest_chunk"]
        assert narrow["sweep_widest_chunk"] <= 64 and three["sweep_widest_chunk"] <= 192, name
        assert all(s["topological"] == 1 for s in stats), name
        assert plain["shared_passes"] == plain["sweep_passes"] == 0, name
        assert convert["shared_passes_closure_rows"] == convert["sweep_passes"] == 0, name
        assert closures["shared_passes_closure_rows"] == closures["shared_passes"] > 0, name
        assert closures["sweep_passes"] == 0, name
        assert labels["sweep_passes"] > 0 and labels["shared_passes"] == 0, name
        # ids are a topological order on every DTR trace: the default sweeps every pass
        assert auto["sweep_passes"] > 0 and auto["shared_passes"] == 0
        # reverse searches kept fresh in place (_native/incremental.h) in the first four ways,
        # from scratch in the others: the same rows (the states above are equal)
        assert all(s["incremental_searches"] > 0 for s in stats[:4]), name
        assert all(s["incremental_searches"] == s["fresh_absorbs"] == 0 for s in stats[4:]), name
        # and new storages' forward rows derived from a parent's in the first four (regions.h),
        # also where the parent reaches storages without the new one (split_interior), and
        # past its limit searched instead; their parents' forward rows cut where the new
        # storage stops them (cut_forward), and past its limit searched
        assert all(s["derived_searches"] > 0 for s in stats[:4]), name
        assert all(s["split_derivations"] > 0 for s in stats[:4]), name
        assert all(s["cut_derivations"] > 0 and s["cuts_abandoned"] > 0 for s in stats[:4]), name
        assert all(s["derived_searches"] == 0 for s in stats[4:]), name
        splits_abandoned[name] = auto["splits_abandoned"]
        assert swept["sweep_passes"] == labels["sweep_passes"] >= auto["sweep_passes"], name
    # the widths the points reach: one word (the LSTM), several, and all eight (InceptionV4's
    # passes fill a sweep of 512); the 64- and 192-base ways cut the wider passes in several
    assert widest["lstm"] <= 64 < widest["unet"] and widest["densenet121"] > 320, widest
    assert widest["inceptionv4"] == 512, widest
    assert splits_abandoned["inceptionv4"] > 0, splits_abandoned
    with pytest.raises(ValueError, match="sweep_words must be 1 to 8"):
        NativeSimulation(program, 1, make_policy("DTR"), sweep_words=9)
    with pytest.raises(
        ValueError, match="shared_rows: expected one of auto, convert, closures, labels"
    ):
        NativeSimulation(program, 1, make_policy("DTR"), shared_rows="sideways")


def _in_place(text: str) -> str:
    """A random trace whose calls of two or more arguments write their result into their
    oldest argument's storage (ALIAS of it) where that makes no cycle: edges then go from
    newer storages to older ones, and the storage graph stays acyclic."""
    lines = [json.loads(line) for line in text.splitlines()]
    storage: dict[str, str] = {}  # tensor name -> its storage (the name of its first tensor)
    born: dict[str, int] = {}
    children: dict[str, set[str]] = {}

    def reaches(a: str, b: str) -> bool:
        stack, seen = [a], {a}
        while stack:
            for c in children.get(stack.pop(), ()):
                if c == b:
                    return True
                if c not in seen:
                    seen.add(c)
                    stack.append(c)
        return False

    call: dict | None = None
    for i, obj in enumerate(lines):
        kind = obj["INSTRUCTION"]
        if kind == "CONSTANT":
            storage[obj["NAME"]] = obj["NAME"]
            born[obj["NAME"]] = i
        elif kind in ("COPY", "COPY_FROM"):
            storage[obj["DST"]] = storage[obj["SRC"]]
        elif kind == "CALL":
            call = obj
        elif kind == "MUTATE":
            for m in obj["MUTATE"]:
                name = obj["ARGS"][m]
                storage[name], born[name] = name, i
                for a in obj["ARGS"]:
                    if storage[a] != name:
                        children.setdefault(storage[a], set()).add(name)
        elif kind == "ALIAS" and call is not None:
            name, args = obj["NAME"], [storage[a] for a in call["ARGS"]]
            target = int(obj["ALIAS"])
            if target == -1 and len(call["RESULT"]) == 1 and len(set(args)) >= 2:
                oldest = min(range(len(args)), key=lambda k: born[args[k]])
                if not any(reaches(args[oldest], a) for a in args if a != args[oldest]):
                    obj["ALIAS"] = target = str(oldest)
            target = int(target)
            out = name if target == -1 else args[target]
            storage[name] = out
            born.setdefault(out, i)
            for a in args:
                if a != out:
                    children.setdefault(a, set()).add(out)
    return "\n".join(json.dumps(obj) for obj in lines) + "\n"


def _outcome(run: Callable[[], object]) -> object:
    """What a run gives: its result, or the error it stops with (a maintained neighbourhood
    that lacks an evicted storage stops simrd on an assertion, and both runtimes alike)."""
    try:
        return run()
    except RuntimeError as error:
        return ("stopped", str(error))


def test_storage_graphs_against_id_order(tmp_path: Path) -> None:
    """Where an edge goes from a newer storage to an older one, ids are not a topological
    order: the sweep is not used, and runs are still the Python runtime's. (Writing into an
    argument's storage often leaves a maintained neighbourhood without an evicted storage,
    where simrd stops on an assertion: both runtimes stop there alike.)"""
    completed = stopped = 0
    for seed in range(8):
        path = tmp_path / f"in-place-{seed}.log"
        path.write_text(_in_place(generate(500 + seed, n_ops=60)))
        _, program = load(str(path))
        base = baseline(program)
        for ratio in (0.3, 0.5, 0.7, 0.9):
            records = [
                _outcome(partial(run_point, str(path), ratio=ratio, native=native))
                for native in (True, False)
            ]
            for record in records:
                if isinstance(record, dict):
                    record.pop("wall_s")
            if isinstance(records[0], dict):
                assert records[0] == records[1], (seed, ratio)
                completed += 1
            else:
                assert not isinstance(records[1], dict), (seed, ratio)
                stopped += 1
            outcomes = []
            for way in (
                {"shared_search": False},
                {"shared_rows": "auto"},
                {"shared_rows": "labels"},
                {"shared_rows": "auto", "incremental": False},
            ):
                sim = NativeSimulation(
                    program,
                    budget_for(ratio, base.peak),
                    make_policy("DTR"),
                    remat_limit=base.model_compute * 59,
                    **way,  # type: ignore[arg-type]
                )
                result = _outcome(sim.run)
                if isinstance(result, RunResult):
                    result.wall_s = 0.0
                    result = (result, sim.core.state_digest(), sim.stats()["searches"])
                outcomes.append(result)
                assert sim.stats()["topological"] == 0 and sim.stats()["sweep_passes"] == 0
            assert outcomes[1:] == outcomes[:1] * 3, (seed, ratio)
    assert completed >= 8 and stopped, (completed, stopped)


@pytest.mark.parametrize("policy", ["DTR", "TwoPhase@k=8", "LRU"])
def test_event_logs_are_identical(tmp_path: Path, policy: str) -> None:
    c_rows = _same_events("synthetic-mlp", 0.45, policy, tmp_path)
    assert c_rows
    assert any(r["runner_up"] is not None for r in c_rows if r["kind"] == "evict_policy")


def test_division_rounds_like_python() -> None:
    """The C scan's quotient is Python's correctly rounded int / int, ties included."""
    from engine.sim._native.core import true_divide

    rng = random.Random(7)
    pairs = [
        (rng.randrange(0, 1 << rng.choice([10, 40, 53, 54, 60])), rng.randrange(1, 1 << bits))
        for bits in (10, 53, 54, 64, 90, 120)
        for _ in range(20000)
    ]
    # exact ties and near-ties between two doubles
    pairs += [
        ((1 << k) + delta, d)
        for k in range(53, 62)
        for delta in range(-3, 4)
        for d in (2, 3, 4, 6, (1 << 64) + 1)
    ]
    assert all(true_divide(n, d) == n / d for n, d in pairs)


def test_carryless_product() -> None:
    """The walks' state hash multiplies without carries (engine/sim/_native/hash.h): the
    runtime's product (one instruction on x86-64) and the portable loop both equal the
    definition, the XOR of b's set bits' shifts of a."""
    from engine.sim._native.core import carryless_product

    def definition(a: int, b: int) -> int:
        out = 0
        for i in range(64):
            if b >> i & 1:
                out ^= a << i
        return out

    rng = random.Random(11)
    top = (1 << 64) - 1
    pairs = [(rng.getrandbits(64), rng.getrandbits(64)) for _ in range(2000)]
    pairs += [(0, 0), (top, top), (1, top), (top, 1), (1 << 63, 1 << 63), (3, 3), (top, 0)]
    for a, b in pairs:
        want = definition(a, b)
        assert carryless_product(a, b) == want, (a, b)
        assert carryless_product(a, b, True) == want, (a, b)
    # linear in each factor: a change is hashed as the XOR of the old and new values
    for a, b in pairs[:200]:
        c = rng.getrandbits(64)
        assert carryless_product(a, b) ^ carryless_product(a, c) == carryless_product(a, b ^ c)
