"""The launch form's validation and the engine command lines a job becomes."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.ids import LAUNCH_INPUTS
from app.launch import MAX_BUDGETS, MODE_FIELDS, MODES, LaunchError, grid_ratios, validate
from app.plans import plan

TRACES = {"synthetic-mlp": "shipped"}
POLICIES = ["DTR", "LRU", "NbhdPenalty", "TwoPhase"]


def check(**form: object) -> tuple[dict, str]:
    values = {"trace": "synthetic-mlp", "policy": "DTR", "cap": "60", **form}
    return validate(values, traces=TRACES, policies=POLICIES, peak=1000)


@pytest.mark.parametrize(
    ("form", "message"),
    [
        ({"mode": "ratio", "value": "0"}, "in (0, 2]"),
        ({"mode": "ratio", "value": "2.5"}, "in (0, 2]"),
        ({"mode": "ratio", "value": "abc"}, "must be a number"),
        ({"mode": "ratio", "value": ""}, "missing"),
        ({"mode": "ratio", "value": "nan"}, "finite"),
        ({"mode": "bytes", "value": "12.5"}, "whole number"),
        ({"mode": "bytes", "value": "2001"}, "over 2 x the peak"),
        ({"mode": "grid", "from": "0.3", "to": "0.8", "step": "0"}, "Step must be positive"),
        ({"mode": "grid", "from": "0.3", "to": "0.8", "step": "-1"}, "Step must be positive"),
        ({"mode": "grid", "from": "0.0001", "to": "2", "step": "0.0001"}, "at most 5,000"),
        ({"mode": "grid", "from": "0.8", "to": "0.3", "step": "0.1"}, "must be below 'To'"),
        # the engine's grid needs FROM < TO (`sweep --grid 0.4:0.4:0.1` is refused too)
        ({"mode": "grid", "from": "0.4", "to": "0.4", "step": "0.1"}, "must be below 'To'"),
        ({"mode": "walk", "from": "0.4", "to": "0.4"}, "must be below 'To'"),
        ({"mode": "refine", "from": "0.4", "to": "0.4", "points": "3"}, "must be below 'To'"),
        ({"mode": "refine", "from": "0.3", "to": "0.4", "points": "1"}, "Points must be"),
        ({"mode": "grid", "from": "0.3", "to": "0.4", "step": "inf"}, "finite"),
        ({"mode": "list", "list": "0.4, 2.5"}, "in (0, 2]"),
        ({"mode": "list", "list": "0.4, x"}, "must be a number"),
        ({"mode": "list", "list": ""}, "empty"),
        ({"mode": "walk", "from": "0.3", "to": "3"}, "in (0, 2]"),
        ({"mode": "estimate", "from": "0.5", "to": "0.4"}, "must be below 'To'"),
        ({"mode": "estimate", "from": "0.3", "to": ""}, "missing"),
        ({"mode": "estimate", "from": "0.3", "to": "0.4", "policy": "TwoPhase"}, "share their"),
        ({"mode": "audit", "from": "0.3", "to": "0.4", "points": "0"}, "in [1, 1,000]"),
        ({"mode": "audit", "from": "0.3", "to": "0.4", "points": "2.5"}, "whole number"),
        ({"mode": "audit", "from": "0.4", "to": "0.3", "points": "5"}, "must be below 'To'"),
        ({"mode": "ratio", "value": "0.5", "trace": "nope"}, "not in the engine's catalog"),
        ({"mode": "ratio", "value": "0.5", "policy": "Belady"}, "Unknown policy"),
        ({"mode": "ratio", "value": "0.5", "policy": "NbhdPenalty@q=1"}, "no parameter"),
        ({"mode": "ratio", "value": "0.5", "cap": "one"}, "Cap must be a number"),
        ({"mode": "ratio", "value": "0.5", "cap": "1"}, "greater than 1"),
    ],
)
def test_bad_input_is_one_message(form: dict, message: str) -> None:
    with pytest.raises(LaunchError) as caught:
        check(**form)
    assert message in str(caught.value)


def test_good_input_becomes_specs() -> None:
    spec, label = check(mode="ratio", value="0.45")
    assert spec == {
        "kind": "run",
        "trace": "synthetic-mlp",
        "policy": "DTR",
        "cap": 60.0,
        "ratio": 0.45,
        "total": 1,
        "retain": "",
    }
    assert "0.45" in label
    spec, _ = check(mode="bytes", value="1_000")
    assert spec["budget"] == 1000
    spec, _ = check(mode="grid", **{"from": "0.3", "to": "0.8", "step": "0.02"})
    assert spec["total"] == 26 and spec["ratios"][-1] == 0.8
    spec, _ = check(mode="list", list="0.5, 0.4; 0.5")
    assert spec["ratios"] == [0.4, 0.5]
    spec, _ = check(mode="refine", points="5", **{"from": "0.4", "to": "0.44"})
    assert spec["ratios"] == [0.4, 0.41, 0.42, 0.43, 0.44]
    spec, _ = check(mode="ratio", value="0.5", policy="NbhdPenalty")
    assert spec["policy"] == "NbhdPenalty@b=0.25"  # canonical spelling


def test_grid_limit_is_inclusive() -> None:
    assert len(grid_ratios(0.0004, 2.0, 0.0004)) == MAX_BUDGETS


@pytest.mark.parametrize(
    "form",
    [
        {"mode": "grid", "from": "0.3", "to": "0.8", "step": "0.02"},
        {"mode": "grid", "from": "0.4", "to": "0.4", "step": "0.1"},
        {"mode": "grid", "from": "0.0001", "to": "2", "step": "0.0001"},
        {"mode": "grid", "from": "0.3", "to": "2.5", "step": "0.1"},
        {"mode": "grid", "from": "0.3", "to": "0.4", "step": "0"},
        {"mode": "list", "list": "0.5, 0.4, 0.5"},
        {"mode": "list", "list": "0.5, 0"},
    ],
)
def test_the_form_accepts_exactly_what_the_sweep_accepts(form: dict) -> None:
    """The form's budgets and `dtr-landscape sweep`'s are checked by the same parsers."""
    from engine.landscape.sampling import parse_grid, parse_ratios

    text = f"{form['from']}:{form['to']}:{form['step']}" if form["mode"] == "grid" else form["list"]
    try:
        engine = parse_grid(text) if form["mode"] == "grid" else parse_ratios(text)
    except ValueError:
        engine = None
    try:
        ours = check(**form)[0]["ratios"]
    except LaunchError:
        ours = None
    assert ours == engine


def test_plans_use_sweep_when_the_engine_has_it(tmp_path: Path) -> None:
    db = tmp_path / "s.duckdb"
    spec, _ = check(mode="grid", **{"from": "0.3", "to": "0.4", "step": "0.05"})
    with_sweep = plan(spec, db=db, commands={"run", "sweep"})
    (step,) = with_sweep.steps
    assert step.argv[3:5] == ["sweep", "synthetic-mlp"] and "--grid" in step.argv
    assert step.argv[step.argv.index("--db") + 1] == str(db) and not step.stores
    without = plan(spec, db=db, commands={"run"})
    assert [s.argv[3] for s in without.steps] == ["run"] * 3 and all(
        s.stores for s in without.steps
    )
    walk, _ = check(mode="walk", **{"from": "0.3", "to": "0.4"})
    walk_argv = plan(walk, db=db, commands={"landscape"}).steps[0].argv
    assert walk_argv[3] == "landscape" and walk_argv[walk_argv.index("--workers") + 1] == "2"
    events = plan(
        {**check(mode="bytes", value="500")[0], "kind": "events", "run_id": "abc"},
        db=db,
        commands={"run"},
    )
    assert events.events_path == str(tmp_path / "events" / "abc.parquet")
    assert events.steps[0].argv[-2:] == ["--events", events.events_path]


def test_walk_and_edge_commands_parse_in_the_engine(tmp_path: Path) -> None:
    """The command lines we build are accepted by the engine's own parser (no run)."""
    from engine.cli.main import build_parser

    parser = build_parser()
    commands = set(parser._subparsers._group_actions[0].choices)  # type: ignore[union-attr]
    db = tmp_path / "s.duckdb"
    forms = [
        {"mode": "walk", "from": "0.3", "to": "0.4"},
        {"mode": "estimate", "from": "0.3", "to": "0.4"},
        {"mode": "audit", "from": "0.3", "to": "0.4", "points": "7"},
        {"mode": "edges"},
        {"mode": "grid", "from": "0.3", "to": "0.4", "step": "0.05"},
        {"mode": "list", "list": "0.3,0.4"},
        {"mode": "ratio", "value": "0.5"},
    ]
    for form in forms:
        spec, _ = check(**form)
        for step in plan(spec, db=db, commands=commands).steps:
            args = parser.parse_args(step.argv[3:])
            assert args.command == step.argv[3]


