"""API Gateway in front of the wake function, and the hosts' clients that call `PUT /wakeup/wake`.

"Throttle requests to your HTTP APIs" (API Gateway developer guide): token buckets, one token per
request. The account's bucket holds for all of an account's APIs in a Region ("Amazon API Gateway
quotas": 10,000 requests a second, 5,000 deep); each route's, from the stage's
`DefaultRouteSettings` (`ThrottlingRateLimit`, `ThrottlingBurstLimit`), is checked below it. A request
that finds either empty is answered 429 before any function runs. A request whose function Lambda
throttles (no concurrency left, or the function's scaling rate spent) is answered 500, as is one
whose function fails ("Troubleshooting issues with HTTP API Lambda integrations").

A host's client (`wakeup_client`) says which answers are worth a retry (429, 500, 503); the host
retries such an answer after a random wait up to twice the last, from a second ("full jitter", as
botocore's standard retry mode), until its registration is accepted.
"""

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from wakeup.api.routes import REGISTER_WAKE
from wakeup_awsfacts import quotas
from wakeup_awsfacts.token_bucket import TokenBucket
from wakeup_sim.engine import Engine
from wakeup_sim.lambdas import Throttled

ROUTE = REGISTER_WAKE.key
# Statuses API Gateway answers itself, or for the function.
ACCEPTED, THROTTLED, FAILED = 204, 429, 500
# The host's retries: the first after up to a second, each after up to twice the last, at most 20 s.
FIRST_RETRY_S = 1.0
MAX_RETRY_S = 20.0


@dataclass
class Registration:
    """One host's `PUT /wakeup/wake`, with its client's retries."""

    started: float
    statuses: list[int] = field(default_factory=list)
    accepted_at: float | None = None


class ApiGateway:
    def __init__(
        self,
        engine: Engine,
        route_rate: float,
        route_burst: float,
        account_rate: float = quotas.API_ACCOUNT_RATE,
        account_burst: float = quotas.API_ACCOUNT_BURST,
    ) -> None:
        self.engine = engine
        self.account = TokenBucket(account_rate, account_burst, engine.now)
        self._route = (route_rate, route_burst)
        self.routes: dict[str, TokenBucket] = {}
        self.statuses: Counter[int] = Counter()

    def request(self, route: str, invoke: Callable[[], Any]) -> int:
        """The status of one request to `route`, whose integration `invoke` runs (Lambda's synchronous
        invocation: it raises `Throttled`, or the function's error)."""
        now = self.engine.now
        bucket = self.routes.get(route)
        if bucket is None:
            bucket = self.routes[route] = TokenBucket(*self._route, now)
        # A token from each bucket, or none taken: the account's and the route's limits both hold.
        if bucket.wait_for(1, now) > 0 or self.account.wait_for(1, now) > 0:
            status = THROTTLED
        else:
            bucket.take(1, now)
            self.account.take(1, now)
            try:
                invoke()
                status = ACCEPTED
            except Throttled:
                status = FAILED
            except Exception:
                status = FAILED  # the function's error (a throttled write after botocore's retries)
        self.statuses[status] += 1
        return status


def register_with_retries(
    engine: Engine, send: Callable[[], int], random: Callable[[], float], registration: Registration
) -> None:
    """A host's client: sends until accepted, after a jittered, growing wait each time it is not."""
    wait = FIRST_RETRY_S
    while True:
        status = send()
        registration.statuses.append(status)
        if status == ACCEPTED:
            registration.accepted_at = engine.now
            return
        engine.sleep(random() * wait)
        wait = min(wait * 2, MAX_RETRY_S)
