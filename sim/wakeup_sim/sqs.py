"""The caller's queue: delays in whole seconds, visibility, receives and deletes.

From "Amazon SQS delay queues" and "Amazon SQS visibility timeout" (SQS developer guide): a message
sent with `DelaySeconds` (0 to 900, whole seconds) is invisible until then; a received message is
invisible for the queue's visibility timeout and comes back unless deleted; after
`maxReceiveCount` receives it moves to the dead-letter queue. A receive returns at most 10.
"""

from __future__ import annotations

import itertools
import json
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from wakeup.arrival import SQS_MAX_DELAY_S
from wakeup_awsfacts.quotas import SQS_MAX_RECEIVE
from wakeup_sim.engine import Engine


@dataclass
class Message:
    id: int
    body: str
    sent_at: float
    receives: int = 0
    hops: int = 0  # SQS-invoked invocations of the caller that led to this message
    handle: int = 0  # a new handle per receive, so a stale delete does nothing


@dataclass
class Queue:
    engine: Engine
    visibility_timeout_s: float
    max_receive_count: int = 5
    latency_s: float = 0.0
    requests: Counter[str] = field(default_factory=Counter)
    dead_letters: list[Message] = field(default_factory=list)
    # When each invisible message is due to be visible again: the time -> (handle, message) in the
    # order they were hidden. Each time has an event of its own at it (`_hide`), which runs after
    # every earlier time's: what is left to reveal when it runs is only what is due at it exactly.
    # A time is here until its event runs.
    _invisible: dict[float, list[tuple[int, Message]]] = field(default_factory=dict)
    _visible: deque[Message] = field(default_factory=deque)  # oldest first: a receive takes from the left
    _ids: itertools.count[int] = field(default_factory=itertools.count)
    _handles: itertools.count[int] = field(default_factory=itertools.count)
    live: int = 0
    # Called when a message becomes visible (the event source's pollers wait on it).
    on_visible: Callable[[], None] = lambda: None

    def send(self, body: str, delay_s: int, hops: int = 0) -> None:
        if not 0 <= delay_s <= SQS_MAX_DELAY_S or int(delay_s) != delay_s:
            raise ValueError("SQS delays are whole seconds from 0 to 900")
        self.requests["sqs:SendMessage"] += 1
        message = Message(next(self._ids), body, self.engine.now, hops=hops)
        self.live += 1
        self._hide(message, self.engine.now + self.latency_s + delay_s)

    def _hide(self, message: Message, until: float) -> None:
        hidden = self._invisible.get(until)
        if hidden is None:
            # One event a time, not one a message (a receive hides its ten at one time).
            self._invisible[until] = [(message.handle, message)]
            self.engine.at(until, self._reveal)
        else:
            hidden.append((message.handle, message))

    def _reveal(self) -> None:
        revealed = False
        for handle, message in self._invisible.pop(self.engine.now, ()):
            if message.handle != handle:
                continue  # deleted, or received again since
            if message.receives >= self.max_receive_count:
                self.dead_letters.append(message)
                self.live -= 1
                continue
            self._visible.append(message)
            revealed = True
        if revealed:
            self.on_visible()

    def visible(self) -> int:
        return len(self._visible)

    def receive(self, count: int = SQS_MAX_RECEIVE) -> list[Message]:
        """Up to `count` (at most 10) visible messages, now invisible for the visibility timeout.

        Only a receive that returns messages is counted as a request: the event source's receives
        are long polls, which SQS answers when messages come (to one of the polls waiting) or when
        the poll's wait ends; those that end empty are counted by the event source."""
        visible = self._visible
        taken = [visible.popleft() for _ in range(min(count, SQS_MAX_RECEIVE, len(visible)))]
        if taken:
            self.requests["sqs:ReceiveMessage"] += 1
        for message in taken:
            message.receives += 1
            message.handle = next(self._handles) + 1
            self._hide(message, self.engine.now + self.visibility_timeout_s)
        return taken

    def delete(self, messages: list[Message]) -> None:
        """A DeleteMessageBatch (up to 10 a request)."""
        for start in range(0, len(messages), SQS_MAX_RECEIVE):
            self.requests["sqs:DeleteMessageBatch"] += 1
            for message in messages[start : start + SQS_MAX_RECEIVE]:
                if message.handle > 0:
                    message.handle = -1
                    self.live -= 1

    def pending(self) -> int:
        """Messages sent and neither deleted nor dead-lettered."""
        return self.live


class SqsClient:
    """What `wakeup.triggers.Triggers` calls on its SQS client, against one queue, taking time."""

    def __init__(self, queue: Queue, request: Callable[[str], None], hops: Callable[[], int]) -> None:
        self.queue = queue
        self._request = request
        self._hops = hops

    def send_message(self, QueueUrl: str, MessageBody: str, DelaySeconds: int = 0) -> dict[str, Any]:  # noqa: N803
        self._request("sqs:SendMessage")
        json.loads(MessageBody)  # the service sends JSON: a slip here would be a bug to see at once
        self.queue.send(MessageBody, DelaySeconds, hops=self._hops() + 1)
        return {"MessageId": "simulated"}