GOOD_FIELDS = {
    "ratio": {"value": "0.45"},
    "bytes": {"value": "900"},
    "list": {"list": "0.4, 0.5"},
    "grid": {"from": "0.3", "to": "0.8", "step": "0.1"},
    "refine": {"from": "0.3", "to": "0.4", "points": "3"},
    "walk": {"from": "0.3", "to": "0.4"},
    "estimate": {"from": "0.3", "to": "0.4"},
    "edges": {},
    "published": {},
    "audit": {"from": "0.3", "to": "0.4", "points": "5"},
}


class ReadFields(dict):  # type: ignore[type-arg]
    """A form that remembers which of its fields were read."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)
        self.read: set[str] = set()

    def get(self, key: str, default: object = None) -> object:
        self.read.add(key)
        return super().get(key, default)

    def __getitem__(self, key: str) -> object:
        self.read.add(key)
        return super().__getitem__(key)


@pytest.mark.parametrize("mode", list(MODES))
def test_a_mode_reads_the_fields_the_form_shows_for_it_and_no_other(mode: str) -> None:
    """The form hides the fields a mode does not name in MODE_FIELDS, so validate must read
    every one it names and nothing else: a hidden field's stale text never reaches a launch."""
    assert set(MODE_FIELDS) == set(MODES) and set(GOOD_FIELDS) == set(MODES)
    assert set(MODE_FIELDS[mode]) <= set(LAUNCH_INPUTS)
    context = {"trace": "synthetic-mlp", "policy": "DTR", "mode": mode}
    shown = {**context, "cap": "60", **GOOD_FIELDS[mode]}
    report = {"report": "/r/report.json", "report_traces": ["synthetic-mlp"]}
    form = ReadFields(shown)
    spec, label = validate(form, traces=TRACES, policies=POLICIES, peak=1000, **report)
    fields = form.read - set(context)
    assert fields == set(MODE_FIELDS[mode])
    junk = {name: "junk" for name in LAUNCH_INPUTS if name not in MODE_FIELDS[mode]}
    again = validate({**shown, **junk}, traces=TRACES, policies=POLICIES, peak=1000, **report)
    assert again == (spec, label)


