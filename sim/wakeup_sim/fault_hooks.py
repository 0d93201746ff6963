"""The faults injected around a request or a delivery, rather than at one attempt of it: what AWS
delivers twice, applies late or out of order, or reads stale (docs/faults.md, "How each fault
behaves"). `wakeup_sim.fault_matrix.install` wires them; `wakeup_sim.faults` draws them."""

import json
import random
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from greenlet import getcurrent

from wakeup.table.items import dump, load
from wakeup_sim.fault_records import RECORD_OPERATION, Records
from wakeup_sim.faults import LATE_APPLY_S, READ_TIMEOUT_S, STALE_S, FaultInjector, Kind
from wakeup_sim.lambdas import Function
from wakeup_sim.scheduler import Scheduler

# Scheduler's duplicate firing, and a firing after a delete, come this long after the schedule's
# time at most.
DUPLICATE_WITHIN_S = 5.0


class Deliveries:
    """SQS's and Scheduler's requests as `FaultyClient` sends them when the row draws a delivery
    fault: a message sent once is delivered twice; a schedule fires twice, or once after its
    delete; an update's first attempt lands after the client's next update (its client timed
    out on it and botocore's retry applied first)."""

    def __init__(self, faults: FaultInjector, scheduler: Scheduler, rng: random.Random) -> None:
        self.faults, self.scheduler, self.rng = faults, scheduler, rng
        self.times: dict[str, float] = {}  # schedule -> its time, as the last write set it

    def send(self, place: str, kind: Kind, method: Callable[..., Any], kwargs: dict[str, Any]) -> Callable[[], Any]:
        engine = self.faults.engine

        def twice() -> Any:
            answer = method(**kwargs)
            self.faults.note(f"{place} {kind.value}", hit=False)
            if place == "sqs:SendMessage":
                method(**kwargs)  # at-least-once: a second copy of the message
            else:
                self._fire_again(kwargs["Name"], kwargs["Target"]["Input"], self._at(kwargs))
            return answer

        def after_delete() -> Any:
            name = kwargs["Name"]
            current = self.scheduler.schedules.get(name)
            answer = method(**kwargs)
            if current is not None:
                self.faults.note(f"{place} {kind.value}", hit=False)
                self._fire_again(name, current[1], self.times.get(name, engine.now))
            return answer

        def out_of_order() -> Any:
            # Its first attempt timed out at the client, botocore's retry applied, and the first
            # lands after the client's next update (a schedule gone, or its time past, refuses it).
            self.faults.note(f"{place} {kind.value}", hit=False)
            lands = engine.now + READ_TIMEOUT_S + self.rng.random() * LATE_APPLY_S
            engine.spawn(_land, self.faults, method, kwargs, when=lands)
            engine.sleep(READ_TIMEOUT_S)
            return method(**kwargs)

        chosen = {Kind.TWICE: twice, Kind.AFTER_DELETE: after_delete, Kind.OUT_OF_ORDER: out_of_order}[kind]

        def sent() -> Any:
            answer = chosen()
            if "ScheduleExpression" in kwargs:
                self.times[kwargs["Name"]] = self._at(kwargs)
            return answer

        return sent

    @staticmethod
    def _at(definition: dict[str, Any]) -> float:
        expression = definition["ScheduleExpression"]
        return datetime.fromisoformat(expression[3:-1]).replace(tzinfo=UTC).timestamp()

    def _fire_again(self, name: str, payload: str, at: float) -> None:
        engine = self.faults.engine
        when = max(at, engine.now) + self.rng.random() * DUPLICATE_WITHIN_S
        engine.at(when, self.scheduler.target.invoke_async, json.loads(payload))


def events_twice(faults: FaultInjector, function: Function) -> None:
    """Lambda's asynchronous invocations of `function` (Scheduler's, the sweeper's tick), an event
    now and then run twice, as Lambda's documentation allows."""
    inner = function.invoke_async
    place = f"function:{function.name}"

    def invoke_async(payload: Any) -> None:
        inner(payload)
        if faults.draws(place, (Kind.TWICE,)) is not None:
            faults.injected[f"{place} {Kind.TWICE.value}"] += 1
            faults.engine.at(faults.engine.now + faults.rng.random() * DUPLICATE_WITHIN_S, inner, payload)

    function.invoke_async = invoke_async  # type: ignore[method-assign]


