"""Counts the AWS requests moto serves to the functions, by `service:Operation`, for the benchmark.

The functions run in processes of their own, so their boto3 calls are counted where they arrive:
in moto's process, as a WSGI layer in front of moto. The local stack's own clients (the SQS poller,
the Scheduler, the resources it creates) say who they are in their User-Agent and are left out, as
Lambda's event source mapping and EventBridge Scheduler are not the service's own requests.
`GET /_wakeup_local/requests` answers the counts so far as JSON.

It also counts the changes made to EventBridge Scheduler's schedules (any request that is not a
read, whoever makes it, and moto's reset), once moto has made them: the local Scheduler lists the
schedules again only when that count moved, instead of listing them all five times a second
(`GET /_wakeup_local/scheduler-changes`). With `?seen=N&wait=S` the answer waits, up to S seconds,
for the count to differ from N: the Scheduler waits in one request instead of asking five times a
second.
"""

from __future__ import annotations

import json
import re
import threading
import urllib.parse
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any

COUNTS_PATH = "/_wakeup_local/requests"
SCHEDULER_CHANGES_PATH = "/_wakeup_local/scheduler-changes"
_RESET_PATH = "/moto-api/reset"
CHANGES_TIMEOUT_S = 2.0
# The longest an answer of the changes waits for one (the caller's `wait_s` is capped to it).
MAX_CHANGES_WAIT_S = 5.0
_READS = frozenset({"GET", "HEAD", "OPTIONS"})
# In the User-Agent of the local stack's own clients (`user_agent_extra`).
STACK_AGENT = "wakeup-local-stack"

_SERVICE = re.compile(r"Credential=[^/]+/[^/]+/[^/]+/([^/]+)/aws4_request")
# EventBridge Scheduler is a REST API: its operation is the method and the path's first segment.
_SCHEDULER_OPERATIONS = {
    ("POST", "schedules"): "CreateSchedule",
    ("PUT", "schedules"): "UpdateSchedule",
    ("DELETE", "schedules"): "DeleteSchedule",
    ("GET", "schedules"): "GetSchedule",
    ("POST", "schedule-groups"): "CreateScheduleGroup",
    ("DELETE", "schedule-groups"): "DeleteScheduleGroup",
    ("GET", "schedule-groups"): "GetScheduleGroup",
}

StartResponse = Callable[..., Any]
WsgiApp = Callable[[dict[str, Any], StartResponse], Iterable[bytes]]


def operation_of(environ: dict[str, Any]) -> str | None:
    """`service:Operation` of a signed AWS request, or None when it cannot tell."""
    service = _SERVICE.search(environ.get("HTTP_AUTHORIZATION", ""))
    if service is None:
        return None
    target = environ.get("HTTP_X_AMZ_TARGET", "")
    if target:  # the JSON protocols: DynamoDB_20120810.GetItem, AmazonSQS.SendMessage
        return f"{service.group(1)}:{target.rpartition('.')[2]}"
    segments = [segment for segment in environ.get("PATH_INFO", "").split("/") if segment]
    method = environ.get("REQUEST_METHOD", "")
    if service.group(1) == "scheduler" and segments:
        if method == "GET" and len(segments) == 1:
            return "scheduler:ListSchedules" if segments[0] == "schedules" else "scheduler:ListScheduleGroups"
        operation = _SCHEDULER_OPERATIONS.get((method, segments[0]))
        if operation is not None:
            return f"scheduler:{operation}"
    return f"{service.group(1)}:{method} /{'/'.join(segments[:1])}"


class RequestCounter:
    """The WSGI layer: counts, then hands the request to moto."""

    def __init__(self, app: WsgiApp) -> None:
        self._app = app
        self._counts: Counter[str] = Counter()
        self._scheduler_changes = 0
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        path = environ.get("PATH_INFO")
        if path in (COUNTS_PATH, SCHEDULER_CHANGES_PATH):
            with self._lock:
                if path == SCHEDULER_CHANGES_PATH:
                    self._wait_for_a_change(environ.get("QUERY_STRING", ""))
                answer = dict(self._counts) if path == COUNTS_PATH else {"changes": self._scheduler_changes}
            body = json.dumps(answer).encode()
            start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
            return [body]
        operation = operation_of(environ)
        if operation is not None and STACK_AGENT not in environ.get("HTTP_USER_AGENT", ""):
            with self._lock:
                self._counts[operation] += 1
        reply = self._app(environ, start_response)
        # Counted once moto has answered: whoever then lists the schedules sees the change.
        changes = operation is not None and operation.startswith("scheduler:")
        if path == _RESET_PATH or (changes and environ.get("REQUEST_METHOD") not in _READS):
            with self._lock:
                self._scheduler_changes += 1
                self._changed.notify_all()
        return reply

    def _wait_for_a_change(self, query: str) -> None:
        """Waits, the lock held, while the count is `seen` and for at most `wait` seconds."""
        asked = urllib.parse.parse_qs(query)
        try:
            seen = int(asked["seen"][0])
            wait_s = min(float(asked.get("wait", ["0"])[0]), MAX_CHANGES_WAIT_S)
        except (KeyError, ValueError):
            return
        self._changed.wait_for(lambda: self._scheduler_changes != seen, timeout=max(0.0, wait_s))


def scheduler_changes(endpoint_url: str, seen: int | None = None, wait_s: float = 0.0) -> int | None:
    """How many changes moto's process has counted to the schedules (`RequestCounter`); None when
    it cannot tell (a moto without this layer, or none answering). With `seen`, the answer waits up
    to `wait_s` for a count other than it."""
    url = endpoint_url + SCHEDULER_CHANGES_PATH
    if seen is not None and wait_s > 0:
        url += "?" + urllib.parse.urlencode({"seen": seen, "wait": wait_s})
    try:
        with urllib.request.urlopen(url, timeout=CHANGES_TIMEOUT_S + wait_s) as reply:
            changes = json.load(reply).get("changes")
    except (OSError, ValueError, AttributeError):
        return None
    return changes if isinstance(changes, int) else None