def test_the_published_holes_edges_of_a_trace_of_the_shown_report(tmp_path: Path) -> None:
    from engine.cli.main import build_parser

    form = {"trace": "synthetic-mlp", "policy": "DTR", "cap": "60", "mode": "published"}
    spec, label = validate(
        form,
        traces=TRACES,
        policies=POLICIES,
        report="/r/report.json",
        report_traces=["a", "synthetic-mlp"],
    )
    assert spec["kind"] == "published" and spec["report"] == "/r/report.json"
    assert label == "the published holes' edges of synthetic-mlp (report.json)"
    with pytest.raises(LaunchError, match="No published report is shown here"):
        validate(form, traces=TRACES, policies=POLICIES)
    with pytest.raises(LaunchError, match=r"\(/r/report.json\) has no trace 'synthetic-mlp'"):
        validate(
            form, traces=TRACES, policies=POLICIES, report="/r/report.json", report_traces=["a"]
        )
    parser = build_parser()
    commands = set(parser._subparsers._group_actions[0].choices)  # type: ignore[union-attr]
    [step] = plan(spec, db=tmp_path / "s.duckdb", commands=commands, workers=2).steps
    args = parser.parse_args(step.argv[3:])
    assert (args.command, args.report, args.trace, args.workers) == (
        "check-report",
        "/r/report.json",
        ["synthetic-mlp"],
        2,
    )
    assert args.db == str(tmp_path / "s.duckdb") and not step.stores
