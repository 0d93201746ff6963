"""One request to the wakeup service, shared by both clients.

Every way a request can go wrong becomes a ``WakeupError``: no answer (retryable), a redirect
(never followed: it would carry the token elsewhere), the service's own refusal (its
``{"error": ...}`` body and status), or a reply that is not the service's at all, which is named
as such rather than mistaken for, say, "no such instance".
"""

from __future__ import annotations

import os
from collections.abc import Collection, Mapping
from importlib.metadata import PackageNotFoundError, version
from typing import TypeVar
from urllib.parse import urlsplit

import requests
from pydantic import BaseModel, ValidationError

from .errors import ErrorCode, WakeupError, code_for_status, is_retryable_status, refused
from .models import GatewayProblem, Problem

URL_SETTING = "WAKEUP_URL"
# The statuses API Gateway answers itself, in its own ``{"message": ...}`` shape, before the
# service sees the request: 429 when a route's throttle is exceeded, 500 when the function fails
# or times out, 502 for a reply it cannot read, 503 and 504 when the integration times out
# (https://repost.aws/knowledge-center/api-gateway-5xx-error). Each can pass: a retry can help.
GATEWAY_STATUSES = frozenset({429, 500, 502, 503, 504})
_M = TypeVar("_M", bound=BaseModel)

try:
    _VERSION = version("wakeup-client")
except PackageNotFoundError:  # run from a source tree that was never installed
    _VERSION = "0"
USER_AGENT = f"wakeup-client/{_VERSION}"


def required_setting(value: str | None, name: str, what: str) -> str:
    """``value``, else the environment variable ``name``; refused, naming it, when both are empty."""
    found = value if value is not None else os.environ.get(name)
    if not found:
        raise refused(f"{name} is not set: give {what}, or set {name}", ErrorCode.MISSING_SETTING)
    return found


def token_setting(value: str | None, name: str, prefix: str, kind: str) -> str:
    """A token from ``value`` or ``name``, refused before any request when it is not of the kind asked for."""
    token = required_setting(value, name, f"the {kind} token")
    if not token.startswith(prefix):
        raise refused(f"{name} is not an {kind} token: those start {prefix}", ErrorCode.INVALID_SETTING)
    return token


def service_url(value: str | None) -> str:
    """The service's base URL (from ``value`` or ``WAKEUP_URL``), without a trailing slash."""
    url = required_setting(value, URL_SETTING, "the wakeup service's URL")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc or parts.query or parts.fragment:
        raise refused(
            f"{URL_SETTING} must be the service's http(s) URL, such as http://127.0.0.1:3000, not {url!r}",
            ErrorCode.INVALID_SETTING,
        )
    return url.rstrip("/")


def _no_answer_reason(exc: requests.RequestException) -> str:
    """A short reason for a failed connection (requests' own message is a long urllib3 repr)."""
    text = str(exc)
    if "refused" in text.lower():
        return "connection refused"
    if "resolve" in text.lower() or "name or service not known" in text.lower():
        return "the host name did not resolve"
    return "the connection failed"


