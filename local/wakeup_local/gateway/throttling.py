"""API Gateway's route throttling for the local HTTP API: a token bucket per route, on real time.

The rule (a bucket per route, sized by the stage's `DefaultRouteSettings` and `RouteSettings`, the
account's limits where neither sets one) is `wakeup_awsfacts.api_gateway`'s, and the bucket
`wakeup_awsfacts.token_bucket`'s, which the simulator follows on virtual time; here each route's
bucket reads the local clock and is shared by the gateway's request threads.

Left out: the account-level bucket that all of an account's APIs share, and the best-effort
overruns that AWS allows ("throttles ... should be thought of as targets").
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable

from wakeup_awsfacts.api_gateway import ApiThrottles, RouteThrottle, route_throttle
from wakeup_awsfacts.token_bucket import TokenBucket


class RouteBucket:
    """A route's token bucket on `clock`, for requests from many threads."""

    def __init__(self, throttle: RouteThrottle, clock: Callable[[], float] = time.monotonic) -> None:
        self.throttle = throttle
        self._clock = clock
        self._bucket = TokenBucket(throttle.rate_per_s, throttle.burst, clock())
        self._lock = threading.Lock()

    def take(self) -> bool:
        """Takes a token if there is one: whether the request may pass."""
        with self._lock:
            return self._bucket.take(1, self._clock())


def route_buckets(apis: ApiThrottles, routes: Iterable[tuple[str, str]]) -> dict[tuple[str, str], RouteBucket]:
    """A bucket for each (api, route key) of `routes`, sized by its API's settings."""
    return {(api, route_key): RouteBucket(route_throttle(apis, api, route_key)) for api, route_key in routes}
