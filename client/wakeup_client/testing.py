"""``FakeWakeupService``: the wakeup service in memory, for tests of code that uses the clients.

It answers the HTTP contract (DESIGN section 2) with these of the service's rules: token kinds and
hashes, 201 / 200 / 409 on register, 403 for another account's instance, 404 for an unknown or
malformed id, a move forgetting the wake, a new wake replacing the old, pages with a cursor, the
times, URLs and bodies the service refuses. tests/client/test_client_contract.py runs the same
assertions on it and on the local stack, so these cannot drift.

What it leaves out or holds apart from the service:

- no account limit: an account registers any number of instances (the service answers 403 past
  its limit, ``WAKEUP_MAX_INSTANCES_PER_ACCOUNT``);
- no wake rate: an instance registers any number of wakes (the service answers 429 past
  ``WAKEUP_MAX_WAKES_PER_WINDOW`` in a window);
- ``GET /wakeup/instances/{id}/attempts`` and ``revoke_account`` follow the service's documented
  behaviour, but are tested on the fake alone (tests/client/test_client_fake.py), not by the
  contract suite against the stack;
- nothing calls hosts, and nothing happens on its own as time passes (below).

It is mounted into a ``requests.Session`` as a transport adapter, so the real clients talk to it
unchanged::

    fake = FakeWakeupService()
    account = WakeupClient(fake.url, fake.account_token, session=fake.session())

Nothing calls hosts: a test asks ``fake.due(when)`` which wakes the service would call by then,
and reports each host's answer with ``fake.record_answer(wake, status)``, which updates
``calledAt``, ``attempts`` and ``lastError`` (and the retry backoff) as the service would.
Each due wake carries the ``headers`` the service would sign its call with, so a host's
``/wake`` handler can be tested with ``verify_wake`` and ``fake.signing_secret()``.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import re
import secrets
import sys
import threading
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from http import HTTPStatus
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import requests
from requests.adapters import HTTPAdapter
from standardwebhooks.webhooks import Webhook
from urllib3 import HTTPResponse

from .formats import format_time, normalise_url, parse_time

MAX_BODY_BYTES = 16 * 1024
MAX_PAGE_SIZE = 100
MAX_BACKOFF_S = 900


def backoff_s(failures: int) -> int:
    """The wait after the ``failures``-th failed call in a row, as the service's: 1, 2, 4 ... s,
    at most 900 (the client cannot import the service; tests/unit/test_retry.py holds the two equal)."""
    return min(1 << min(failures - 1, 10), MAX_BACKOFF_S)


_TOKENS = {"account": re.compile(r"swa_[A-Za-z0-9_-]{32,128}"), "instance": re.compile(r"swi_[A-Za-z0-9_-]{32,128}")}
_BEARER = re.compile(r"Bearer +(\S+)", re.IGNORECASE)
_UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
_INSTANCE_PATH = re.compile(r"/wakeup/instances/([^/]+)")
_ATTEMPTS_PATH = re.compile(r"/wakeup/instances/([^/]+)/attempts")
HISTORY_SIZE = 100
HISTORY_DAYS = 7
_LIMIT = re.compile(r"[0-9]{1,3}")  # ASCII digits, and few: `²` is a digit to str.isdigit

Json = dict[str, Any]


@dataclass(frozen=True)
class DueWake:
    """A call the service would make now: to ``url``/wake, for the registration of ``at``."""

    instance_id: str
    url: str
    at: datetime
    attempt: int
    """1 for the first call, n + 1 after n failures in a row."""
    headers: dict[str, str] = field(default_factory=dict, compare=False)
    """The Standard Webhooks headers the service signs this call with (``verify_wake`` checks them);
    left out of comparisons, since they hold the moment of signing."""


class _Refusal(Exception):
    """Raised inside the fake to answer with an error status and the service's error body."""

    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.headers = headers or {}


def _new_key() -> str:
    return "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode()


@dataclass
class _Account:
    id: str
    revoked: bool = False
    # The signing secret, and during a rotation the one it replaced with the end of its overlap.
    secret: str = field(default_factory=_new_key)
    previous_secret: str | None = None
    previous_until: datetime | None = None

    def signing_secrets(self, moment: datetime) -> list[str]:
        if self.previous_secret is not None and self.previous_until is not None and moment < self.previous_until:
            return [self.secret, self.previous_secret]
        return [self.secret]


