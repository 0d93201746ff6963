"""Lambda's asynchronous invocation: when a failed or throttled event runs again, and when it is
given up, on whichever clock is given.

"How Lambda handles errors and retries with asynchronous invocation" (invocation-async-error-handling):
"If the function returns an error, by default Lambda attempts to run it two more times, with a
one-minute wait between the first two attempts, and two minutes between the second and third
attempts." A throttled event (no concurrency for it) is retried from 1 s, doubling up to 5 minutes,
until it is too old. "Configuring error handling settings for Lambda asynchronous invocations"
(invocation-async-configuring): `MaximumRetryAttempts` 0 to 2, `MaximumEventAgeInSeconds` 60 to
21,600 (the default, 6 hours); an event older than that is discarded.

The local stack's asynchronous invoker (`wakeup_local.lambda_.async_invoke`, real time) and the
simulator's Lambda (`wakeup_sim.lambdas`, virtual time) retry by this rule: each call is given the
time it happens at.
"""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_RETRY_ATTEMPTS = 2
RETRY_ATTEMPTS_RANGE = (0, 2)
DEFAULT_MAX_EVENT_AGE_S = 21_600
MAX_EVENT_AGE_RANGE_S = (60, 21_600)
# The wait after the n-th failed run (from the first): one minute, then two.
ERROR_RETRY_WAITS_S = (60.0, 120.0)
THROTTLE_FIRST_RETRY_S = 1.0
THROTTLE_MAX_RETRY_S = 300.0


@dataclass(frozen=True)
class AsyncRetries:
    """A function's error handling for asynchronous events (its `EventInvokeConfig`)."""

    maximum_retry_attempts: int = DEFAULT_RETRY_ATTEMPTS
    maximum_event_age_s: float = DEFAULT_MAX_EVENT_AGE_S

    def after_error(self, failed_runs: int, now: float) -> float | None:
        """When an event runs again whose `failed_runs`-th run (from 1) failed at `now`; None when its
        retries are spent (Lambda gives it up: `RetriesExhausted`)."""
        retries_done = failed_runs - 1
        if retries_done >= self.maximum_retry_attempts:
            return None
        return now + ERROR_RETRY_WAITS_S[min(retries_done, len(ERROR_RETRY_WAITS_S) - 1)]

    def too_old(self, received: float, now: float) -> bool:
        """Whether an event received at `received` is past its age at `now` (`EventAgeExceeded`)."""
        return now - received > self.maximum_event_age_s


def after_throttle(throttles: int, now: float) -> float:
    """When an event runs again that was throttled at `now` for the `throttles`-th time (from 1) since
    it was received or last failed: 1 s after the first, each wait twice the last, at most 5 minutes."""
    return now + min(THROTTLE_FIRST_RETRY_S * 2.0 ** (throttles - 1), THROTTLE_MAX_RETRY_S)
