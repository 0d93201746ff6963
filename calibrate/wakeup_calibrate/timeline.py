"""Each wake's way through the stack, stage by stage, on the local stack and in the simulator alike.

A near wake's message is sent when the wake is registered, with a delay of whole seconds; it
becomes visible one to two seconds before the wake's time; the event source receives it, gathers
it into a batch and hands the batch to an invocation of the caller, which takes an environment
(starting one: a cold start) and runs; the caller waits out the rest of the second and calls the
host. The local stack's timeline comes from its poller's trace (`wakeup_calibrate.local_trace`) and its
host's log of calls, the simulator's from its own events (`traced`); `stage_table` prints both,
stage by stage, so that where they part shows.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from greenlet import getcurrent

from wakeup.arrival import queue_delay_s
from wakeup_cost.stats import percentile
from wakeup_sim.engine import Cpu, Machine
from wakeup_sim.event_source import EventSource
from wakeup_sim.lambdas import Function
from wakeup_sim.scenarios import Outcome
from wakeup_sim.sqs import Message, Queue
from wakeup_sim.world import World


@dataclass(frozen=True)
class WakeTimeline:
    """One wake's moments (epoch seconds; the simulator's on its virtual clock)."""

    due: float
    sent: float
    received: float  # by the event source
    handed: float  # its batch, to an invocation of the caller
    invoked: float  # the environment took it (after its start, when cold)
    called: float  # the host's call
    cold: bool
    batch: int  # the batch's size

    @property
    def visible(self) -> float:
        """When the message's delay ended: `wakeup.triggers.Triggers.send`'s whole seconds."""
        return self.sent + queue_delay_s(self.due - self.sent)


# (name, from, to): each stage's length, and each moment's place against the wake's time.
STAGES = [
    ("visible to received", "visible", "received"),
    ("received to handed over", "received", "handed"),
    ("handed over to invoked", "handed", "invoked"),
    ("invoked to host called", "invoked", "called"),
]
MOMENTS = ["visible", "received", "handed", "invoked", "called"]


def local_timelines(trace: Path, dues: dict[str, float], calls: dict[str, float]) -> list[WakeTimeline]:
    """From the local stack's trace: `dues` and `calls` by instance id (the host's first call)."""
    found = []
    for line in trace.read_text().splitlines():
        batch = json.loads(line)
        if "invoked" not in batch:
            continue  # an invocation that failed before it reached an environment
        for record in batch["records"]:
            instance_id = record["body"].get("instance_id")
            if instance_id not in dues or instance_id not in calls:
                continue
            found.append(
                WakeTimeline(
                    due=dues[instance_id],
                    sent=record["sent"],
                    received=record["received"],
                    handed=batch["handed"],
                    invoked=batch["invoked"],
                    called=calls[instance_id],
                    cold="cold_start" in batch,
                    batch=len(batch["records"]),
                )
            )
    return found


class _SimTrace:
    def __init__(self, since: float) -> None:
        self.since = since
        self.received: dict[int, float] = {}
        self.batches: list[dict[str, Any]] = []
        self._current: dict[Any, dict[str, Any]] = {}
        self.cpu: list[tuple[float, int, float]] = []  # from `since`: (when, id of the processor, CPU time)
        self.background: list[tuple[float, float]] = []  # (when, the other work's CPU time so far)

    def background_cores(self, start: float, end: float) -> float:
        """The cores the machine's other work had between two moments, on average."""
        before = max((b for b in self.background if b[0] <= start), default=(start, 0.0))
        after = max((b for b in self.background if b[0] <= end), default=(end, 0.0))
        return (after[1] - before[1]) / (end - start) if end > start else 0.0

    def cpu_by_kind(self, world: World, until: float) -> dict[str, float]:
        """The CPU time each part of the simulated machine used from `since` to `until` (by when the
        work began), named as the local stack's parts are."""
        kinds = {id(e.cpu): "environments" for e in world.caller_function.idle}
        kinds |= {id(e.cpu): f"{f.name} (not the caller)" for f in world.functions[1:] for e in f.idle}
        kinds[id(world.service_cpu)] = "moto"
        kinds[id(world.stack_cpu)] = "stack"
        used: dict[str, float] = {}
        for when, key, seconds in self.cpu:
            if when > until:
                continue
            kind = kinds.get(key, "other")
            used[kind] = used.get(kind, 0.0) + seconds
        return used