@dataclass
class _Instance:
    id: str
    account_id: str
    url: str
    token_hash: str
    seq: int
    at: datetime | None = None
    # A new one for each registered wake, as the service's webhook-ids name it.
    reg: str | None = None
    # Its calls, oldest first, as GET .../attempts shows them (with the moment each started).
    history: list[tuple[datetime, Json]] = field(default_factory=list)
    called_at: datetime | None = None
    attempts: int = 0
    last_error: str | None = None
    # When the next call to the host is due; None when nothing is pending.
    next_call: datetime | None = None

    def forget_wake(self) -> None:
        self.at = self.called_at = self.last_error = self.next_call = None
        self.attempts = 0

    def shown(self) -> Json:
        return {"id": self.id, "url": self.url, **self.own_wake()}

    def own_wake(self) -> Json:
        """What ``GET /wakeup/wake`` shows the host: its wake, nothing of its account."""
        return {
            "at": None if self.at is None else format_time(self.at),
            "calledAt": None if self.called_at is None else format_time(self.called_at),
            "attempts": self.attempts,
            "lastError": self.last_error,
        }


def _hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def _utc_now() -> datetime:
    return datetime.now(UTC)


class FakeWakeupService:
    """An in-memory wakeup service. ``account_token`` is a first account's, minted on creation."""

    def __init__(self, *, url: str = "http://wakeup.invalid", clock: Callable[[], datetime] = _utc_now):
        self.url = url.rstrip("/")
        self._clock = clock
        self._lock = threading.Lock()
        self._accounts: dict[str, _Account] = {}  # by token hash
        self._instances: dict[str, _Instance] = {}  # by id
        self._instance_tokens: dict[str, str] = {}  # token hash -> instance id
        self._seq = 0
        self.account_token = self.mint_account()

    # --- for tests ------------------------------------------------------------------------------

    def session(self) -> requests.Session:
        """A session whose requests to ``url`` this fake answers (nothing goes on the network)."""
        session = requests.Session()
        session.mount(self.url + "/", _FakeAdapter(self))
        return session

    def mint_account(self, label: str = "account") -> str:
        """A new account's ``swa_`` token. (``label`` is for symmetry with the local stack's.)"""
        token = "swa_" + secrets.token_urlsafe(32)
        with self._lock:
            self._accounts[_hash(token)] = _Account(id=str(uuid.uuid4()))
        return token

    def signing_secret(self, account_token: str | None = None) -> str:
        """The ``whsec_`` secret the account (the first one by default) signs its wakes with now."""
        with self._lock:
            return self._accounts[_hash(account_token or self.account_token)].secret

    def rotate_signing_secret(self, account_token: str | None = None, overlap: timedelta = timedelta(hours=24)) -> str:
        """A new signing secret for the account; the old one signs beside it for ``overlap``."""
        with self._lock:
            account = self._accounts[_hash(account_token or self.account_token)]
            account.previous_secret, account.previous_until = account.secret, self._clock() + overlap
            account.secret = _new_key()
            return account.secret

    def revoke_account(self, token: str) -> None:
        """Revoke the account: its token and its instances' tokens get 401 from now on."""
        with self._lock:
            self._accounts[_hash(token)].revoked = True

    def due(self, when: datetime | None = None) -> list[DueWake]:
        """The calls the service would make by ``when`` (default now), earliest first."""
        moment = self._clock() if when is None else when
        with self._lock:
            pending = [i for i in self._instances.values() if i.next_call is not None and i.next_call <= moment]
            pending.sort(key=lambda i: (i.next_call, i.seq))
            return [
                DueWake(i.id, i.url, i.at, i.attempts + 1, self._signed(i, moment)) for i in pending if i.at is not None
            ]

    def _signed(self, instance: _Instance, moment: datetime) -> dict[str, str]:
        """The headers the service would sign a call to ``instance`` at ``moment`` with."""
        msg_id = f"wake_{instance.id}_{instance.reg}"  # the same on every attempt
        secrets_now = self._account_by_id(instance.account_id).signing_secrets(moment)
        return {
            "webhook-id": msg_id,
            "webhook-timestamp": str(int(moment.timestamp())),
            # The library reads the moment as UTC whatever its zone: it is given one in UTC.
            "webhook-signature": " ".join(
                Webhook(secret).sign(msg_id, moment.astimezone(UTC), "") for secret in secrets_now
            ),
        }

    def next_due(self) -> datetime | None:
        """When the next call falls due (a wake's time, or a retry's), None when nothing is pending."""
        with self._lock:
            pending = [i.next_call for i in self._instances.values() if i.next_call is not None]
            return min(pending, default=None)

    def record_answer(
        self, wake: DueWake, status: int | None = None, *, error: str | None = None, when: datetime | None = None
    ) -> bool:
        """Record the host's answer to ``wake``'s call at ``when`` (default now): an HTTP ``status``,
        or ``error`` when there was none (``"timed out after 10 s"``, ``"connection refused"``).

        A 2xx sets ``calledAt``; anything else counts a failed attempt, sets ``lastError`` and
        puts the next call ``min(2^(n-1), 900)`` s later. As in the service, nothing is recorded
        when the registration called was replaced, moved or deleted meanwhile: then it is False.
        """
        if (status is None) == (error is None):
            raise ValueError("give the host's status, or the error of a call that got none")
        moment = self._clock() if when is None else when
        with self._lock:
            instance = self._instances.get(wake.instance_id)
            if instance is not None:
                _remember_call(instance, wake, moment, status, error)
            if instance is None or instance.at != wake.at or instance.url != wake.url or instance.next_call is None:
                return False
            if status is not None and 200 <= status <= 299:
                instance.called_at = moment
                instance.attempts = 0
                instance.last_error = instance.next_call = None
            else:
                instance.attempts += 1
                instance.last_error = error if error is not None else f"HTTP {status}"
                instance.next_call = moment + timedelta(seconds=backoff_s(instance.attempts))
            return True

    # --- the HTTP contract --------------------------------------------------------------------

    def handle(
        self, method: str, path: str, query: str, headers: Mapping[str, str], body: bytes
    ) -> tuple[int, Json | None, dict[str, str]]:
        """Answer one request: its status, JSON body (None for no body) and extra headers."""
        try:
            with self._lock:
                status, reply = self._route(method, path, parse_qs(query, keep_blank_values=True), headers, body)
                return status, reply, {}
        except _Refusal as refusal:
            return refusal.status, {"error": refusal.message}, refusal.headers

    def _route(
        self, method: str, path: str, query: dict[str, list[str]], headers: Mapping[str, str], body: bytes
    ) -> tuple[int, Json | None]:
        if path == "/wakeup/instances":
            _allow(method, "GET", "POST")
            account = self._account(headers)
            if method == "POST":
                return self._register(account, _json_object(body))
            return 200, self._list(account, query)
        if path == "/wakeup/wake":
            _allow(method, "GET", "PUT")
            instance = self._instance_by_token(headers)
            if method == "GET":
                return 200, instance.own_wake()
            return self._wake(instance, _json_object(body))
        attempts = _ATTEMPTS_PATH.fullmatch(path)
        if attempts is not None:
            _allow(method, "GET")
            return 200, self._attempts(self._owned(self._account(headers), unquote(attempts.group(1))), query)
        match = _INSTANCE_PATH.fullmatch(path)
        if match is None:
            raise _Refusal(404, f"there is no {path}: the routes are under /wakeup/instances and /wakeup/wake")
        _allow(method, "GET", "DELETE")
        instance = self._owned(self._account(headers), unquote(match.group(1)))
        if method == "GET":
            return 200, instance.shown()
        del self._instances[instance.id]
        del self._instance_tokens[instance.token_hash]
        return 204, None

    def _token(self, headers: Mapping[str, str], kind: str) -> str:
        bearer = _BEARER.fullmatch(headers.get("Authorization", "").strip())
        if bearer is None or not _TOKENS[kind].fullmatch(bearer.group(1)):
            raise _Refusal(
                401, f"this route needs an {kind} token: send Authorization: Bearer {_TOKENS[kind].pattern[:4]}..."
            )
        return _hash(bearer.group(1))

    def _account(self, headers: Mapping[str, str]) -> _Account:
        account = self._accounts.get(self._token(headers, "account"))
        if account is None or account.revoked:
            raise _Refusal(401, "the account token is unknown or revoked")
        return account

    def _instance_by_token(self, headers: Mapping[str, str]) -> _Instance:
        instance_id = self._instance_tokens.get(self._token(headers, "instance"))
        instance = None if instance_id is None else self._instances[instance_id]
        if instance is None or self._account_by_id(instance.account_id).revoked:
            raise _Refusal(401, "the instance token is unknown, or its instance was deleted")
        return instance

    def _account_by_id(self, account_id: str) -> _Account:
        return next(a for a in self._accounts.values() if a.id == account_id)

    def _owned(self, account: _Account, instance_id: str) -> _Instance:
        instance = self._instances.get(instance_id) if _UUID.fullmatch(instance_id) else None
        if instance is None:
            raise _Refusal(404, f"there is no instance {instance_id}")
        if instance.account_id != account.id:
            raise _Refusal(403, f"instance {instance_id} belongs to another account")
        return instance

    def _register(self, account: _Account, body: Json) -> tuple[int, Json]:
        url, token = body.get("url"), body.get("token")
        if not isinstance(url, str):
            raise _Refusal(400, "url is required: the host's http(s) URL")
        try:
            url = normalise_url(url)
        except ValueError as exc:
            raise _Refusal(400, str(exc)) from exc
        if not isinstance(token, str) or not _TOKENS["instance"].fullmatch(token):
            raise _Refusal(400, "token must be an instance token: swi_ and 32 to 128 url-safe base64 characters")
        token_hash = _hash(token)
        known = self._instance_tokens.get(token_hash)
        if known is None:
            self._seq += 1
            instance = _Instance(str(uuid.uuid4()), account.id, url, token_hash, self._seq)
            self._instances[instance.id] = instance
            self._instance_tokens[token_hash] = instance.id
            return 201, {"id": instance.id}
        instance = self._instances[known]
        if instance.account_id != account.id:
            raise _Refusal(409, "another account registered this instance token")
        if instance.url != url:
            # The host moved: nothing is called at either URL until it registers a wake again.
            instance.url = url
            instance.forget_wake()
        return 200, {"id": instance.id}

    def _attempts(self, instance: _Instance, query: dict[str, list[str]]) -> Json:
        """The instance's calls of the last 7 days, newest first, a page at a time."""
        limit = _page_limit(query)
        since = self._clock() - timedelta(days=HISTORY_DAYS)
        kept = [call for started, call in reversed(instance.history) if started >= since]
        cursor = ",".join(query.get("cursor", [])) or "0"
        if not cursor.isdigit() or int(cursor) > len(kept):
            raise _Refusal(400, "cursor is not one this service gave for this instance's attempts; start without it")
        start, size = int(cursor), limit
        more = start + size < len(kept)
        return {"attempts": kept[start : start + size], "next": str(start + size) if more else None}

    def _list(self, account: _Account, query: dict[str, list[str]]) -> Json:
        limit = _page_limit(query)
        cursor = ",".join(query.get("cursor", [])) or "0"
        if not cursor.isdigit():
            raise _Refusal(400, "cursor is not one this service gave for this listing; start without it")
        after = int(cursor)
        mine = sorted(
            (i for i in self._instances.values() if i.account_id == account.id and i.seq > after),
            key=lambda i: i.seq,
        )
        page = mine[:limit]
        more = len(mine) > len(page)
        return {"instances": [i.shown() for i in page], "next": str(page[-1].seq) if more else None}

    def _wake(self, instance: _Instance, body: Json) -> tuple[int, None]:
        at = body.get("at")
        if not isinstance(at, str):
            raise _Refusal(400, "at is required: an ISO 8601 date-time with a time zone")
        try:
            # A time in the past means now.
            moment = max(parse_time(at), self._clock())
        except ValueError as exc:
            raise _Refusal(400, str(exc)) from exc
        # The newest registration is the only one that counts: whatever was pending is replaced.
        instance.forget_wake()
        instance.at = instance.next_call = moment
        instance.reg = uuid.uuid4().hex
        return 204, None


