"""The dashboard starts and answers real requests through Dash and Flask."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from flask.testing import FlaskClient

from app.server import create_app


@pytest.fixture
def client() -> FlaskClient:
    return create_app().server.test_client()


def _render_page(client: FlaskClient, pathname: str, search: str = "") -> str:
    """The page's content as the browser gets it: the Dash Pages router callback's answer."""
    client.get("/")  # the router callback is registered on the first request
    payload = {
        "output": ".._pages_content.children..._pages_store.data..",
        "outputs": [
            {"id": "_pages_content", "property": "children"},
            {"id": "_pages_store", "property": "data"},
        ],
        "inputs": [
            {"id": "_pages_location", "property": "pathname", "value": pathname},
            {"id": "_pages_location", "property": "search", "value": search},
        ],
        "changedPropIds": ["_pages_location.pathname"],
        "state": [],
    }
    response = client.post("/_dash-update-component", json=payload)
    assert response.status_code == 200
    return json.dumps(response.get_json()["response"]["_pages_content"])


def test_index_is_served(client: FlaskClient) -> None:
    response = client.get("/")
    assert response.status_code == 200
    assert "DTR landscape" in response.get_data(as_text=True)


def test_layout_is_served(client: FlaskClient) -> None:
    response = client.get("/_dash-layout")
    assert response.status_code == 200
    assert "DTR landscape" in json.dumps(response.get_json())


def test_home_lists_traces_and_ignores_stray_query(
    client: FlaskClient, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "resnet32-56-9000000000.0-2020-10-1-13-3-30-default.log").write_text("")
    monkeypatch.setenv("DTR_LANDSCAPE_TRACES", str(tmp_path))
    content = _render_page(client, "/", "?stray=1")
    assert "dashboard is coming" in content
    assert "resnet32" in content
    assert "set DTR_LANDSCAPE_TRACES" not in content


def test_home_without_traces_says_how_to_get_them(
    client: FlaskClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("DTR_LANDSCAPE_TRACES", raising=False)
    content = _render_page(client, "/")
    assert "dashboard is coming" in content
    assert "set DTR_LANDSCAPE_TRACES" in content
