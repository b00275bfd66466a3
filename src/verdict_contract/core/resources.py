"""Access to the contract files shipped in ``schema/``.

``schema/`` is the package ``verdict_contract.schema`` (see ``pyproject.toml``), so
``importlib.resources`` finds the same files in a wheel, an editable install and a checkout.
"""

from __future__ import annotations

import json
from functools import cache
from importlib.resources import files
from importlib.resources.abc import Traversable
from typing import Any, cast

import yaml

from .spec import SCHEMA_VERSION

VERDICT_SCHEMA_FILE = f"verdict-{SCHEMA_VERSION}.schema.json"
OPENAPI_FILE = "openapi.yaml"


def schema_dir() -> Traversable:
    """Return the directory that holds the contract files."""
    return files("verdict_contract.schema")


@cache
def verdict_schema() -> dict[str, Any]:
    """Return the JSON Schema of the schema-7 verdict, parsed once per process."""
    text = (schema_dir() / VERDICT_SCHEMA_FILE).read_text(encoding="utf-8")
    return cast(dict[str, Any], json.loads(text))


@cache
def openapi_document() -> dict[str, Any]:
    """Return the OpenAPI 3.1 document of ``GET /e``, parsed once per process."""
    text = (schema_dir() / OPENAPI_FILE).read_text(encoding="utf-8")
    return cast(dict[str, Any], yaml.safe_load(text))


def example_verdict() -> dict[str, Any]:
    """Return a fresh copy of the example verdict shipped in ``schema/examples/``."""
    text = (schema_dir() / "examples" / "verdict-contradicted.json").read_text(encoding="utf-8")
    return cast(dict[str, Any], json.loads(text))


def bundled_openapi() -> dict[str, Any]:
    """Return the OpenAPI document with the verdict schema inlined under ``components``.

    ``openapi.yaml`` refers to the schema file and the example next to it; tools that take a
    single document (Swagger UI from a URL, the mock's ``/_mock/openapi.json``) get this
    self-contained copy, where neither link would resolve: both are inlined.
    """
    document = json.loads(json.dumps(openapi_document()))  # a deep copy, never the cached one
    document["components"].setdefault("schemas", {})["Verdict"] = verdict_schema()
    media = document["paths"]["/e"]["get"]["responses"]["200"]["content"]["application/json"]
    media["schema"] = {"$ref": "#/components/schemas/Verdict"}
    for example in media.get("examples", {}).values():
        linked = example.pop("externalValue", None)
        if linked is not None:
            text = (schema_dir() / linked).read_text(encoding="utf-8")
            example["value"] = json.loads(text)
    return cast(dict[str, Any], document)