class LateWrites:
    """The store's DynamoDB client, whose guarded writes (`UpdateItem`) are now and then applied
    late: the first attempt times out at the client, botocore's retry applies, and the first
    attempt lands afterwards, up to `LATE_APPLY_S` later, as it was sent: the very request, its
    condition and values those of the moment it was sent (a condition that no longer holds
    refuses it, as DynamoDB would). A call's record's late attempt is kept by `records`: its client
    timed out on it, and it applied when it landed, if it did."""

    def __init__(self, faults: FaultInjector, inner: Any, records: Records | None = None) -> None:
        self.faults, self.inner, self.records = faults, inner, records or Records(faults)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def update_item(self, **request: Any) -> Any:
        place = "dynamodb:UpdateItem"
        if self.faults.draws(place, (Kind.APPLIES_LATE,)) is None:
            return self.inner.update_item(**request)
        self.faults.note(f"{place} {Kind.APPLIES_LATE.value}")
        attempt = self.records.begin(RECORD_OPERATION)
        lands = self.faults.engine.now + READ_TIMEOUT_S + self.faults.rng.random() * LATE_APPLY_S
        landed = self.records.landed(attempt)
        self.faults.engine.spawn(_land, self.faults, self.inner.update_item, request, landed, when=lands)
        self.faults.engine.sleep(READ_TIMEOUT_S)  # the first attempt's timeout, then the retry
        self.records.end(failed=True)
        return self.inner.update_item(**request)


def _land(
    faults: FaultInjector,
    write: Callable[..., Any],
    request: dict[str, Any],
    applied: Callable[[], None] = lambda: None,
) -> None:
    task = getcurrent()
    faults.quiet.add(task)
    try:
        write(**request)
    except Exception:  # noqa: BLE001, S110 (a refused condition: the late write did not apply)
        return
    finally:
        faults.quiet.discard(task)
    applied()


def stale_reads(faults: FaultInjector, store: Any) -> None:
    """The sweeper's reads of the index and its eventually consistent reads (`overdue`), and the
    signing versions' eventually consistent read, now and then a view up to `STALE_S` old: read,
    then acted on that much later."""

    def stale(name: str, place: str) -> None:
        inner = getattr(store, name)

        def read(*args: Any) -> Any:
            answer = inner(*args)
            if faults.draws(place, (Kind.STALE,)) is not None:
                faults.note(f"{place} {Kind.STALE.value}")
                faults.engine.sleep(faults.rng.random() * STALE_S)
            return answer

        setattr(store, name, read)

    stale("overdue", "dynamodb:Query")
    stale("signing_versions", "dynamodb:GetItem")


class UnprocessedBatches:
    """The store's DynamoDB client, whose `BatchGetItem` now and then leaves some keys unprocessed
    (DynamoDB does so past 16 MB or under throttling; the caller asks for them again), and whose
    `BatchWriteItem` leaves some puts unmade, returned in `UnprocessedItems` (DynamoDB does so under
    throttling or an internal error: "BatchWriteItem", DynamoDB API reference)."""

    def __init__(self, faults: FaultInjector, inner: Any) -> None:
        self.faults, self.inner = faults, inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def batch_get_item(self, RequestItems: dict[str, Any]) -> dict[str, Any]:  # noqa: N803
        answer: dict[str, Any] = self.inner.batch_get_item(RequestItems=RequestItems)
        place = "dynamodb:BatchGetItem"
        ((table, request),) = RequestItems.items()
        items = answer["Responses"][table]
        if len(items) < 1 or self.faults.draws(place, (Kind.UNPROCESSED,)) is None:
            return answer
        self.faults.note(f"{place} {Kind.UNPROCESSED.value}")
        left = self.faults.rng.randint(1, len(items))
        answer["Responses"][table] = items[left:]
        # Its keys typed, as DynamoDB returns them and the store sends them again (the items
        # answered are as the in-memory client gives them, loaded already).
        keys = [dump({"pk": load(item)["pk"]}) for item in items[:left]]
        answer["UnprocessedKeys"] = {table: {**request, "Keys": keys}}
        return answer

    def batch_write_item(self, RequestItems: dict[str, Any]) -> dict[str, Any]:  # noqa: N803
        place = "dynamodb:BatchWriteItem"
        ((table, puts),) = RequestItems.items()
        if self.faults.draws(place, (Kind.UNPROCESSED,)) is None:
            return dict(self.inner.batch_write_item(RequestItems=RequestItems))
        self.faults.note(f"{place} {Kind.UNPROCESSED.value}")
        # Some puts, or all, left unmade: only the others reach the table.
        left = self.faults.rng.randint(1, len(puts))
        answer: dict[str, Any] = (
            dict(self.inner.batch_write_item(RequestItems={table: puts[left:]})) if left < len(puts) else {}
        )
        answer["UnprocessedItems"] = {table: puts[:left]}
        return answer
