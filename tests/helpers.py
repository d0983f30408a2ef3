"""Small helpers shared by tests: running the real CLI in a subprocess, skipping (or, in
CI, failing) when data from outside the repository is missing, rendering a page, opening
exported figure files."""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
import time
import zlib
from pathlib import Path
from typing import Any, NoReturn
from xml.etree import ElementTree

import pytest
from flask.testing import FlaskClient
from werkzeug.test import TestResponse

REPO = Path(__file__).resolve().parent.parent
# CI (.ci/run) is given the DTR traces and the golden records: there, a test that cannot find
# them must fail, not skip, or a broken path would pass CI with those tests unrun.
STRICT_ENV = "DTR_LANDSCAPE_STRICT"


def skip_or_fail(reason: str) -> NoReturn:
    """Skip the test for want of outside data, saying why; fail it under DTR_LANDSCAPE_STRICT=1."""
    if os.environ.get(STRICT_ENV) == "1":
        pytest.fail(f"{reason} ({STRICT_ENV}=1: missing data fails)", pytrace=False)
    pytest.skip(reason)


def cli(
    *args: str, env: dict[str, str] | None = None, timeout: float = 600
) -> subprocess.CompletedProcess[str]:
    """Run `dtr-landscape ARGS` as a real process (python -m engine.cli.main)."""
    full_env = {**os.environ, **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "engine.cli.main", *args],
        cwd=REPO,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def cli_json(*args: str, env: dict[str, str] | None = None) -> dict:
    done = cli(*args, env=env)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def post_callback(
    client: FlaskClient,
    outputs: list[tuple[Any, str]],
    inputs: list[tuple[Any, str, Any]],
    state: list[tuple[Any, str, Any]] | None = None,
    *,
    changed: list[str] | None = None,
    pattern: str | None = None,
) -> TestResponse:
    """A Dash callback request as the browser sends it: (id, property) outputs, (id,
    property, value) inputs and state; `pattern`: the output key of a pattern-matching
    callback (its outputs' ids with wildcards, as `pattern_outputs` joins them), else the
    outputs' ids joined."""

    def value(item: tuple[Any, str, Any]) -> dict[str, Any]:
        return {"id": item[0], "property": item[1], "value": item[2]}

    described = [{"id": i, "property": p} for i, p in outputs]
    payload = {
        "output": pattern or ".." + "...".join(f"{i}.{p}" for i, p in outputs) + "..",
        "outputs": described[0] if pattern and len(described) == 1 else described,
        "inputs": [value(i) for i in inputs],
        "state": [value(i) for i in state or []],
        "changedPropIds": changed or [],
    }
    return client.post("/_dash-update-component", json=payload)


def pattern_outputs(*outputs: tuple[dict[str, str], str]) -> str:
    """A pattern-matching callback's output key: ({"key": "MATCH" or a value}, property)
    pairs, each id with its keys sorted and its wildcards in brackets, as Dash writes it."""

    def one(pattern: dict[str, str], prop: str) -> str:
        keys = sorted(pattern)
        shown = ",".join(
            f'"{k}":' + ('["MATCH"]' if pattern[k] == "MATCH" else f'"{pattern[k]}"') for k in keys
        )
        return "{" + shown + "}." + prop

    joined = "...".join(one(p, prop) for p, prop in outputs)
    return joined if len(outputs) == 1 else f"..{joined}.."


def render_page(client: FlaskClient, pathname: str, search: str = "") -> str:
    """A page's content as the browser gets it: the Dash Pages router callback's answer."""
    client.get("/")  # the router callback is registered on the first request
    response = post_callback(
        client,
        [("_pages_content", "children"), ("_pages_store", "data")],
        [("_pages_location", "pathname", pathname), ("_pages_location", "search", search)],
        changed=["_pages_location.pathname"],
    )
    assert response.status_code == 200
    return json.dumps(response.get_json()["response"]["_pages_content"])


