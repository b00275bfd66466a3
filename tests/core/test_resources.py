"""The contract files ship in the wheel and load through importlib.resources."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from openapi_spec_validator import validate

from tests.installs import ROOT, shared_wheel
from verdict_contract.core.resources import (
    OPENAPI_FILE,
    VERDICT_SCHEMA_FILE,
    bundled_openapi,
    openapi_document,
    schema_dir,
    verdict_schema,
)


def test_editable_install_reads_the_top_level_schema_directory() -> None:
    on_disk = json.loads((ROOT / "schema" / VERDICT_SCHEMA_FILE).read_text())
    assert verdict_schema() == on_disk
    assert (schema_dir() / OPENAPI_FILE).is_file()


def test_openapi_document_validates_with_its_external_reference() -> None:
    validate(openapi_document(), base_uri=(ROOT / "schema" / OPENAPI_FILE).as_uri())


def test_bundled_openapi_is_self_contained() -> None:
    document = bundled_openapi()
    validate(document)
    media = document["paths"]["/e"]["get"]["responses"]["200"]["content"]["application/json"]
    assert media["schema"] == {"$ref": "#/components/schemas/Verdict"}
    assert document["components"]["schemas"]["Verdict"] == verdict_schema()
    assert "Verdict" not in openapi_document()["components"].get("schemas", {})
    assert "Error" in document["components"]["schemas"]


def _links(node: object) -> list[str]:
    """Every ``$ref`` and ``externalValue`` in a document, as written."""
    if isinstance(node, dict):
        found = [v for k, v in node.items() if k in ("$ref", "externalValue")]
        return found + [link for value in node.values() for link in _links(value)]
    if isinstance(node, list):
        return [link for value in node for link in _links(value)]
    return []


def test_every_link_resolves_where_the_document_is() -> None:
    """The file's relative links name files beside it; the served copy has only inner ones."""
    outward = [link for link in _links(openapi_document()) if not link.startswith("#")]
    assert outward, "the file links its schema and example"
    for link in outward:
        assert (ROOT / "schema" / link).is_file(), link
    assert all(link.startswith("#/") for link in _links(bundled_openapi()))
    media = bundled_openapi()["paths"]["/e"]["get"]["responses"]["200"]["content"]
    assert media["application/json"]["examples"]["contradicted"]["value"]["schema"] == 7


def test_openapi_describes_the_endpoint() -> None:
    document = openapi_document()
    for method in ("get", "head"):
        operation = document["paths"]["/e"][method]
        assert operation["parameters"] == [{"$ref": "#/components/parameters/SessionId"}]
        assert set(operation["responses"]) == {"200", "400", "401", "404", "429", "503"}
    param = document["components"]["parameters"]["SessionId"]
    assert (param["name"], param["in"], param["required"]) == ("n", "query", True)
    assert (param["schema"]["minLength"], param["schema"]["maxLength"]) == (1, 256)
    assert openapi_document()["components"]["securitySchemes"]["bearerAuth"]["scheme"] == "bearer"


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return shared_wheel(tmp_path_factory)


def test_wheel_carries_the_schema_files(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    assert f"verdict_contract/schema/{VERDICT_SCHEMA_FILE}" in names
    assert f"verdict_contract/schema/{OPENAPI_FILE}" in names
    assert "verdict_contract/schema/examples/verdict-contradicted.json" in names
    assert "verdict_contract/py.typed" in names
    assert "verdict_contract/mockserver/web/app.py" in names
    assert "verdict_contract/contract_tests/test_auth.py" in names
    # One import package: nothing that could collide with an integrator's own folders.
    assert {name.split("/")[0] for name in names} == {
        "verdict_contract",
        next(n.split("/")[0] for n in names if ".dist-info/" in n),
    }


def test_installed_wheel_loads_the_schema(wheel_install: Path, tmp_path: Path) -> None:
    """The run's one install of the wheel (``tests/installs.py``), as pip lays it out."""
    target = wheel_install
    code = (
        "import verdict_contract.mockserver, verdict_contract.core.resources as r; "
        "print(verdict_contract.mockserver.__file__); print(r.verdict_schema()['title'])"
    )
    # PYTHONPATH puts the installed copy ahead of the editable one on sys.path.
    env = {**os.environ, "PYTHONPATH": str(target)}
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    origin, title = result.stdout.splitlines()
    assert Path(origin).is_relative_to(target)
    assert title == verdict_schema()["title"]
