"""Time budgets: how long one AWS request may take whole, retries included, and what a claim's
lease must still hold when its call starts (DESIGN section 3: the lease outlives everything
between the claim and the call's end, by rule, not by the function's timeout).

The caller checks these against the time its invocation has left and the lease it holds
(`wakeup.logic.delivery`); `wakeup.settings` refuses a lease that could never cover them.
"""

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from botocore.exceptions import BotoCoreError

from wakeup.arrival import EARLY_REARM_S

# botocore's standard retry mode waits `rand * min(scale * 2^(n-1), 20)` s after the n-th failed
# attempt, the scale 1 s for a throttle (its largest) ("Retries", Boto3 guide:
# https://boto3.amazonaws.com/v1/documentation/api/latest/guide/retries.html; the formula is
# botocore.retries.standard.ExponentialBackoff's). A reply carrying `x-amz-retry-after` may stretch
# one wait by up to 5 s more; no service the functions call documents sending it, and a chain
# stretched so is caught by the caller's next check (the lease's check before a call whatever).
_THROTTLE_SCALE_S = 1.0
_MAX_BACKOFF_S = 20.0


@dataclass(frozen=True)
class RequestBudget:
    """One AWS request's limits, as botocore's `Config` takes them: per attempt a connect and a
    read timeout ("Config Reference", botocore:
    https://botocore.amazonaws.com/v1/documentation/api/latest/reference/config.html), and the
    attempts in all (the first included)."""

    connect_s: float
    read_s: float
    attempts: int

    @property
    def attempt_s(self) -> float:
        """The longest one attempt takes (each attempt has its own timeouts)."""
        return self.connect_s + self.read_s

    @property
    def worst_s(self) -> float:
        """The longest the whole retry chain takes: every attempt timing out, each wait its longest."""
        waits = sum(min(_THROTTLE_SCALE_S * 2.0**n, _MAX_BACKOFF_S) for n in range(self.attempts - 1))
        return self.attempts * self.attempt_s + waits


# Every function's requests. DynamoDB answers GetItem and PutItem in single-digit milliseconds on
# average, and AWS advises cutting a slow request short to send it again ("How do I troubleshoot
# high latency on an Amazon DynamoDB table?", AWS Knowledge Center:
# https://repost.aws/knowledge-center/dynamodb-high-latency). Two attempts keep the whole chain
# inside the caller's room for it (the claim's write, the call and the outcome's write within its
# 30 s), where three at 2 s + 5 s took longer than a function's timeout. The caller goes on trying
# an outcome's write itself until its lease ends.
AWS_REQUEST = RequestBudget(connect_s=1.0, read_s=2.0, attempts=2)

# Two execution environments' clocks may differ: a lease written by one's clock ends on another's.
# Lambda's environments keep their clocks by NTP ("Defined runtime environment variables", `TZ`:
# https://docs.aws.amazon.com/lambda/latest/dg/configuration-envvars.html); no page states their
# error, so this margin is an assumption (docs/architecture.md, "Delivering within the lease").
CLOCK_MARGIN_S = 1.0
# What the claim's write and the signing keys (cached in a warm caller) take before a call.
CLAIM_TO_CALL_S = 1.0


def lease_needed_s(call_timeout_s: float) -> float:
    """The lease a call needs left when it starts: the call, the first attempt of its outcome's
    write (its retries go on until the lease ends), and the clocks' margin."""
    return call_timeout_s + AWS_REQUEST.attempt_s + CLOCK_MARGIN_S


def shortest_lease_s(call_timeout_s: float) -> float:
    """The shortest lease the settings accept: what a call needs left, and the moment between the
    claim and the call."""
    return lease_needed_s(call_timeout_s) + CLAIM_TO_CALL_S


# The caller's own timeout: template.yaml's CallerFunction `Timeout` (tests/template holds the two
# equal). A claim is taken up to `EARLY_REARM_S` before its wake's time, the moment left waited out
# after it (`wakeup.logic.delivery`).
CALLER_TIMEOUT_S = 30.0


def time_to_claim_s(call_timeout_s: float) -> float:
    """What an invocation needs left to claim a call: the claim's write, the moment before the
    wake's time, the call and its outcome's write, each request at its longest."""
    return AWS_REQUEST.worst_s + EARLY_REARM_S + call_timeout_s + AWS_REQUEST.worst_s


def longest_call_s() -> float:
    """The longest call a caller invocation can hold with its claim and its outcome's write: a
    longer one would never be claimed, each trigger sent again at once, forever."""
    return CALLER_TIMEOUT_S - time_to_claim_s(0.0)


# -- the invocation's time left ------------------------------------------------------------------


class NoTimeForRequestError(BotoCoreError):
    """A request not sent: its whole retry chain (`AWS_REQUEST.worst_s`) could outlast the time the
    invocation has left, and Lambda's timeout would end the invocation in the middle of it (an SQS
    batch's every record with it). A `BotoCoreError`, a request that failed before it applied, so
    that every path that handles one handles it: the work is left to a retry (the API's 503, a
    message that comes back) or to the sweeper, never half done by a function that Lambda ended."""

    fmt = "{operation} not sent: {left_s:.1f} s left in the invocation, its retries may take {needed_s:g} s"


def check_request(time_left_s: float, operation: str) -> None:
    """Raises `NoTimeForRequestError` unless `time_left_s` holds `operation`'s whole retry chain."""
    if time_left_s < AWS_REQUEST.worst_s:
        raise NoTimeForRequestError(operation=operation, left_s=time_left_s, needed_s=AWS_REQUEST.worst_s)


class Context(Protocol):
    """What a handler's `context` offers for its time: "Using the Lambda context object to retrieve
    Python function information" (https://docs.aws.amazon.com/lambda/latest/dg/python-context.html):
    `get_remaining_time_in_millis` returns the milliseconds left before the execution times out."""

    def get_remaining_time_in_millis(self) -> int: ...


class Invocation:
    """The running invocation's time left, as its context says. An execution environment runs one
    invocation at a time ("Understanding Lambda function scaling", Lambda developer guide), so there
    is one per process, which every client's requests check (`wakeup.aws.client`); outside an
    invocation (a test, a tool) there is no limit."""

    def __init__(self) -> None:
        self._context: Context | None = None

    def time_left_s(self) -> float:
        context = self._context
        return math.inf if context is None else context.get_remaining_time_in_millis() / 1000

    def check_request(self, operation: str) -> None:
        check_request(self.time_left_s(), operation)

    def begin(self, context: Context) -> None:
        self._context = context

    def end(self) -> None:
        self._context = None


INVOCATION = Invocation()

Handler = TypeVar("Handler", bound=Callable[..., Any])


def timed(handler: Handler) -> Handler:
    """A Lambda handler whose requests are each checked against its invocation's time left."""

    @functools.wraps(handler)
    def run(event: Any, context: Any) -> Any:
        INVOCATION.begin(context)
        try:
            return handler(event, context)
        finally:
            INVOCATION.end()

    return run  # type: ignore[return-value]