def spoil_runs(db: Path) -> dict[Path, bytes]:
    """Overwrite the store's runs parts with bytes that are no Parquet file (a store that
    cannot be read); returns what they held, for `unspoil`."""
    parts = sorted(db.with_name(db.name + ".parts").glob("runs-*.parquet"))
    written = {part: part.read_bytes() for part in parts}
    assert written, f"no runs parts beside {db}"
    for part in parts:
        part.write_bytes(b"not a Parquet file")
    return written


def unspoil(written: dict[Path, bytes]) -> None:
    for part, content in written.items():
        part.write_bytes(content)


def open_png(body: bytes) -> tuple[int, int]:
    """(width, height) of a PNG whose image data decompresses: the file opens."""
    assert body[:8] == b"\x89PNG\r\n\x1a\n"
    offset, idat, size = 8, b"", (0, 0)
    while offset < len(body):
        (length,) = struct.unpack(">I", body[offset : offset + 4])
        kind = body[offset + 4 : offset + 8]
        chunk = body[offset + 8 : offset + 8 + length]
        if kind == b"IHDR":
            size = struct.unpack(">II", chunk[:8])
        elif kind == b"IDAT":
            idat += chunk
        offset += 12 + length
        if kind == b"IEND":
            break
    pixels = zlib.decompress(idat)
    assert len(pixels) >= size[0] * size[1]  # at least one byte a pixel
    return size


def open_svg(body: bytes) -> ElementTree.Element:
    root = ElementTree.fromstring(body)
    assert root.tag.endswith("svg") and len(root) > 0
    return root


def open_pdf(body: bytes) -> None:
    assert body.startswith(b"%PDF-") and b"%%EOF" in body[-1024:]
    assert b"/Type /Page" in body or b"/Type/Page" in body


def check_file(fmt: str, body: bytes) -> None:
    assert body, f"empty {fmt}"
    {"png": open_png, "svg": open_svg, "pdf": open_pdf}[fmt](body)


# -- walks in chunks ----------------------------------------------------------------------------
def compared_records(done: Any) -> list[dict]:
    """A chunk's records without what differs between equal executions (ids, clocks)."""
    return [{k: v for k, v in t.record.items() if k not in ("run_id", "wall_s")} for t in done.runs]


def three_chunks(trace: str) -> tuple[Any, str, list[tuple[int, int]], dict[int, list[dict]]]:
    """A trace's ratios 0.39-0.42 in three chunks (the synthetic trace: 65-84 executions
    each), with each chunk's records walked whole in this process: (ref, sha256, chunks,
    records by chunk start)."""
    from engine.landscape.chunks import ChunkTask, split, walk_chunk
    from engine.sim.catalog import resolve
    from engine.sim.simulate import baseline, budget_for, load

    ref = resolve(trace)
    program = load(ref)[1]
    assert program.sha256
    peak = baseline(program).peak
    chunks = split(budget_for(0.39, peak), budget_for(0.42, peak), 3, minimum=1)
    whole = {a: compared_records(walk_chunk(ref, ChunkTask("DTR", 60.0, a, b))) for a, b in chunks}
    assert all(len(records) > 10 for records in whole.values())
    return ref, program.sha256, chunks, whole


def walk_in_slices(
    runner: Any, chunks: list[tuple[int, int]], whole: dict[int, list[dict]], runs: int = 10
) -> set:
    """Walk the chunks with a ChunkRunner in slices of `runs` runs, each slice's rest
    submitted as a walk submits it, and check that the rest continued where its walk was
    live: every chunk began with one fresh run and no later slice did, each chunk's slices ran
    in one place, and the records are those of each chunk walked whole (`whole`). Returns the
    places (local slots or Dask workers) the chunks ran in."""
    from engine.landscape.chunks import ChunkTask

    runner.submit([ChunkTask("DTR", 60.0, a, b, max_runs=runs) for a, b in chunks])
    walked: dict[int, list[dict]] = {a: [] for a, _ in chunks}
    places: dict[int, set] = {a: set() for a, _ in chunks}
    fresh = slices = 0
    try:
        for done in runner.results():
            assert done.error is None, done.error
            chunk = max(a for a, _ in chunks if a <= done.task.start)
            walked[chunk] += compared_records(done)
            places[chunk].add(done.slot)
            fresh += done.fresh_runs
            slices += 1
            if done.next_budget is not None:
                rest = ChunkTask("DTR", 60.0, done.next_budget, done.task.end, max_runs=runs)
                runner.submit([rest], after=done)
    finally:
        runner.close()
    assert slices > 2 * len(chunks) and fresh == len(chunks)
    assert walked == whole
    assert all(len(ran_in) == 1 for ran_in in places.values()), places
    return set().union(*places.values())


