"""Each account's rate on the account routes (`/wakeup/instances...`): a request past it is 429,
so that one account's flood of requests cannot take the API from the others.

The table counts an account's requests per window of `ACCOUNT_WINDOW_S` (windows counted from the
epoch) in one conditional write on an item of the account's own (`wakeup.table.rates`); a window
that holds the account's limit refuses the write and the request. An execution environment that
saw a window full refuses the account's further requests in it without asking the table, so a
refusal costs the token's read alone and a flood never makes the count's item a hot key. No
request of `PUT /wakeup/wake` is counted: an instance's wakes are bounded by its own rate
(`wakeup.logic.wakes`), and an account's by its count of instances.
"""

from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from wakeup.errors import TooManyRequestsError
from wakeup.table import RateFull, RequestWindow

# Long enough that a burst (a platform registering its hosts as they start) passes within the
# window's allowance; short enough that a refused account waits seconds, not a minute.
ACCOUNT_WINDOW_S = 10


class RequestCounter(Protocol):
    """The table's count of each account's requests (`wakeup.table.rates.Rates`)."""

    def count_request(self, account_id: str, window: RequestWindow, started: bool = True) -> None: ...


@dataclass
class _Seen:
    """What this environment knows of an account's window: its start, and its limit once full."""

    start: int
    full_at: int | None = None


class AccountThrottle:
    """The accounts' rates, as one execution environment enforces them: at most `per_s` requests a
    second for an account without its own rate, counted over windows of `window_s` seconds."""

    def __init__(self, counter: RequestCounter, per_s: int, window_s: int = ACCOUNT_WINDOW_S) -> None:
        self.counter = counter
        self.per_s = per_s
        self.window_s = window_s
        self._seen: dict[str, _Seen] = {}

    def admit(self, account_id: str, now: datetime) -> None:
        """Counts the account's request; 429 with when to retry once its window holds its limit."""
        start = int(now.timestamp() // self.window_s) * self.window_s
        seen = self._seen.get(account_id)
        current = seen is not None and seen.start >= start
        if seen is not None and current and seen.full_at is not None:
            raise self._refusal(seen.start, seen.full_at, now)
        try:
            self.counter.count_request(account_id, RequestWindow(start, self.per_s * self.window_s), started=current)
        except RateFull as full:
            self._seen[account_id] = _Seen(full.start, full.limit)
            raise self._refusal(full.start, full.limit, now) from full
        self._seen[account_id] = _Seen(start)

    def _refusal(self, start: int, limit: int, now: datetime) -> TooManyRequestsError:
        retry_in = max(start + self.window_s - int(now.timestamp()), 1)
        return TooManyRequestsError(
            f"this account made {limit} requests in {self.window_s} s, as many as the service allows it;"
            f" retry in {retry_in} s, or ask the service's operator to raise its rate",
            retry_after_s=retry_in,
        )
