"""A small client of the stack's HTTP API for tests: the account token preset, no redirect followed."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import requests

from wakeup.errors import UnavailableError

# As long as API Gateway waits for an integration: "Maximum integration timeout: 30 seconds" (HTTP API quotas,
# https://docs.aws.amazon.com/apigateway/latest/developerguide/http-api-quotas.html). A reply that
# waits on cold starts on a loaded machine's shared cores took over 10 s in CI.
TIMEOUT_S = 30.0


class Api:
    def __init__(
        self, base_url: str, token: str | None, timeout: float = TIMEOUT_S, session: requests.Session | None = None
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.token = token
        self.timeout = timeout
        self.session = session or requests.Session()

    def request(self, method: str, path: str, *, token: str | None = None, **kwargs: Any) -> requests.Response:
        """Sends `method path` with `Authorization: Bearer <token>` (this client's token unless given;
        `headers` given explicitly replace it when they name Authorization)."""
        headers = dict(kwargs.pop("headers", None) or {})
        bearer = token if token is not None else self.token
        if bearer is not None and not any(name.lower() == "authorization" for name in headers):
            headers["Authorization"] = f"Bearer {bearer}"
        return self.session.request(
            method,
            f"{self.base_url}{path}",
            headers=headers,
            timeout=kwargs.pop("timeout", self.timeout),
            allow_redirects=False,
            **kwargs,
        )

    def get(self, path: str, **kwargs: Any) -> requests.Response:
        return self.request("GET", path, **kwargs)

    def post(self, path: str, **kwargs: Any) -> requests.Response:
        return self.request("POST", path, **kwargs)

    def put(self, path: str, **kwargs: Any) -> requests.Response:
        return self.request("PUT", path, **kwargs)

    def delete(self, path: str, **kwargs: Any) -> requests.Response:
        return self.request("DELETE", path, **kwargs)

    def with_token(self, token: str | None) -> Api:
        """Another client of the same API with another token (an instance's, say), sharing this one's
        connections (closed with it)."""
        return Api(self.base_url, token, self.timeout, self.session)

    # The calls most tests make, by name.

    def register(self, url: str, instance_token: str) -> requests.Response:
        return self.post("/wakeup/instances", json={"url": url, "token": instance_token})

    def wake(self, instance_token: str, at: str) -> requests.Response:
        return self.put("/wakeup/wake", token=instance_token, json={"at": at})

    def instance(self, instance_id: str) -> requests.Response:
        return self.get(f"/wakeup/instances/{instance_id}")

    def close(self) -> None:
        self.session.close()


# How many times in all `past_busy` sends a request that the service answers 503.
BUSY_TRIES = 3


def past_busy(send: Callable[[], requests.Response]) -> requests.Response:
    """`send()`'s reply, sent again (up to `BUSY_TRIES` in all) while the service answers 503, whose
    every reply tells a client to retry the request (`wakeup.errors.UnavailableError`). On a loaded
    machine a fresh stack's first requests at once each meet a cold start, and an invocation left too
    little time for its next AWS request refuses it unsent (wakeup.deadlines): the registration's or
    the arming's, say. For the requests that set a test up, or whose replies a test reads for another
    reason than the 503 (each client's own reply, a race's outcome); the tests of a 503 itself read
    it from `Api` directly."""
    reply = send()
    for _ in range(BUSY_TRIES - 1):
        if reply.status_code != UnavailableError.status:
            break
        reply = send()
    return reply