def _remember_call(instance: _Instance, wake: DueWake, moment: datetime, status: int | None, error: str | None) -> None:
    """Keeps the call in the instance's history, as the service does (at most 100)."""
    failed = error if error is not None else (None if status is not None and 200 <= status <= 299 else f"HTTP {status}")
    call = {
        "startedAt": format_time(moment),
        "at": format_time(wake.at),
        "attempt": wake.attempt,
        "latenessMs": round((moment - wake.at).total_seconds() * 1000) if wake.attempt == 1 else None,
        "durationMs": 0,
        "status": status,
        "error": failed,
        "trigger": "queue",
        "webhookId": wake.headers.get("webhook-id", f"wake_{wake.instance_id}_{instance.reg}"),
    }
    instance.history = [*instance.history, (moment, call)][-HISTORY_SIZE:]


def _allow(method: str, *allowed: str) -> None:
    if method not in allowed:
        raise _Refusal(405, f"this path answers {', '.join(allowed)}, not {method}", {"Allow": ", ".join(allowed)})


def _page_limit(query: dict[str, list[str]]) -> int:
    """A listing's `limit` (API Gateway hands a repeated parameter over joined with commas)."""
    limit = ",".join(query.get("limit", [str(MAX_PAGE_SIZE)]))
    if not _LIMIT.fullmatch(limit) or not 1 <= int(limit) <= MAX_PAGE_SIZE:
        raise _Refusal(400, f"limit must be a whole number from 1 to {MAX_PAGE_SIZE}")
    return int(limit)


