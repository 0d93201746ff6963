"""`docs/openapi.json`, the HTTP API as an OpenAPI 3.1 document generated from the code.

Powertools builds each API function's part from its resolver: the routes, their path
parameters, and what each route declares with `wakeup.api.route_docs` (replies, errors, body, query).
The schemas come from the pydantic models (`wakeup.api.models` for bodies, `apidoc.schema`
for replies). Validation stays off at run time (it would cost the functions' cold start): the
document is built here, at build and test time only.

`make openapi` (`python -m apidoc`) writes the document; tests/functional/test_openapi.py fails
when the file drifts from the code.
"""

from __future__ import annotations

import importlib.util
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any, Literal, cast

ROOT = Path(__file__).resolve().parents[1]
DOCUMENT = ROOT / "docs" / "openapi.json"
# The API functions (template.yaml's HttpApi events), by their folder under functions/.
API_FUNCTIONS = ("instances", "wake")
BEARER = "an account token (swa_...) or an instance token (swi_...), as the route says"
DESCRIPTION = (
    "Wakes stopped hosts on time: at `at` the service calls `GET {url}/wake` on the host, with backoff until 2xx. "
    "Accounts register their hosts as instances with an account token (`swa_...`); an instance asks for its wake "
    'with its own instance token (`swi_...`). Every error is `{"error": "<a sentence>"}`; API Gateway answers '
    'some requests itself (429, 500, 503) as `{"message": ...}`. Anything else is 404 (unknown path) or 405 '
    "(known path, other method), with the error body."
)


def build() -> dict[str, Any]:
    """The document, as the code describes the API now."""
    from aws_lambda_powertools.event_handler.openapi.merge import OpenAPIMerge
    from pydantic import BaseModel
    from pydantic.json_schema import models_json_schema

    from apidoc.schema import REPLY_MODELS
    from wakeup import __version__
    from wakeup.api.models import RegisterInstanceBody, RegisterWakeBody

    merge = OpenAPIMerge(
        title="wakeup",
        version=__version__,
        description=DESCRIPTION,
        # As the document writes it: OpenAPIMerge puts the schemes in as they are given.
        security_schemes=cast(Any, {"bearer": {"type": "http", "scheme": "bearer", "description": BEARER}}),
        security=[{"bearer": []}],
        on_conflict="error",
    )
    for function in API_FUNCTIONS:
        merge.add_schema(json.loads(_handler(function).app.get_openapi_json_schema()))
    every_model: tuple[type[BaseModel], ...] = (RegisterInstanceBody, RegisterWakeBody, *REPLY_MODELS)
    models: list[tuple[type[BaseModel], Literal["validation"]]] = [(model, "validation") for model in every_model]
    _, schemas = models_json_schema(models, ref_template="#/components/schemas/{model}")
    merge.add_schema({"components": {"schemas": schemas["$defs"]}})
    return _without_empty_content(_without_unused_schemas(merge.get_openapi_schema()))


def _without_empty_content(document: dict[str, Any]) -> dict[str, Any]:
    """A reply without a body (204) has no content at all, rather than an empty map."""
    for item in document["paths"].values():
        for operation in item.values():
            for reply in operation["responses"].values():
                if reply.get("content") == {}:
                    del reply["content"]
    return document


def _without_unused_schemas(document: dict[str, Any]) -> dict[str, Any]:
    """Drops the schemas nothing refers to (Powertools adds its validation errors, unused here)."""
    schemas = document["components"]["schemas"]
    used: set[str] = set()
    pending = _refs(document["paths"])
    while pending:
        name = pending.pop()
        if name not in used:
            used.add(name)
            pending |= _refs(schemas[name])
    document["components"]["schemas"] = {name: schema for name, schema in schemas.items() if name in used}
    return document


def _refs(value: Any) -> set[str]:
    if isinstance(value, dict):
        found = {value["$ref"].rpartition("/")[2]} if isinstance(value.get("$ref"), str) else set()
        return found.union(*(_refs(item) for item in value.values()))
    if isinstance(value, list):
        return set().union(*(_refs(item) for item in value))
    return set()


def render(document: dict[str, Any]) -> str:
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"


def _handler(function: str) -> ModuleType:
    """functions/<function>/<function>_handler.py, as a module of its own (its init needs a table name)."""
    path = ROOT / "functions" / function / f"{function}_handler.py"
    spec = importlib.util.spec_from_file_location(f"apidoc_{function}_handler", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    with _environment(WAKEUP_TABLE="openapi-document"):
        spec.loader.exec_module(module)
    return module


@contextmanager
def _environment(**values: str) -> Iterator[None]:
    saved = {name: os.environ.get(name) for name in values}
    os.environ.update({name: value for name, value in values.items() if saved[name] is None})
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
