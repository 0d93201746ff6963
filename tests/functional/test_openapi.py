"""docs/openapi.json: generated from the code (`make openapi`), valid OpenAPI 3.1, in step with
the routes template.yaml declares, and describing the replies the handlers build."""

import re
from datetime import UTC, datetime
from typing import Any

import pytest
from openapi_spec_validator import validate
from pydantic import ValidationError

import apidoc
from apidoc.schema import Error, InstancePage, InstanceReply
from wakeup.api.models import instance_reply
from wakeup.model import Instance
from wakeup_awsfacts.template import load_template


@pytest.fixture(scope="module")
def document() -> dict[str, Any]:
    return apidoc.build()


def test_the_checked_in_document_is_the_one_the_code_generates(document: dict[str, Any]) -> None:
    # When this fails, run `make openapi` and commit docs/openapi.json with the change.
    assert apidoc.DOCUMENT.read_text(encoding="utf-8") == apidoc.render(document)


def test_the_document_is_valid_openapi_3_1(document: dict[str, Any]) -> None:
    validate(document)
    assert document["openapi"].startswith("3.1")


def _routes_of_the_template() -> set[tuple[str, str]]:
    template = load_template(apidoc.ROOT / "template.yaml")
    routes = set()
    for resource in template.resources.values():
        for event in (resource.get("Properties") or {}).get("Events", {}).values():
            properties = event.get("Properties") or {}
            if event.get("Type") == "HttpApi" and "Path" in properties:  # not the $default route
                routes.add((properties["Method"].lower(), re.sub(r"\{[^}]+\}", "{}", properties["Path"])))
    return routes


def test_every_route_of_the_template_is_documented_and_no_other(document: dict[str, Any]) -> None:
    documented = {
        (method, re.sub(r"\{[^}]+\}", "{}", path)) for path, item in document["paths"].items() for method in item
    }

    assert documented == _routes_of_the_template()


def test_every_operation_documents_its_errors_in_the_error_shape_and_bearer_security(document: dict[str, Any]) -> None:
    assert document["components"]["securitySchemes"]["bearer"] == {
        "type": "http",
        "scheme": "bearer",
        "description": "an account token (swa_...) or an instance token (swi_...), as the route says",
    }
    assert document["security"] == [{"bearer": []}]
    for path, item in document["paths"].items():
        for method, operation in item.items():
            statuses = {int(status) for status in operation["responses"]}
            assert {401, 429, 500, 503} <= statuses, (method, path)
            for status, reply in operation["responses"].items():
                if int(status) >= 400:
                    schema = reply["content"]["application/json"]["schema"]
                    assert "#/components/schemas/Error" in str(schema), (method, path, status)


def test_the_bodies_are_documented_as_the_handlers_read_them(document: dict[str, Any]) -> None:
    schemas = document["components"]["schemas"]
    post = document["paths"]["/wakeup/instances"]["post"]["requestBody"]
    put = document["paths"]["/wakeup/wake"]["put"]["requestBody"]

    assert post["required"] and put["required"]
    assert schemas["RegisterInstanceBody"]["required"] == ["url", "token"]
    assert schemas["RegisterWakeBody"]["required"] == ["at"]
    assert schemas["RegisterWakeBody"]["properties"]["at"]["format"] == "date-time"


@pytest.mark.parametrize(
    "instance",
    [
        Instance("0b7e1f0e-6f43-4c5e-9d55-3b1f6d3c2a10", "a", "http://h.test", datetime(2026, 1, 1, tzinfo=UTC)),
        Instance(
            "0b7e1f0e-6f43-4c5e-9d55-3b1f6d3c2a10",
            "a",
            "http://h.test",
            datetime(2026, 1, 1, tzinfo=UTC),
            at=datetime(2026, 12, 1, 9, 30, 0, 250_000, tzinfo=UTC),
            reg="r",
            called_at=datetime(2026, 12, 1, 9, 30, 1, tzinfo=UTC),
            attempts=2,
            last_error="HTTP 503",
        ),
    ],
)
def test_an_instance_as_the_handlers_show_it_matches_the_documented_reply(instance: Instance) -> None:
    shown = instance_reply(instance)

    InstanceReply.model_validate(shown, strict=True)
    InstancePage.model_validate({"instances": [shown], "next": None}, strict=True)


def test_the_documented_reply_refuses_what_the_handlers_never_send() -> None:
    with pytest.raises(ValidationError):
        InstanceReply.model_validate({"id": "x", "url": "u", "at": "2026-12-01T09:30:00Z"})
    with pytest.raises(ValidationError):
        Error.model_validate({"error": "", "trace": "..."})
