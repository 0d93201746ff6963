"""API Gateway's route throttles for an HTTP API, as a template sets them.

AWS documents them in "Throttling requests to your HTTP API" (API Gateway developer guide,
http-api-throttling): a token bucket per route (`wakeup_awsfacts.token_bucket`), a token per
request, refilled at the steady-state `ThrottlingRateLimit` (requests per second) up to
`ThrottlingBurstLimit` tokens; a request that finds the bucket empty is answered 429
`{"message":"Too Many Requests"}`. A stage's `DefaultRouteSettings` apply to each route on its own,
and its `RouteSettings` (keyed by route key, `"GET /pets"`) override them for one route. A value that
neither sets is the account's limit per Region ("Amazon API Gateway quotas": 10,000 requests per
second, a bucket of 5,000).

The local stack's gateway (`wakeup_local.gateway.throttling`) and the simulator's
(`wakeup_sim.api_gateway`, through `wakeup_sim.deployment`) both read them here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from wakeup_awsfacts.quotas import API_ACCOUNT_BURST, API_ACCOUNT_RATE
from wakeup_awsfacts.template import SERVERLESS_FUNCTION, Resolver, Template

SERVERLESS_HTTP_API = "AWS::Serverless::HttpApi"
# The account's limits per Region, which apply where the API sets none.
ACCOUNT_RATE_LIMIT = float(API_ACCOUNT_RATE)
ACCOUNT_BURST_LIMIT = API_ACCOUNT_BURST


@dataclass(frozen=True)
class RouteThrottle:
    rate_per_s: float = ACCOUNT_RATE_LIMIT
    burst: int = ACCOUNT_BURST_LIMIT


# Each HTTP API's default route throttle and its per-route settings (by route key), by the id an
# event's `ApiId` resolves to ("" for SAM's implicit API).
ApiThrottles = dict[str, tuple[RouteThrottle, dict[str, Any]]]


def api_throttles(template: Template, resolver: Resolver) -> ApiThrottles:
    """Each HTTP API's throttles, `Globals.HttpApi` merged in."""
    globals_ = dict((template.document.get("Globals") or {}).get("HttpApi") or {})
    apis: ApiThrottles = {"": _settings(resolver, globals_, {})}
    for logical_id, definition in template.of_type(SERVERLESS_HTTP_API):
        if resolver.is_created(logical_id):
            apis[str(resolver.ref(logical_id))] = _settings(resolver, globals_, definition.get("Properties") or {})
    return apis


def route_throttle(apis: ApiThrottles, api: str, route_key: str) -> RouteThrottle:
    """The throttle of one route (`PUT /wakeup/wake`, `$default`) of the API `api`."""
    default, per_route = apis.get(api) or apis.get("") or (RouteThrottle(), {})
    return _throttle(per_route.get(route_key) or {}, default)


def throttle_of_route(template: Template, resolver: Resolver, route_key: str) -> RouteThrottle:
    """The throttle of the route `route_key` on the HTTP API whose function's event declares it."""
    for _, function in template.of_type(SERVERLESS_FUNCTION):
        for event in ((function.get("Properties") or {}).get("Events") or {}).values():
            properties = resolver.resolve(event.get("Properties") or {})
            if event.get("Type") == "HttpApi" and f"{properties.get('Method')} {properties.get('Path')}" == route_key:
                return route_throttle(api_throttles(template, resolver), str(properties.get("ApiId") or ""), route_key)
    raise KeyError(f"no HttpApi event declares {route_key}")


def _settings(
    resolver: Resolver, globals_: Mapping[str, Any], own: Mapping[str, Any]
) -> tuple[RouteThrottle, dict[str, Any]]:
    default = {
        **(resolver.resolve(globals_.get("DefaultRouteSettings")) or {}),
        **(resolver.resolve(own.get("DefaultRouteSettings")) or {}),
    }
    routes = {
        **(resolver.resolve(globals_.get("RouteSettings")) or {}),
        **(resolver.resolve(own.get("RouteSettings")) or {}),
    }
    return _throttle(default, RouteThrottle()), routes


def _throttle(settings: Mapping[str, Any], fallback: RouteThrottle) -> RouteThrottle:
    rate = settings.get("ThrottlingRateLimit")
    burst = settings.get("ThrottlingBurstLimit")
    return RouteThrottle(
        rate_per_s=fallback.rate_per_s if rate is None else float(rate),
        burst=fallback.burst if burst is None else int(burst),
    )
