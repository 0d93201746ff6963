"""The HTTP API's routes, each written once: its method, its path and the function that serves it.

The handlers register their routes from this table (`Route.rule`), and the `$default` route tells
an unknown path (404) from a known one asked with another method (405) by it (`allowed_methods`).
template.yaml must name the routes literally, as `HttpApi` events, for SAM to make them:
tests/template/test_template_resources.py holds those events to this table, and
tests/functional/test_routes.py each handler's registered routes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# The paths, as API Gateway writes them: `{id}` is a path parameter, one segment.
INSTANCES = "/wakeup/instances"
INSTANCE = "/wakeup/instances/{id}"
ATTEMPTS = "/wakeup/instances/{id}/attempts"
WAKE = "/wakeup/wake"

# The functions behind them, by their logical ids in template.yaml. The instances function is the
# `$default` route's as well (any path or method no route matches).
INSTANCES_FUNCTION = "InstancesFunction"
WAKE_FUNCTION = "WakeFunction"
DEFAULT_ROUTE_FUNCTION = INSTANCES_FUNCTION

_PARAMETER = re.compile(r"\{(\w+)\}")


@dataclass(frozen=True)
class Route:
    method: str
    path: str
    function: str

    @property
    def key(self) -> str:
        """API Gateway's route key: `GET /wakeup/instances/{id}`."""
        return f"{self.method} {self.path}"

    @property
    def rule(self) -> str:
        """The path as Powertools' resolver writes it (`<id>`): the handler's function takes `id`."""
        return _PARAMETER.sub(r"<\1>", self.path)


LIST_INSTANCES = Route("GET", INSTANCES, INSTANCES_FUNCTION)
REGISTER_INSTANCE = Route("POST", INSTANCES, INSTANCES_FUNCTION)
GET_INSTANCE = Route("GET", INSTANCE, INSTANCES_FUNCTION)
DELETE_INSTANCE = Route("DELETE", INSTANCE, INSTANCES_FUNCTION)
LIST_ATTEMPTS = Route("GET", ATTEMPTS, INSTANCES_FUNCTION)
READ_WAKE = Route("GET", WAKE, WAKE_FUNCTION)
REGISTER_WAKE = Route("PUT", WAKE, WAKE_FUNCTION)

# In the order a 405's `Allow` header lists a path's methods.
ROUTES = (
    LIST_INSTANCES,
    REGISTER_INSTANCE,
    GET_INSTANCE,
    DELETE_INSTANCE,
    LIST_ATTEMPTS,
    READ_WAKE,
    REGISTER_WAKE,
)


def _pattern(path: str) -> re.Pattern[str]:
    # A path parameter matches any one segment, whatever it holds (DOTALL: a newline too): an id the
    # router cannot match is an unknown instance (404), not an unknown path. (`re.split` with a
    # group gives the text between the parameters at the even places.)
    return re.compile("[^/]+".join(re.escape(text) for text in _PARAMETER.split(path)[::2]), re.DOTALL)


_METHODS_BY_PATH: dict[str, list[str]] = {}
for _route in ROUTES:
    _METHODS_BY_PATH.setdefault(_route.path, []).append(_route.method)
_PATTERNS = [(_pattern(path), methods) for path, methods in _METHODS_BY_PATH.items()]


def allowed_methods(path: str) -> list[str] | None:
    """The methods the API serves at a request's `path`; None for a path it does not serve."""
    for pattern, methods in _PATTERNS:
        if pattern.fullmatch(path):
            return methods
    return None