@contextmanager
def traced(since: float) -> Iterator[_SimTrace]:
    """The simulator's events, for the runs made within: each message's first receive, each
    batch's hand-over, its environment (cold or warm), and when its handler started; and from
    `since`, the CPU each processor used."""
    trace = _SimTrace(since)
    receive, invoke, function_invoke, share = Queue.receive, EventSource._invoke, Function.invoke, Cpu._share
    advance = Machine._advance

    def traced_advance(self: Machine) -> None:
        advance(self)
        trace.background.append((self.engine.now, self.background_s))

    def traced_share(self: Cpu, took: float) -> None:
        if self.engine.now >= trace.since:
            trace.cpu.append((self.engine.now, id(self), took))
        share(self, took)

    handler = World._caller_handler

    def traced_receive(self: Queue, count: int = 10) -> list[Message]:
        taken = receive(self, count)
        for message in taken:
            trace.received.setdefault(message.id, self.engine.now)
        return taken

    def traced_invoke(self: EventSource, batch: list[Message]) -> None:
        trace._current[getcurrent()] = record = {"handed": self.engine.now, "messages": list(batch)}
        try:
            invoke(self, batch)
        finally:
            trace.batches.append(trace._current.pop(getcurrent(), record))

    def traced_function_invoke(self: Function, payload: Any, hops: int = 0) -> Any:
        record = trace._current.get(getcurrent())
        if record is not None and "cold" not in record:
            record["cold"] = not self.idle
        return function_invoke(self, payload, hops)

    def traced_handler(self: World, payload: Any) -> Any:
        record = trace._current.get(getcurrent())
        if record is not None:
            record["invoked"] = self.engine.now
        return handler(self, payload)

    Cpu._share = traced_share  # type: ignore[method-assign]
    Machine._advance = traced_advance  # type: ignore[method-assign]
    Queue.receive = traced_receive  # type: ignore[method-assign]
    EventSource._invoke = traced_invoke  # type: ignore[method-assign]
    Function.invoke = traced_function_invoke  # type: ignore[method-assign]
    World._caller_handler = traced_handler  # type: ignore[method-assign]
    try:
        yield trace
    finally:
        Queue.receive, EventSource._invoke, Function.invoke = receive, invoke, function_invoke  # type: ignore[method-assign]
        World._caller_handler = handler  # type: ignore[method-assign]
        Cpu._share = share  # type: ignore[method-assign]
        Machine._advance = advance  # type: ignore[method-assign]


def simulated_timelines(trace: _SimTrace, outcome: Outcome) -> list[WakeTimeline]:
    dues = {w.instance_id: w.at for w in outcome.wakes}
    calls = outcome.world.hosts.calls
    found = []
    for batch in trace.batches:
        if "invoked" not in batch:
            continue
        for message in batch["messages"]:
            instance_id = json.loads(message.body)["instance_id"]
            due = dues.get(instance_id)
            if due is None or not calls.get(instance_id):
                continue
            found.append(
                WakeTimeline(
                    due=due,
                    sent=message.sent_at,
                    received=trace.received[message.id],
                    handed=batch["handed"],
                    invoked=batch["invoked"],
                    called=calls[instance_id][0].started,
                    cold=bool(batch.get("cold")),
                    batch=len(batch["messages"]),
                )
            )
    return found


def _ms(values: list[float], q: float) -> str:
    return f"{percentile(values, q) * 1000:.0f}" if values else "-"


def stage_table(local: list[WakeTimeline], simulated: list[WakeTimeline]) -> str:
    """Each moment against the wake's time and each stage's length: p50 / p99 in ms, both sides."""
    rows = ["| stage (ms, p50 / p99) | local stack | simulator |", "| --- | --- | --- |"]
    for moment in MOMENTS:
        sides = []
        for timelines in (local, simulated):
            values = [getattr(t, moment) - t.due for t in timelines]
            sides.append(f"{_ms(values, 50)} / {_ms(values, 99)}")
        rows.append(f"| {moment}, from the wake's time | {sides[0]} | {sides[1]} |")
    for name, start, end in STAGES:
        sides = []
        for timelines in (local, simulated):
            values = [getattr(t, end) - getattr(t, start) for t in timelines]
            sides.append(f"{_ms(values, 50)} / {_ms(values, 99)}")
        rows.append(f"| {name} | {sides[0]} | {sides[1]} |")
    counts: list[tuple[str, Callable[[list[WakeTimeline]], int]]] = [
        ("batches", lambda ts: len({(t.handed, t.invoked) for t in ts})),
        ("of them cold starts", lambda ts: len({(t.handed, t.invoked) for t in ts if t.cold})),
        ("wakes in a cold start's batch", lambda ts: sum(1 for t in ts if t.cold)),
    ]
    for label, count in counts:
        rows.append(f"| {label} | {count(local)} | {count(simulated)} |")
    return "\n".join(rows)


def cpu_table(local: dict[str, float], simulated: dict[str, float]) -> str:
    """The CPU time each part used, from two seconds before the wakes' time to the last call."""
    rows = ["| CPU time from 2 s before the wakes' time (s) | local stack | simulator |", "| --- | --- | --- |"]
    for kind in sorted(local.keys() | simulated.keys()):
        rows.append(f"| {kind} | {local.get(kind, 0.0):.2f} | {simulated.get(kind, 0.0):.2f} |")
    rows.append(f"| all | {sum(local.values()):.2f} | {sum(simulated.values()):.2f} |")
    return "\n".join(rows)
