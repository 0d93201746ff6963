"""Every request within the invocation's time left (issue 37, hole 3): a request whose retries could
outlast what Lambda's context says is left is not sent, and the function stops there cleanly, its
unfinished work left to a retry or to the next sweep.

The real handlers, their clients made by `wakeup.aws.client` (the factories), over the local
stack's moto; a context whose time left runs down by a step each time it is read (each request
reads it once, before it is sent).
"""

from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import timedelta

import pytest
from api_reply import Reply
from moto_env import Deployed, LambdaContext, deployed, imported_handler
from sample_events import PUT_WAKE, api_event, load_event

from wakeup import factories
from wakeup.deadlines import AWS_REQUEST
from wakeup.logic.sweeper import UnreadShardsError
from wakeup.model import Trigger
from wakeup.table.items import PENDING_SHARDS, pending_shard
from wakeup.times import format_time, now
from wakeup.tokens import TokenKind, hash_token, mint

sweeper_handler = imported_handler("sweeper")
wake_handler = imported_handler("wake")

URL = "http://127.0.0.1:9/unused"  # nothing is called here


@dataclass
class RunningDown(LambdaContext):
    """A context whose time left is `left_s` at its first reading and `step_s` less at each next."""

    left_s: float = 30.0
    step_s: float = 0.0
    readings: list[float] = field(default_factory=list)

    def get_remaining_time_in_millis(self) -> int:
        left = self.left_s - self.step_s * len(self.readings)
        self.readings.append(left)
        return int(left * 1000)


@pytest.fixture
def env(endpoint: str, monkeypatch: pytest.MonkeyPatch, metrics_namespace: None) -> Iterator[Deployed]:
    """Resources of the test's own (what one sweep finds overdue must be only its test's), in the
    environment the factories read them from, as on AWS."""
    with deployed(endpoint) as made:
        monkeypatch.setenv("AWS_ENDPOINT_URL", endpoint)
        for name, value in made.settings.model_dump(by_alias=True).items():
            monkeypatch.setenv(name, str(value))
        factories.reset()  # the handlers' clients made afresh, by wakeup.aws.client
        yield made
        factories.reset()


def lost_wakes(env: Deployed, count: int, shards_after: int) -> list[Trigger]:
    """Wakes due two minutes ago, written but never armed, each in a shard after `shards_after`."""
    found: list[Trigger] = []
    while len(found) < count:
        instance_id = env.new_instance(URL)
        if int(pending_shard(instance_id)) > shards_after:
            found.append(env.new_wake(instance_id, now() - timedelta(minutes=2)))
    return found


def test_a_sweep_stops_at_the_first_request_its_time_left_cannot_hold_and_the_next_sweep_rearms_the_rest(
    env: Deployed,
) -> None:
    # given lost wakes in the shards after the first, and an invocation whose time left, read
    # before each request, holds the first shard's query and not the second's
    lost = lost_wakes(env, 3, shards_after=1)
    short = RunningDown(left_s=AWS_REQUEST.worst_s + 0.5, step_s=1.0)
    # when the sweeper runs
    with pytest.raises(UnreadShardsError) as unswept:
        sweeper_handler.lambda_handler(load_event("sweeper_tick.json"), short)
    # then it stops at the refused request: no other is tried (each would be refused too), the
    # shards it did not reach are named, and the wakes in them are still pending, armed by nobody
    assert [left for left in short.readings if left < AWS_REQUEST.worst_s] == [short.readings[-1]]
    assert len(short.readings) == 2
    assert str(unswept.value) == f"shards of the pending-wakes index not read: {list(range(1, PENDING_SHARDS))}"
    assert env.queued() == []
    assert all(getattr(env.store.get_instance(wake.instance_id), "pending", False) for wake in lost)
    # and the next sweep, with its time, re-arms every one
    result = sweeper_handler.lambda_handler(load_event("sweeper_tick.json"), LambdaContext())
    assert result == {"overdue": 3, "rearmed": 3, "failed": 0}
    assert sorted(env.queued(), key=lambda t: t.instance_id) == sorted(lost, key=lambda t: t.instance_id)


def test_a_registration_whose_invocation_has_no_time_for_its_requests_is_answered_503_and_nothing_is_written(
    env: Deployed,
) -> None:
    # given a registered instance, and an invocation with less time left than one request's
    # retries may take
    token = mint(TokenKind.INSTANCE)
    account = env.store.create_account("functional", hash_token(mint(TokenKind.ACCOUNT)), now())
    instance_id = env.store.register_instance(account.id, URL, hash_token(token), now()).instance.id
    event = api_event(PUT_WAKE, token=token, body={"at": format_time(now() + timedelta(minutes=5))})
    short = RunningDown(left_s=AWS_REQUEST.worst_s - 0.5)
    # when the host registers its wake
    reply = Reply.of(wake_handler.lambda_handler(event, short))
    # then it is told to retry (no request sent, so none half done), and nothing was written
    assert reply.status == 503 and set(reply.body) == {"error"}
    instance = env.store.get_instance(instance_id)
    assert instance is not None and not instance.pending and instance.reg is None
    assert env.queued() == []
    # and the same request, with its time, registers the wake
    assert Reply.of(wake_handler.lambda_handler(event, RunningDown())).status == 204
    instance = env.store.get_instance(instance_id)
    assert instance is not None and instance.pending