def walk_with_asks(runner: Any) -> set:
    """A ChunkRunner's two workers, one given a single execution of synthetic-mlp and one a
    long chunk (DTREqClass runs in Python, some 14 ms each): once the first is idle it asks
    the long chunk to report after its run in progress and takes the upper half of its rest;
    whichever half ends first asks again. Checks that the chunk reported only when asked (its
    limits are far), was cut in halves, and that the executions found are those of the chunk
    walked whole in this process. Returns the places its pieces ran in."""
    from engine.landscape.chunks import ChunkTask, rest_halves, walk_chunk
    from engine.sim.simulate import baseline, budget_for, load

    peak = baseline(load(runner.trace)[1]).peak
    start, end = budget_for(0.40, peak), budget_for(0.44, peak)
    slow = ChunkTask("DTREqClass", 60.0, start, end, max_seconds=600.0)
    top = budget_for(2.0, peak)
    runner.submit([ChunkTask("DTR", 60.0, top, top), slow])

    def executions(done: Any) -> set[tuple]:
        return {
            (t.record["same_execution"]["lo"], t.record["same_execution"]["hi"], t.record["status"])
            for t in done.runs
        }

    walked: set[tuple] = set()
    asked = halves = 0
    places = set()
    try:
        for done in runner.results():
            assert done.error is None, done.error
            if done.task.policy != "DTREqClass":
                continue
            walked |= executions(done)
            places.add(done.slot)
            assert done.next_budget is None or done.asked  # its limits are far: asked
            asked += done.asked
            if done.next_budget is not None:
                rest = [(done.next_budget, done.task.end)]
                if runner.wants_split():
                    rest = rest_halves(done, 0.0)
                halves += len(rest) == 2
                runner.submit([ChunkTask("DTREqClass", 60.0, a, b) for a, b in rest], after=done)
    finally:
        runner.close()
    assert asked >= 1 and halves >= 1
    assert walked == executions(walk_chunk(runner.trace, slow))
    return places


# a walk that stays in progress long enough to be stopped, killed or looked at
SLOW_WALK = (
    "landscape",
    "synthetic-mlp",
    "--from",
    "0.38",
    "--to",
    "0.45",
    "--policy",
    "DTREqClass",
)


def walk_in_progress(
    db: Path, env: dict[str, str], *, noted: bool = False
) -> tuple[subprocess.Popen[bytes], int]:
    """SLOW_WALK (DTREqClass runs in Python: slow enough to catch) started into `db`, once it
    has stored at least 50 runs (and, if `noted`, written a progress note); the process and
    how many it had stored."""
    from engine.landscape.store import Store

    proc = subprocess.Popen(
        [sys.executable, "-m", "engine.cli.main", *SLOW_WALK, "--db", str(db), "--json"],
        env={**os.environ, **env},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    stored = 0
    claims = db.with_name(db.name + ".walking")
    while (stored < 50 or (noted and not list(claims.glob("*.progress")))) and proc.poll() is None:
        time.sleep(0.2)
        if db.with_name(db.name + ".parts").exists():
            stored = int(Store.open(db).query("SELECT count(*) AS n FROM runs")["n"][0])
    if proc.poll() is not None:
        err = proc.stderr.read().decode() if proc.stderr else ""
        raise AssertionError(
            f"the walk ended (exit {proc.returncode}) before it could be stopped:\n{err}"
        )
    return proc, stored
