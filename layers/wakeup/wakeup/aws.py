"""boto3 clients as every module makes them, and the code of an AWS error."""

import threading
from typing import Any

import boto3
from botocore.config import Config
from botocore.exceptions import ClientError

from wakeup.deadlines import AWS_REQUEST, INVOCATION

# botocore's standard retry mode backs off on throttling and transient errors; the timeouts and the
# attempts are one request's budget (`wakeup.deadlines.AWS_REQUEST`: its whole chain fits the time
# a function checks it has left). The caller delivers a batch's records in threads that share one
# client, hence the larger connection pool.
CLIENT_CONFIG = Config(
    retries={"mode": "standard", "max_attempts": AWS_REQUEST.attempts},
    connect_timeout=AWS_REQUEST.connect_s,
    read_timeout=AWS_REQUEST.read_s,
    max_pool_connections=50,
)
# botocore checks each request's parameters against the service's model before it sends it: for
# DynamoDB a walk of every typed value of the request's key, item and expression values, on the
# requests of every wake. Its reference allows turning that off "for performance reasons" (`Config`'s
# `parameter_validation`, https://docs.aws.amazon.com/botocore/latest/reference/config.html), and
# DynamoDB's are built by `wakeup.table` alone, from values already checked (the settings, the
# requests' models, items read back). DynamoDB checks every request again itself and refuses a bad
# one with a ValidationException ("Error handling with DynamoDB",
# https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/Programming.Errors.html): a
# `ClientError`, as its other refusals are.
UNCHECKED_SERVICES = frozenset({"dynamodb"})
_UNCHECKED_CONFIG = CLIENT_CONFIG.merge(Config(parameter_validation=False))


# boto3 makes clients from one default session, unsafely from several threads at once; clients made
# on first use (wakeup.triggers) may be made in a caller's delivery threads.
_making = threading.Lock()


def client(service: str) -> Any:
    """A client for `service` (the endpoint from `AWS_ENDPOINT_URL` when set, as boto3 does), whose
    every request is first checked against the invocation's time left: one whose retries could
    outlast it is not sent (`wakeup.deadlines.NoTimeForRequestError`)."""
    with _making:
        config = _UNCHECKED_CONFIG if service in UNCHECKED_SERVICES else CLIENT_CONFIG
        made = boto3.client(service, config=config)  # type: ignore[call-overload]
    # botocore emits `before-call` once a request, before its first attempt and its retries.
    made.meta.events.register("before-call", _within_time)
    return made


def _within_time(model: Any, **_: Any) -> None:
    INVOCATION.check_request(f"{model.service_model.service_name}:{model.name}")


def error_code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


def retried(exc: ClientError) -> bool:
    """Whether botocore sent the request more than once before this error: an earlier attempt,
    whose reply was lost, may have applied it (botocore counts retries in `RetryAttempts`)."""
    return int(exc.response.get("ResponseMetadata", {}).get("RetryAttempts", 0)) > 0