# The service reads every body one way (its `wakeup.decoding`): UTF-8 strictly, JSON without NaN
# or Infinity, no lone surrogate, nested no deeper than this, and an object.
MAX_JSON_DEPTH = 8


def _json_object(body: bytes) -> Json:
    if len(body) > MAX_BODY_BYTES:
        raise _Refusal(413, "the body is larger than 16 KiB")
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _Refusal(400, "the body must be JSON encoded in UTF-8") from exc
    try:
        value = json.loads(text, parse_constant=_refuse_constant)
    except RecursionError as exc:
        raise _Refusal(400, _TOO_DEEP) from exc
    except json.JSONDecodeError as exc:
        if not text.strip():
            raise _Refusal(400, "the body must be a JSON object") from exc
        raise _Refusal(
            400, f"the body is not valid JSON: its first error is at line {exc.lineno}, column {exc.colno}"
        ) from exc
    except _NotAJsonValue as exc:
        raise _Refusal(400, f"the body is not valid JSON: {exc} is no JSON value") from exc
    except ValueError as exc:  # a whole number of more digits than Python converts
        raise _Refusal(400, f"the body holds a number of more than {sys.get_int_max_str_digits()} digits") from exc
    if not isinstance(value, dict):
        raise _Refusal(400, "the body must be a JSON object")
    level: list[Any] = [value]
    for _ in range(MAX_JSON_DEPTH):
        below: list[Any] = []
        for item in level:
            for member in [*item.keys(), *item.values()] if isinstance(item, dict) else item:
                if isinstance(member, str) and not _is_text(member):
                    raise _Refusal(
                        400, "the body holds a lone UTF-16 surrogate (such as \\ud800), which is no character"
                    )
                if isinstance(member, dict | list):
                    below.append(member)
        if not below:
            return value
        level = below
    raise _Refusal(400, _TOO_DEEP)


