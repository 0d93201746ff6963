"""The client's one error type, and the codes that say what went wrong.

Every failure of the client is a ``WakeupError``: the service refused (its status and sentence),
the request got no answer (timeout, connection failure), the server at the URL is not a wakeup
service, or the client itself refused before sending anything (a missing setting, a changed
plan). ``retryable`` says whether the same call can succeed later unchanged.
"""

from __future__ import annotations

from enum import StrEnum

# The statuses for which a retry can help: the request timed out, was throttled, or the server failed.
_RETRYABLE_STATUSES = frozenset({408, 429})


class ErrorCode(StrEnum):
    """What kind of failure a ``WakeupError`` is (a ``str``, so ``error.code == "timeout"`` works)."""

    MISSING_SETTING = "missing_setting"
    """A setting (the service's URL or a token) was neither given nor in the environment."""
    INVALID_SETTING = "invalid_setting"
    """A setting is of the wrong form: a URL that is not http(s), a token of the wrong kind."""
    TIMEOUT = "timeout"
    """The server did not answer in time; the request may or may not have taken effect."""
    CONNECTION_FAILED = "connection_failed"
    """No connection (refused, reset, name not resolved); the request may not have been sent."""
    REDIRECT = "redirect"
    """The server answered with a redirect, which is never followed (it would carry the token)."""
    NOT_WAKEUP = "not_wakeup"
    """The reply is not a wakeup service's: an HTML page, a bare 404, JSON of the wrong shape."""
    BAD_REQUEST = "bad_request"
    """400 (or 413): the service refused the request's content."""
    UNAUTHORIZED = "unauthorized"
    """401: the token is missing, unknown, revoked or of the wrong kind."""
    FORBIDDEN = "forbidden"
    """403: the instance belongs to another account."""
    NOT_FOUND = "not_found"
    """404 from the service where an absent thing is an error."""
    CONFLICT = "conflict"
    """409: another account registered this instance token; or, for a wake, a newer wake of the
    instance, registered while this one was written, stands instead."""
    THROTTLED = "throttled"
    """429: too many requests; retry later."""
    SERVER_ERROR = "server_error"
    """5xx: the service (or a gateway before it) failed."""
    HTTP_ERROR = "http_error"
    """Any other status the service answered with."""
    PLAN_CHANGED = "plan_changed"
    """An update was given a plan that no longer holds: plan again."""
    NO_INSTANCE_TOKEN = "no_instance_token"
    """A wake was asked for, but no instance token is stored: create the instance first."""


_CODES_BY_STATUS = {
    400: ErrorCode.BAD_REQUEST,
    401: ErrorCode.UNAUTHORIZED,
    403: ErrorCode.FORBIDDEN,
    404: ErrorCode.NOT_FOUND,
    408: ErrorCode.TIMEOUT,
    409: ErrorCode.CONFLICT,
    413: ErrorCode.BAD_REQUEST,
    429: ErrorCode.THROTTLED,
}

# Mistakes in how the client was set up or used: a retry cannot help, the caller must change something.
USAGE_CODES = frozenset(
    {
        ErrorCode.MISSING_SETTING,
        ErrorCode.INVALID_SETTING,
        ErrorCode.PLAN_CHANGED,
        ErrorCode.NO_INSTANCE_TOKEN,
    }
)


def is_retryable_status(status: int) -> bool:
    """True for the statuses after which the same request can succeed: 408, 429 and 5xx."""
    return status in _RETRYABLE_STATUSES or 500 <= status <= 599


def code_for_status(status: int) -> ErrorCode:
    """The code of a failure the service answered with ``status``."""
    if 500 <= status <= 599:
        return ErrorCode.SERVER_ERROR
    return _CODES_BY_STATUS.get(status, ErrorCode.HTTP_ERROR)


class WakeupError(Exception):
    """Raised for every failure of a call to the wakeup service, or the client's own refusal."""

    def __init__(self, message: str, *, code: ErrorCode, retryable: bool, status: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.retryable = retryable
        # The HTTP status when there was a reply; None when there was none (timeout, refusal).
        self.status = status

    def __repr__(self) -> str:
        return (
            f"WakeupError({self.message!r}, code={self.code.value!r}, retryable={self.retryable}, status={self.status})"
        )


def refused(message: str, code: ErrorCode) -> WakeupError:
    """The client's own refusal, before or instead of a request: never worth retrying as it is."""
    return WakeupError(message, code=code, retryable=False)
