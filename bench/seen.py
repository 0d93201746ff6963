"""A burst the planner sees coming beside the same burst unseen, and wakes on a stack just started
(`make bench`, issue 36).

Each burst runs on a stack of its own as `make run` starts it: the sweeper and the planner every
minute, an event source update applying after `WAKEUP_LOCAL_MAPPING_UPDATE_S` and the planner
assuming the template's `PlannerUpdateDelaySeconds`. Its wakes are registered `ahead_s` before
their second: 2 minutes (the planner's runs see it) and 15 s (no run sees it before it is due).
The planner sends no change that could land during its burst (wakeup.logic.planner), so what it
did is read from its log and printed beside the lateness.
"""

from __future__ import annotations

import json
import math
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime

from bench.stack import BenchStack
from bench.workload import Api, Host
from wakeup.times import format_time
from wakeup_cost.stats import percentile

# Clients registering at once, each with connections of its own.
CLIENTS = 16
# After the burst's second, how long its calls may take before the wait gives up.
DELIVERY_TIMEOUT_S = 300.0
SETTLE_S = 1.5


@dataclass(frozen=True)
class Seen:
    """A burst's lateness, and what the planner did about it."""

    name: str
    wakes: int
    late_s: list[float]
    duplicates: int
    registered_by_s: float
    planner: str  # what its runs did, from its log

    def row(self) -> list[object]:
        return [
            self.name,
            self.wakes,
            f"{percentile(self.late_s, 50):.2f} s" if self.late_s else "-",
            f"{percentile(self.late_s, 99):.2f} s" if self.late_s else "-",
            f"{max(self.late_s):.2f} s" if self.late_s else "-",
            self.wakes - len(self.late_s),
            self.duplicates,
            f"{self.registered_by_s:.1f} s",
            self.planner,
        ]


HEADERS = ["burst", "wakes", "p50", "p99", "max", "not called", "called twice", "last PUT before due", "planner"]


def iso(epoch: float) -> str:
    return format_time(datetime.fromtimestamp(epoch, UTC))


@dataclass(frozen=True)
class Registered:
    paths: list[str]  # the instances' paths on the host
    tokens: list[str]
    each_s: float  # the registrations' wall time, per instance: about a PUT's, on this stack and load

    def due_after(self, ahead_s: float) -> float:
        """A whole second that leaves the PUTs of a wake each (at the registrations' rate, a quarter
        to spare) `ahead_s` before it: wakes registered `ahead_s` ahead, on whatever machine. The
        row prints how long before it the last PUT was in."""
        return float(math.ceil(time.time() + 1.25 * self.each_s * len(self.tokens) + ahead_s))


def register(api: Api, host: Host, prefix: str, count: int) -> Registered:
    """`count` instances at `host` from `CLIENTS` clients."""
    tokens = [""] * count

    def one(index: int) -> None:
        _, token, _ = api.register(f"{host.url}{prefix}{index}")
        tokens[index] = token

    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=CLIENTS) as pool:
        list(pool.map(one, range(count)))
    each_s = (time.perf_counter() - started) / max(1, count)
    return Registered([f"{prefix}{index}" for index in range(count)], tokens, each_s)


def wakes_at(api: Api, tokens: list[str], at: float) -> float:
    """A wake at `at` for each token, from `CLIENTS` clients; how long before `at` the last was in."""
    with ThreadPoolExecutor(max_workers=CLIENTS) as pool:
        list(pool.map(lambda token: api.wake(token, iso(at)), tokens))
    return at - time.time()


def planner_did(log: str) -> str:
    """What the planner's runs did, from the functions' log: updates sent, changes held and why."""
    sent, held = 0, []
    for line in log.splitlines():
        if '"service":"planner"' not in line.replace(" ", ""):
            continue
        try:
            record = json.loads(line[line.index("{") :])
        except ValueError:
            continue
        if record.get("message") == "event source changed":
            sent += 1
        elif record.get("message") == "event source change held":
            held.append(str(record.get("held")))
    kinds = ", ".join(f"{held.count(kind)} {kind}" for kind in sorted(set(held)))
    return f"{sent} sent" + (f"; held: {kinds}" if held else "")


def burst(host: Host, wakes: int, ahead_s: float, name: str) -> Seen:
    """`wakes` near wakes due at one second, their PUTs over `ahead_s` before it (`Registered`), on
    a stack of their own as `make run` starts it."""
    stack = BenchStack({})
    api = Api(stack.url, stack.account_token)
    try:
        made = register(api, host, f"/seen{int(ahead_s)}-", wakes)
        paths, at = made.paths, made.due_after(ahead_s)
        registered_by = wakes_at(api, made.tokens, at)
        host.wait_for(paths, 1, time.monotonic() + (at - time.time()) + DELIVERY_TIMEOUT_S)
        time.sleep(SETTLE_S)
    finally:
        stack.stop()
    first = host.first_calls(paths)
    late = [first[path] - at for path in paths if path in first]
    duplicates = sum(1 for path in paths if len(host.calls.get(path, [])) > 1)
    return Seen(name, wakes, late, duplicates, registered_by, planner_did(stack.functions_log))


def fresh(host: Host, wakes: int, after_s: float) -> Seen:
    """`wakes` near wakes due at one second `after_s` after their PUTs, on a stack started seconds
    before (its caller never run, the API's functions warmed only by the registrations)."""
    stack = BenchStack({})
    started = time.time()
    api = Api(stack.url, stack.account_token)
    try:
        made = register(api, host, "/fresh-", wakes)
        paths, at = made.paths, made.due_after(after_s)
        registered_by = wakes_at(api, made.tokens, at)
        host.wait_for(paths, 1, time.monotonic() + (at - time.time()) + 60)
        time.sleep(SETTLE_S)
    finally:
        stack.stop()
    first = host.first_calls(paths)
    late = [first[path] - at for path in paths if path in first]
    duplicates = sum(1 for path in paths if len(host.calls.get(path, [])) > 1)
    name = f"{wakes} at one second, {at - started:.0f} s after the stack started"
    return Seen(name, wakes, late, duplicates, registered_by, planner_did(stack.functions_log))
