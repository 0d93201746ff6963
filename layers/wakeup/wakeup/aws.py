"""boto3 clients as every module makes them, and AWS errors turned into the service's own."""

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from wakeup.errors import UnavailableError

# botocore's standard retry mode backs off on throttling and transient errors; the timeouts keep an
# API request well inside API Gateway's 30 s.
CLIENT_CONFIG = Config(retries={"mode": "standard", "max_attempts": 3}, connect_timeout=2, read_timeout=5)


def client(service: str) -> Any:
    """A client for `service` (the endpoint from `AWS_ENDPOINT_URL` when set, as boto3 does)."""
    return boto3.client(service, config=CLIENT_CONFIG)  # type: ignore[call-overload]


def error_code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


@contextmanager
def unavailable_on_failure(what: str) -> Iterator[None]:
    """Turns an AWS failure that retries did not mend into `UnavailableError` (503, retryable)."""
    try:
        yield
    except (ClientError, BotoCoreError) as exc:
        raise UnavailableError(f"{what} failed for a moment; retry the request") from exc