class Connection:
    """The service at ``base_url``, reached through ``session`` with one timeout per request."""

    def __init__(self, base_url: str, *, timeout: float, session: requests.Session | None) -> None:
        self.base_url = base_url
        self.timeout = timeout
        self.session = session if session is not None else requests.Session()
        self._owns_session = session is None

    def close(self) -> None:
        """Close the session if this connection made it (a session passed in stays the caller's)."""
        if self._owns_session:
            self.session.close()

    def send(
        self,
        method: str,
        path: str,
        token: str,
        *,
        token_name: str,
        expect: Collection[int],
        body: Mapping[str, object] | None = None,
        params: Mapping[str, str | int] | None = None,
        absent_ok: bool = False,
    ) -> requests.Response | None:
        """Send one request and return its reply when its status is in ``expect``.

        With ``absent_ok``, the service's own 404 (with its error body) is None: the thing asked
        for does not exist. Every other outcome raises a ``WakeupError``.
        """
        where = f"{method} {path}"
        try:
            reply = self.session.request(
                method,
                self.base_url + path,
                params=params,
                json=body,
                headers={
                    "Authorization": f"Bearer {token}",
                    "Accept": "application/json",
                    "User-Agent": USER_AGENT,
                },
                timeout=self.timeout,
                # A redirect is no answer of the service's, and following it would send the token along.
                allow_redirects=False,
            )
        except requests.Timeout as exc:
            raise WakeupError(
                f"{where}: no reply from {self.base_url} within {self.timeout:g} s; "
                "it may or may not have taken effect (retrying is safe)",
                code=ErrorCode.TIMEOUT,
                retryable=True,
            ) from exc
        # A connection that failed, or broke off mid-reply: the request may not have reached the service.
        except (requests.ConnectionError, requests.exceptions.ChunkedEncodingError) as exc:
            raise WakeupError(
                f"{where}: could not reach {self.base_url} ({_no_answer_reason(exc)}); "
                f"is the service up and {URL_SETTING} right?",
                code=ErrorCode.CONNECTION_FAILED,
                retryable=True,
            ) from exc

        status = reply.status_code
        if status in expect:
            return reply
        if 300 <= status <= 399:
            location = reply.headers.get("Location", "elsewhere")
            raise WakeupError(
                f"{where}: {self.base_url} answered HTTP {status}, a redirect to {location}, which is not "
                f"followed (it would carry the token along); set {URL_SETTING} to the service's own URL",
                code=ErrorCode.REDIRECT,
                retryable=False,
                status=status,
            )
        problem = None if 200 <= status <= 299 else _problem_of(reply)
        if problem is None:
            gateway_message = _gateway_message(reply) if status in GATEWAY_STATUSES else None
            if gateway_message is not None:
                raise WakeupError(
                    f"{where}: API Gateway answered HTTP {status} ({gateway_message}) before the service could; "
                    "retrying later can help",
                    code=code_for_status(status),
                    retryable=True,
                    status=status,
                )
            raise self._not_the_service(where, status)
        if status == 404 and absent_ok:
            return None
        message = f"{where}: {problem.error} (HTTP {status})"
        if status == 401:
            message += f"; check {token_name}"
        raise WakeupError(message, code=code_for_status(status), retryable=is_retryable_status(status), status=status)

    def parse(self, reply: requests.Response, model: type[_M]) -> _M:
        """``reply``'s body as ``model``; a body of another shape means the server is not the service."""
        try:
            return model.model_validate_json(reply.content)
        except ValidationError as exc:
            where = f"{reply.request.method} {urlsplit(reply.url).path}"
            raise self._not_the_service(where, reply.status_code) from exc

    def _not_the_service(self, where: str, status: int) -> WakeupError:
        # A gateway's 502 page or a proxy's 429 is still worth retrying; any other stray reply means
        # the URL points at something that is not a wakeup service, and retrying will not change that.
        return WakeupError(
            f"{where}: HTTP {status} from {self.base_url}, and the reply is not a wakeup service's; "
            f"is {URL_SETTING} right?",
            code=ErrorCode.NOT_WAKEUP if not is_retryable_status(status) else code_for_status(status),
            retryable=is_retryable_status(status),
            status=status,
        )


def _gateway_message(reply: requests.Response) -> str | None:
    """The text of API Gateway's own ``{"message": ...}`` reply, or None when the body is anything else."""
    try:
        return GatewayProblem.model_validate_json(reply.content).message
    except ValidationError:
        return None


def _problem_of(reply: requests.Response) -> Problem | None:
    """The service's ``{"error": ...}`` body, or None when the body is anything else."""
    try:
        return Problem.model_validate_json(reply.content)
    except ValidationError:
        return None
