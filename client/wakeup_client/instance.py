"""``InstanceClient``: a host's view of the service. With its own ``swi_`` token, a host says when
it wants waking, which replaces whatever wake it asked for before, and reads that wake back."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from types import TracebackType
from typing import Self

import requests

from ._http import Connection, service_url, token_setting
from .formats import format_time, round_up_to_millisecond
from .models import OwnWake

INSTANCE_TOKEN_SETTING = "WAKEUP_TOKEN"


class InstanceClient:
    """The wakeup service as a host uses it.

    ``url`` and ``token`` default to ``WAKEUP_URL`` and ``WAKEUP_TOKEN``; a missing one raises
    ``WakeupError`` (code ``missing_setting``) here, before any request.
    """

    def __init__(
        self,
        url: str | None = None,
        token: str | None = None,
        *,
        timeout: float = 10.0,
        session: requests.Session | None = None,
    ) -> None:
        self.url = service_url(url)
        self._token = token_setting(token, INSTANCE_TOKEN_SETTING, "swi_", "instance")
        self._connection = Connection(self.url, timeout=timeout, session=session)

    def wake_at(self, when: datetime) -> datetime:
        """Ask to be woken at ``when`` (an aware datetime; a past one means now).

        Replaces the wake registered before. Returns the time as the service keeps it: in UTC, to
        the millisecond (rounded up, so the host is never called before ``when``).
        """
        if when.tzinfo is None:
            raise ValueError("wake_at needs an aware datetime (datetime.now(UTC), not datetime.now())")
        at = format_time(round_up_to_millisecond(when))
        self._connection.send(
            "PUT",
            "/wakeup/wake",
            self._token,
            token_name=INSTANCE_TOKEN_SETTING,
            expect=(204,),
            body={"at": at},
        )
        return datetime.fromisoformat(at)

    def wake_in(self, delay: float | timedelta) -> datetime:
        """Ask to be woken ``delay`` from now (seconds or a timedelta). Returns the time registered."""
        if not isinstance(delay, timedelta):
            delay = timedelta(seconds=delay)
        if delay < timedelta(0):
            raise ValueError("a wake delay cannot be negative")
        return self.wake_at(datetime.now(UTC) + delay)

    def current_wake(self) -> OwnWake:
        """The wake registered for this host: when (None before the first ``wake_at``), when the
        host answered its call (None until it did), how many calls failed since, and why the last
        one did. A host that has just started reads whether it is due and whether a call failed."""
        reply = self._connection.send(
            "GET", "/wakeup/wake", self._token, token_name=INSTANCE_TOKEN_SETTING, expect=(200,)
        )
        assert reply is not None  # only an absent_ok request answers None
        return self._connection.parse(reply, OwnWake)

    def close(self) -> None:
        """Release the HTTP session, if the client made it."""
        self._connection.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
