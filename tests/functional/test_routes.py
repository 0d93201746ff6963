"""The routes of `wakeup.api.routes` are the ones the handlers serve, and the `$default` route's
404 and 405 follow the same table (template.yaml's events: tests/template/test_template_resources.py)."""

import json

import pytest
from moto_env import imported_handler

from wakeup.api.routes import INSTANCES_FUNCTION, ROUTES, WAKE_FUNCTION, Route, allowed_methods

HANDLERS = {INSTANCES_FUNCTION: "instances", WAKE_FUNCTION: "wake"}


@pytest.mark.parametrize("function", sorted(HANDLERS))
def test_each_handler_serves_exactly_its_routes_of_the_table(function: str) -> None:
    app = imported_handler(HANDLERS[function]).app
    served = {
        (method.upper(), path)
        for path, item in json.loads(app.get_openapi_json_schema())["paths"].items()
        for method in item
    }

    assert served == {(route.method, route.path) for route in ROUTES if route.function == function}


def test_every_route_of_the_table_is_served_by_a_handler() -> None:
    assert {route.function for route in ROUTES} == set(HANDLERS)


@pytest.mark.parametrize(
    ("path", "allowed"),
    [
        ("/wakeup/instances", ["GET", "POST"]),
        ("/wakeup/instances/6f1c2a9e", ["GET", "DELETE"]),
        ("/wakeup/instances/an id\nthe router never matches\u20ac", ["GET", "DELETE"]),
        ("/wakeup/instances/6f1c2a9e/attempts", ["GET"]),
        ("/wakeup/wake", ["GET", "PUT"]),
        ("/wakeup/wakes", None),
        ("/wakeup/instances/a/b", None),
        ("/wakeup/instances/", None),
        ("/wakeup", None),
    ],
)
def test_a_paths_methods_come_from_the_table(path: str, allowed: list[str] | None) -> None:
    assert allowed_methods(path) == allowed


def test_a_route_is_written_for_api_gateway_and_for_powertools_from_one_path() -> None:
    route = Route("GET", "/wakeup/instances/{id}/attempts", INSTANCES_FUNCTION)

    assert route.key == "GET /wakeup/instances/{id}/attempts"
    assert route.rule == "/wakeup/instances/<id>/attempts"
