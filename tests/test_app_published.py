"""The published landscapes page (/published) over the project's report and over files that
are not reports, through Dash and Flask (in-process test client)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from flask.testing import FlaskClient

from app.server import create_app
from tests.helpers import REPO, render_page

REPORT = REPO / "docs" / "landscapes.json"


@pytest.fixture
def client(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FlaskClient:
    monkeypatch.setenv("DTR_LANDSCAPE_DB", str(tmp_path / "landscape.duckdb"))
    monkeypatch.delenv("DTR_LANDSCAPE_REPORT", raising=False)
    return create_app().server.test_client()


def test_the_checkouts_report_is_shown(client: FlaskClient) -> None:
    content = render_page(client, "/published")
    # the summary: a row per trace, as the README's table has them
    for cells in (
        ["resnet32", "6,760", "1.0000", "7", "45,073,456", "44,998,960 (0.10184-0.10632)"],
        ["inceptionv4", "483,251", "1.0000", "27", "574,522,108"],
        ["unrolled_gan", "154,793", "1.0000", "46", "767,577"],
    ):
        assert all(json.dumps(cell) in content for cell in cells), cells
    assert "1 region, samples agree; 6 more exact holes" in content
    # each trace's holes, to the byte, with how to rerun their edges here
    assert json.dumps("2,097,568,332 (0.186528)") in content  # InceptionV4's widest hole
    assert json.dumps("126,416,640") in content
    report = json.loads(REPORT.read_text(encoding="utf-8"))
    for entry in report["traces"]:
        assert f'"id": "published-{entry["trace"]}"' in content
        assert f"check-report {REPORT} --trace {entry['trace']}" in content
    assert content.count('"type": "Tr"') == 1 + 8 + 8 + 205  # headings, traces, holes


def test_a_file_that_is_not_a_report_is_named_with_its_field(
    client: FlaskClient, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    report = json.loads(REPORT.read_text(encoding="utf-8"))
    kept = report["traces"][3]["holes"][0]["last_fail_byte"]
    report["traces"][3]["holes"][0]["last_fail_byte"] = "many"
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(report), encoding="utf-8")
    monkeypatch.setenv("DTR_LANDSCAPE_REPORT", str(bad))
    content = render_page(client, "/published")
    assert "The report cannot be shown" in content
    assert (
        f"{bad}: traces[3].holes[0].last_fail_byte: expected a whole number of bytes, "
        'got \\"many\\"' in content
    )
    assert "report-summary" not in content
    # the file fixed: shown at the next request (kept only while unchanged)
    report["traces"][3]["holes"][0]["last_fail_byte"] = kept
    bad.write_text(json.dumps(report) + "\n", encoding="utf-8")
    assert "report-summary" in render_page(client, "/published")
    monkeypatch.setenv("DTR_LANDSCAPE_REPORT", str(tmp_path / "missing.json"))
    content = render_page(client, "/published")
    assert f"{tmp_path / 'missing.json'}: cannot read it (No such file or directory)" in content


def test_the_header_links_to_the_page(client: FlaskClient) -> None:
    layout = json.dumps(client.get("/_dash-layout").get_json())
    assert '"href": "/published"' in layout
