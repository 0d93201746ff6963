"""``WakeupClient``: an account's view of the service. It registers its hosts as instances, reads
them, lists them and deletes them, with the account's ``swa_`` token."""

from __future__ import annotations

from collections.abc import Iterator
from types import TracebackType
from typing import Self, TypeVar
from urllib.parse import quote

import requests

from ._http import Connection, service_url, token_setting
from .errors import ErrorCode, WakeupError
from .models import Attempt, AttemptPage, Instance, InstancePage, Posted, Registration

ACCOUNT_TOKEN_SETTING = "WAKEUP_ACCOUNT_TOKEN"
# The most instances the service returns in one page of GET /wakeup/instances.
MAX_PAGE_SIZE = 100
# A page of a listing: GET /wakeup/instances or an instance's attempts.
_Page = TypeVar("_Page", InstancePage, AttemptPage)


def _instance_path(instance_id: str) -> str:
    if not instance_id:
        raise ValueError("an instance id is required")
    return f"/wakeup/instances/{quote(instance_id, safe='')}"


class WakeupClient:
    """The wakeup service as an account uses it.

    ``url`` and ``account_token`` default to ``WAKEUP_URL`` and ``WAKEUP_ACCOUNT_TOKEN``; a missing
    one raises ``WakeupError`` (code ``missing_setting``) here, before any request. ``timeout`` is
    how long one request may take, in seconds. ``session`` is the ``requests.Session`` to send
    through (``FakeWakeupService.session()`` in tests); one is made when none is given.
    """

    def __init__(
        self,
        url: str | None = None,
        account_token: str | None = None,
        *,
        timeout: float = 10.0,
        session: requests.Session | None = None,
    ) -> None:
        self.url = service_url(url)
        self._token = token_setting(account_token, ACCOUNT_TOKEN_SETTING, "swa_", "account")
        self._connection = Connection(self.url, timeout=timeout, session=session)

    @property
    def timeout(self) -> float:
        return self._connection.timeout

    @property
    def session(self) -> requests.Session:
        return self._connection.session

    def register(self, url: str, token: str) -> Registration:
        """Register the host at ``url`` under its instance token ``token`` (``mint_instance_token()``).

        Registering a token this account registered before is not an error: it returns the same
        id (``created`` False), and moves the instance to ``url`` when that is new, which forgets
        its wake. A token another account registered is refused (code ``conflict``).
        """
        try:
            reply = self._send("POST", "/wakeup/instances", expect=(200, 201), body={"url": url, "token": token})
        except WakeupError as exc:
            if exc.status != 409:
                raise
            # The service cannot know what the caller should do about it; the client can say.
            raise WakeupError(
                f"{exc.message}: another account registered this instance token; "
                "an instance registered by this account needs a token of its own (mint_instance_token())",
                code=ErrorCode.CONFLICT,
                retryable=False,
                status=409,
            ) from exc
        assert reply is not None  # only an absent_ok request answers None
        posted = self._connection.parse(reply, Posted)
        return Registration(id=posted.id, created=reply.status_code == 201)

    def get(self, instance_id: str) -> Instance | None:
        """The instance ``instance_id``, or None when the service has none by that id."""
        reply = self._send("GET", _instance_path(instance_id), expect=(200,), absent_ok=True)
        return None if reply is None else self._connection.parse(reply, Instance)

    def delete(self, instance_id: str) -> bool:
        """Delete the instance and its pending wake. False when there was none (not an error)."""
        reply = self._send("DELETE", _instance_path(instance_id), expect=(204,), absent_ok=True)
        return reply is not None

    def list(self, *, page_size: int = MAX_PAGE_SIZE) -> Iterator[Instance]:
        """Every instance of the account, oldest first, fetching a page of ``page_size`` at a time."""
        for page in self._pages("/wakeup/instances", InstancePage, page_size):
            yield from page.instances

    def attempts(self, instance_id: str, *, page_size: int = MAX_PAGE_SIZE) -> Iterator[Attempt]:
        """The instance's calls of the last 7 days (at most 100), newest first, a page at a time.
        An instance the service does not have raises ``WakeupError`` (code ``not_found``)."""
        for page in self._pages(_instance_path(instance_id) + "/attempts", AttemptPage, page_size):
            yield from page.attempts

    def _pages(self, path: str, model: type[_Page], page_size: int) -> Iterator[_Page]:
        """Every page of a listing at ``path``, following each page's ``next`` cursor to the last."""
        if not 1 <= page_size <= MAX_PAGE_SIZE:
            raise ValueError(f"page_size must be between 1 and {MAX_PAGE_SIZE}")
        cursor: str | None = None
        while True:
            params: dict[str, str | int] = {"limit": page_size}
            if cursor is not None:
                params["cursor"] = cursor
            reply = self._send("GET", path, expect=(200,), params=params)
            assert reply is not None
            page = self._connection.parse(reply, model)
            yield page
            if page.next is None:
                return
            cursor = page.next

    def close(self) -> None:
        """Release the HTTP session, if the client made it."""
        self._connection.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def _send(
        self,
        method: str,
        path: str,
        *,
        expect: tuple[int, ...],
        body: dict[str, object] | None = None,
        params: dict[str, str | int] | None = None,
        absent_ok: bool = False,
    ) -> requests.Response | None:
        return self._connection.send(
            method,
            path,
            self._token,
            token_name=ACCOUNT_TOKEN_SETTING,
            expect=expect,
            body=body,
            params=params,
            absent_ok=absent_ok,
        )
