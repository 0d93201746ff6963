"""API Gateway's route throttling for the local HTTP API, from the template's settings.

AWS documents it in "Throttling requests to your HTTP API" (API Gateway developer guide,
http-api-throttling): a token bucket per route, a token per request, refilled at the steady-state
`ThrottlingRateLimit` (requests per second) up to `ThrottlingBurstLimit` tokens; a request that
finds the bucket empty is answered 429 `{"message":"Too Many Requests"}`. A stage's
`DefaultRouteSettings` apply to each route on its own, and its `RouteSettings` (keyed by route key,
`"GET /pets"`) override them for one route. A value that neither sets is the account's limit per
Region ("Amazon API Gateway quotas": 10,000 requests per second, a bucket of 5,000).

Left out: the account-level bucket that all of an account's APIs share, and the best-effort
overruns that AWS allows ("throttles ... should be thought of as targets").
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from wakeup_awsfacts.quotas import API_ACCOUNT_BURST, API_ACCOUNT_RATE
from wakeup_awsfacts.template import Resolver, Template

SERVERLESS_HTTP_API = "AWS::Serverless::HttpApi"
# The API SAM makes for HttpApi events that name no ApiId.
IMPLICIT_HTTP_API = "ServerlessHttpApi"
# The account's limits per Region, which apply where the API sets none.
ACCOUNT_RATE_LIMIT = float(API_ACCOUNT_RATE)
ACCOUNT_BURST_LIMIT = API_ACCOUNT_BURST


@dataclass
class TokenBucket:
    """`burst` tokens at most, refilled at `rate_per_s`; it starts full."""

    rate_per_s: float
    burst: int
    clock: Callable[[], float] = time.monotonic
    _tokens: float = field(init=False)
    _updated: float = field(init=False)
    _lock: threading.Lock = field(init=False, default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self._tokens = float(self.burst)
        self._updated = self.clock()

    def take(self) -> bool:
        """Takes a token if there is one: whether the request may pass."""
        with self._lock:
            now = self.clock()
            self._tokens = min(float(self.burst), self._tokens + (now - self._updated) * self.rate_per_s)
            self._updated = now
            if self._tokens < 1.0:
                return False
            self._tokens -= 1.0
            return True


@dataclass(frozen=True)
class RouteThrottle:
    rate_per_s: float = ACCOUNT_RATE_LIMIT
    burst: int = ACCOUNT_BURST_LIMIT


def api_throttles(template: Template, resolver: Resolver) -> dict[str, tuple[RouteThrottle, dict[str, Any]]]:
    """For each HTTP API, by the id an event's `ApiId` resolves to ("" for SAM's implicit API): its
    default route throttle, and its per-route settings (by route key), `Globals.HttpApi` merged in."""
    globals_ = dict((template.document.get("Globals") or {}).get("HttpApi") or {})
    apis: dict[str, tuple[RouteThrottle, dict[str, Any]]] = {"": _settings(resolver, globals_, {})}
    for logical_id, definition in template.of_type(SERVERLESS_HTTP_API):
        if resolver.is_created(logical_id):
            apis[str(resolver.ref(logical_id))] = _settings(resolver, globals_, definition.get("Properties") or {})
    return apis


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


def route_buckets(
    apis: Mapping[str, tuple[RouteThrottle, dict[str, Any]]], routes: Iterable[tuple[str, str]]
) -> dict[tuple[str, str], TokenBucket]:
    """A bucket for each (api, route key) of `routes`, sized by its API's settings."""
    buckets = {}
    for api, route_key in routes:
        default, per_route = apis.get(api) or apis.get("") or (RouteThrottle(), {})
        throttle = _throttle(per_route.get(route_key) or {}, default)
        buckets[(api, route_key)] = TokenBucket(throttle.rate_per_s, throttle.burst)
    return buckets