_TOO_DEEP = f"the body is nested deeper than {MAX_JSON_DEPTH} levels, deeper than any valid request"


class _NotAJsonValue(ValueError):
    """NaN, Infinity or -Infinity, which Python's parser reads and JSON does not have."""


def _refuse_constant(name: str) -> Any:
    raise _NotAJsonValue(name)


def _is_text(value: str) -> bool:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


class _FakeAdapter(HTTPAdapter):
    """A transport that hands each request to the fake instead of the network."""

    def __init__(self, service: FakeWakeupService) -> None:
        super().__init__()
        self._service = service

    def send(self, request: requests.PreparedRequest, *args: Any, **kwargs: Any) -> requests.Response:
        parts = urlsplit(request.url or "")
        content = request.body or b""
        status, reply, extra_headers = self._service.handle(
            request.method or "GET",
            parts.path,
            parts.query,
            request.headers,
            content.encode() if isinstance(content, str) else content,
        )
        data = b"" if reply is None else json.dumps(reply).encode()
        headers = {**extra_headers, "Content-Type": "application/json"} if reply is not None else extra_headers
        raw = HTTPResponse(
            body=io.BytesIO(data),
            headers={**headers, "Content-Length": str(len(data))},
            status=status,
            reason=HTTPStatus(status).phrase,
            preload_content=False,
        )
        return self.build_response(request, raw)
