"""Build the differential fixtures: random traces and what unmodified simrd does on them.

    .venv/bin/python tests/tools/make_differential_fixtures.py --out tests/fixtures/differential

For seeds 0..N-1 this writes ``traces/rand-SEED.log`` (from ``traces/random_traces.py``) and
runs each trace through the reference backend (``engine/sim/reference.py``, which needs
unmodified simrd: ``SIMRD_DIR`` or ``--simrd-dir``) at about eight budgets chosen around the
trace's own feasibility boundary, so that OOM, completed runs without rebuilds and runs with
evictions and rebuilds all appear. Some traces are also run under another simrd policy, with
a retained set (what-if), or with a low overhead cap (thrashing). Every point becomes one line
of ``expected.jsonl``: the run's arguments under ``"args"`` and the record fields (less
``wall_s`` and ``engine_version``, which describe the machine, not the run).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
from collections import Counter
from multiprocessing import Pool
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from engine.sim.reference import run_reference  # noqa: E402
from traces.random_traces import generate  # noqa: E402

OTHER_POLICIES = ("DTREqClass", "DTRLocal", "MSPS", "LRU", "LargestStorage")
DROPPED = ("wall_s", "engine_version")


def storage_ids(text: str) -> tuple[list[int], list[int]]:
    """(constant storage ids, other storage ids) of a trace, numbered as the engines do:
    tensor ids count up from 0 over every operator output after START."""
    constants: list[int] = []
    others: list[int] = []
    next_id = 0
    started = False
    lines = [json.loads(line) for line in text.splitlines() if line.strip()]
    i = 0
    while i < len(lines):
        j = lines[i]
        kind = j["INSTRUCTION"]
        i += 1
        if not started:
            started = kind == "ANNOTATE" and j["ANNOTATION"] == "START"
            continue
        if kind == "CONSTANT":
            constants.append(next_id)
            next_id += 1
        elif kind == "CALL":
            for k in range(len(j["RESULT"])):
                alias = int(lines[i + 2 * k + 1]["ALIAS"])
                if alias == -1:
                    others.append(next_id)
                next_id += 1
            i += 2 * len(j["RESULT"])
        elif kind == "MUTATE":
            for _ in j["MUTATE"]:
                others.append(next_id)
                next_id += 1
    return constants, others


class Runner:
    def __init__(self, trace_file: Path, rel: str, simrd_dir: str | None) -> None:
        self.trace_file = trace_file
        self.rel = rel
        self.simrd_dir = simrd_dir
        self.rows: list[dict] = []
        self.seen: set[tuple] = set()

    def run(self, *, budget=None, ratio=None, policy="DTR", retain=(), cap=60, keep=True) -> dict:
        rec = run_reference(
            str(self.trace_file),
            budget=budget,
            ratio=ratio,
            policy=policy,
            retain=frozenset(retain),
            cap=cap,
            simrd_dir=self.simrd_dir,
        )
        key = (rec["budget"], ratio, policy, tuple(sorted(retain)), cap)
        if keep and key not in self.seen:
            self.seen.add(key)
            args = {
                "trace": self.rel,
                "budget": None if ratio is not None else rec["budget"],
                "ratio": ratio,
                "policy": policy,
                "retain": sorted(retain),
                "cap": cap,
            }
            row = {"args": args}
            row.update({k: v for k, v in rec.items() if k not in DROPPED})
            self.rows.append(row)
        return rec


def lowest_boundary(runner: Runner, peak: int) -> int:
    """A budget that completes while one byte less does not (bisection; DTR)."""
    lo, hi = 0, peak  # lo fails (or is 0), hi completes
    while hi - lo > 1:
        mid = (lo + hi) // 2
        rec = runner.run(budget=mid, keep=False)
        if rec["status"] == "ok":
            hi = rec["same_execution"]["lo"] if rec["same_execution"]["lo"] > lo else mid
        else:
            hi_same = rec["same_execution"]["hi"]
            lo = hi_same if hi_same is not None and hi_same < hi else mid
    return hi


def fixtures_for(job: tuple[int, str, str | None]) -> list[dict]:
    seed, out_dir, simrd_dir = job
    out = Path(out_dir)
    text = generate(seed)
    rel = f"traces/rand-{seed}.log"
    path = out / rel
    path.write_text(text)
    runner = Runner(path, rel, simrd_dir)
    rng = random.Random(1000 + seed)

    top = runner.run(ratio=1.0)
    peak = top["peak"]
    b = lowest_boundary(runner, peak)
    span = peak - b

    # DTR around the boundary and up to the peak (7 or 8 points with the peak)
    if seed % 4 == 0:
        runner.run(ratio=0.05)  # usually fails at once: nothing fits, lo = 0
    if seed % 2 == 0:
        runner.run(budget=max(0, (b * 9) // 10))
    else:
        runner.run(ratio=0.5)
    runner.run(budget=max(0, b - 1))
    at_b = runner.run(budget=b)
    for f in (0.15, 0.4, 0.7):
        runner.run(budget=b + int(span * f))

    if seed % 3 == 1:
        policy = OTHER_POLICIES[(seed // 3) % len(OTHER_POLICIES)]
        runner.run(budget=(b * 3) // 4, policy=policy)
        runner.run(budget=b + span // 4, policy=policy)
        runner.run(budget=b + span // 2, policy=policy)

    if seed % 8 == 5:
        _consts, storages = storage_ids(text)
        if storages:
            retain = sorted(rng.sample(storages, min(len(storages), rng.randint(1, 3))))
            runner.run(budget=b + span // 3, retain=retain)
            runner.run(ratio=1.0, retain=retain)

    if at_b["status"] == "ok" and at_b["overhead"] > 1.05 and seed % 5 == 2:
        cap = round(1 + (at_b["overhead"] - 1) / 2, 3)
        runner.run(budget=b, cap=cap)

    return runner.rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=str(ROOT / "tests" / "fixtures" / "differential"))
    ap.add_argument(
        "-n", "--count", type=int, default=240, help="number of random traces (seeds 0..N-1)"
    )
    ap.add_argument(
        "--simrd-dir",
        default=os.environ.get("SIMRD_DIR"),
        help="simrd/ folder of a dtr-prototype checkout",
    )
    ap.add_argument("-j", "--jobs", type=int, default=2)
    args = ap.parse_args(argv)

    out = Path(args.out)
    (out / "traces").mkdir(parents=True, exist_ok=True)
    for old in (out / "traces").glob("rand-*.log"):
        old.unlink()

    jobs = [(seed, str(out), args.simrd_dir) for seed in range(args.count)]
    rows: list[dict] = []
    if args.jobs > 1:
        with Pool(args.jobs) as pool:
            for part in pool.imap(fixtures_for, jobs, chunksize=4):
                rows.extend(part)
    else:
        for job in jobs:
            rows.extend(fixtures_for(job))

    with open(out / "expected.jsonl", "w") as f:
        for row in rows:
            f.write(json.dumps(row, separators=(",", ":")) + "\n")

    by_status = Counter(r["status"] for r in rows)
    by_policy = Counter(r["args"]["policy"] for r in rows)
    remats = sum(1 for r in rows if r["rematerializations"] > 0)
    ok_remats = sum(1 for r in rows if r["rematerializations"] > 0 and r["status"] == "ok")
    retained = sum(1 for r in rows if r["args"]["retain"])
    size = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
    print(f"{len(rows)} records from {args.count} traces in {out}")
    print("by status:", dict(sorted(by_status.items())))
    print("by policy:", dict(sorted(by_policy.items())))
    print(
        f"with rematerializations > 0: {remats} ({ok_remats} of them ok);"
        f" with a retained set: {retained}"
    )
    print(f"fixture size: {size / 1e6:.2f} MB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
