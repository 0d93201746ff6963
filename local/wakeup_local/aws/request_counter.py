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
second. With `seen` it also names the schedules changed since, `[[group, name], ...]`, when it knows
each change since (a schedule created, updated or deleted, among the last `CHANGE_LOG_SIZE`), else
null: the Scheduler then reads those schedules only, instead of listing them all. With `region=R`
it also answers what each of those holds now in that Region, as moto's `GetSchedule` answers it
(`read`: the reply's body, or null for one that is gone), when one backend alone (one account) has
its group there: the Scheduler then takes that instead of a `GetSchedule` of its own, a request for
each far wake registered that would otherwise be most of the stack's own work (docs/benchmark.md,
"The local stack").
"""

from __future__ import annotations

import io
import json
import logging
import re
import threading
import urllib.parse
import urllib.request
from collections import Counter, deque
from collections.abc import Callable, Iterable
from typing import Any, NamedTuple

log = logging.getLogger(__name__)

COUNTS_PATH = "/_wakeup_local/requests"
SCHEDULER_CHANGES_PATH = "/_wakeup_local/scheduler-changes"
_RESET_PATH = "/moto-api/reset"
CHANGES_TIMEOUT_S = 2.0
# The longest an answer of the changes waits for one (the caller's `wait_s` is capped to it).
MAX_CHANGES_WAIT_S = 5.0
_READS = frozenset({"GET", "HEAD", "OPTIONS"})
# How many changes the counter remembers the schedule of: a reader further behind lists them all.
CHANGE_LOG_SIZE = 1000
_SCHEDULE_CHANGES = frozenset({"scheduler:CreateSchedule", "scheduler:UpdateSchedule", "scheduler:DeleteSchedule"})
# A BatchWriteItem is counted as a request and, under its name and this, by the puts it carries:
# DynamoDB bills each as the PutItem it stands for (wakeup_cost.cost.HISTORY_PUT_ITEMS).
_BATCH_WRITE = "dynamodb:BatchWriteItem"
PUTS_SUFFIX = " PutRequest"
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
# A schedule, by its group and name.
ScheduleKey = tuple[str, str]


class SchedulerChanges(NamedTuple):
    """How many changes the schedules have had (`total`), which schedules changed since the count a
    reader had seen (None: unknown, any may have), and what moto's process read of those it could
    (`GetSchedule`'s reply body, None for one that is gone; a schedule not in it is to be read)."""

    total: int
    schedules: list[ScheduleKey] | None
    read: dict[ScheduleKey, str | None] | None = None


class UnplacedSchedule(LookupError):
    """Raised by a schedule reader when it cannot tell which of moto's backends is the reader's: no
    account, or several, has the schedule's group in the Region."""


# Reads a schedule in moto's process, by Region, group and name: `GetSchedule`'s reply body, None
# when it is gone (raises UnplacedSchedule when it cannot tell whose it is).
ReadSchedule = Callable[[str, str, str], str | None]


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

    def __init__(self, app: WsgiApp, read_schedule: ReadSchedule | None = None) -> None:
        self._app = app
        self._read_schedule = read_schedule
        self._counts: Counter[str] = Counter()
        self._scheduler_changes = 0
        # The schedule each of the last changes touched (None: unknown), the newest last.
        self._changed_schedules: deque[ScheduleKey | None] = deque(maxlen=CHANGE_LOG_SIZE)
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        path = environ.get("PATH_INFO")
        if path in (COUNTS_PATH, SCHEDULER_CHANGES_PATH):
            query = urllib.parse.parse_qs(environ.get("QUERY_STRING", ""))
            with self._lock:
                if path == SCHEDULER_CHANGES_PATH:
                    answer: dict[str, Any] = self._changes_since(query)
                else:
                    answer = dict(self._counts)
            if answer.get("schedules") and "region" in query:
                # Read once the lock is let go, which every request takes to be counted; a read
                # newer than the count is one the next answer would give again.
                answer["read"] = self._read(query["region"][0], answer["schedules"])
            body = json.dumps(answer).encode()
            start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
            return [body]
        operation = operation_of(environ)
        if operation is not None and STACK_AGENT not in environ.get("HTTP_USER_AGENT", ""):
            puts = _puts_in(environ) if operation == _BATCH_WRITE else 0
            with self._lock:
                self._counts[operation] += 1
                if puts:
                    self._counts[operation + PUTS_SUFFIX] += puts
        scheduler = operation is not None and operation.startswith("scheduler:")
        changes = path == _RESET_PATH or (scheduler and environ.get("REQUEST_METHOD") not in _READS)
        # Read before moto answers: moto reads the body it is handed back.
        changed = _changed_schedule(operation, environ) if changes else None
        reply = self._app(environ, start_response)
        # Counted once moto has answered: whoever then lists the schedules sees the change.
        if changes:
            with self._lock:
                self._scheduler_changes += 1
                self._changed_schedules.append(changed)
                self._changed.notify_all()
        return reply

    def _changes_since(self, asked: dict[str, list[str]]) -> dict[str, Any]:
        """The answer of the changes, the lock held: the count, and the schedules changed since the
        count `seen`, waiting while the count is `seen` for at most `wait` seconds."""
        try:
            seen = int(asked["seen"][0])
            wait_s = min(float(asked.get("wait", ["0"])[0]), MAX_CHANGES_WAIT_S)
        except (KeyError, ValueError):
            return {"changes": self._scheduler_changes, "schedules": None}
        self._changed.wait_for(lambda: self._scheduler_changes != seen, timeout=max(0.0, wait_s))
        since = self._scheduler_changes - seen
        log = self._changed_schedules
        logged = list(log)[len(log) - since :] if 0 <= since <= len(log) else [None]
        schedules = None if None in logged else list(dict.fromkeys(key for key in logged if key is not None))
        return {"changes": self._scheduler_changes, "schedules": schedules}

    def _read(self, region: str, schedules: list[ScheduleKey]) -> list[list[str | None]]:
        """`[group, name, body or None]` for each schedule whose backend in `region` is known."""
        read: list[list[str | None]] = []
        if self._read_schedule is None:
            return read
        for group, name in schedules:
            try:
                read.append([group, name, self._read_schedule(region, group, name)])
            except UnplacedSchedule:
                continue
            except Exception:  # one moto could not read is left for the reader to read
                log.exception("reading the schedule %s/%s for the changes failed", group, name)
        return read


def _puts_in(environ: dict[str, Any]) -> int:
    """The puts a BatchWriteItem carries (0 when its body cannot be read); the body is put back for
    moto to read."""
    try:
        body = environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
    except (KeyError, ValueError, OSError):
        return 0
    environ["wsgi.input"] = io.BytesIO(body)
    try:
        requests = json.loads(body or b"{}").get("RequestItems", {})
        return sum(1 for writes in requests.values() for write in writes if "PutRequest" in write)
    except (ValueError, AttributeError, TypeError):
        return 0


def _changed_schedule(operation: str | None, environ: dict[str, Any]) -> ScheduleKey | None:
    """The schedule a change creates, updates or deletes; None when it may change any (a group's
    deletion, moto's reset) or cannot be read."""
    segments = environ.get("PATH_INFO", "").split("/")
    if operation not in _SCHEDULE_CHANGES or len(segments) != 3 or not segments[2]:
        return None
    # The server has already decoded the path (PEP 3333): the name is as the client named it.
    name = segments[2]
    if operation == "scheduler:DeleteSchedule":
        group = urllib.parse.parse_qs(environ.get("QUERY_STRING", "")).get("groupName", ["default"])[0]
        return group, name
    try:
        body = environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
    except (KeyError, ValueError, OSError):
        return None
    environ["wsgi.input"] = io.BytesIO(body)
    try:
        group = json.loads(body or b"{}").get("GroupName") or "default"
    except (ValueError, AttributeError):
        return None
    return (group, name) if isinstance(group, str) else None


def scheduler_changes(endpoint_url: str, seen: int | None = None, wait_s: float = 0.0) -> int | None:
    """How many changes moto's process has counted to the schedules (`RequestCounter`); None when
    it cannot tell (a moto without this layer, or none answering). With `seen`, the answer waits up
    to `wait_s` for a count other than it."""
    changes = scheduler_changes_since(endpoint_url, seen, wait_s)
    return changes.total if changes is not None else None


def scheduler_changes_since(
    endpoint_url: str, seen: int | None, wait_s: float = 0.0, *, region: str | None = None
) -> SchedulerChanges | None:
    """The changes moto's process has counted to the schedules (`RequestCounter`), and which
    schedules changed since the count `seen`, waiting up to `wait_s` for a count other than it
    (with `region`, what those hold there, as far as moto's process can tell); None when it cannot
    tell (a moto without this layer, or none answering)."""
    url = endpoint_url + SCHEDULER_CHANGES_PATH
    if seen is not None:
        asked: dict[str, Any] = {"seen": seen, "wait": max(0.0, wait_s)}
        url += "?" + urllib.parse.urlencode(asked | ({"region": region} if region else {}))
    try:
        with urllib.request.urlopen(url, timeout=CHANGES_TIMEOUT_S + wait_s) as reply:
            answer = json.load(reply)
        count, listed = answer.get("changes"), answer.get("schedules")
    except (OSError, ValueError, AttributeError):
        return None
    if not isinstance(count, int):
        return None
    if not isinstance(listed, list) or seen is None:
        return SchedulerChanges(count, None)
    try:
        read = {(str(group), str(name)): body for group, name, body in answer.get("read") or []}
    except (TypeError, ValueError):  # an answer this code does not know: the reader reads them
        read = {}
    return SchedulerChanges(count, [(str(group), str(name)) for group, name in listed], read)
