"""Issue 3 end to end: wakes within the SQS horizon delivered by the local stack to a real host.

Times are wall-clock seconds (`time.time()`), the clock the service and the host both read.
"""

import statistics
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from wakes_support import (
    Instances,
    StackAws,
    StackLog,
    as_registered,
    far_wake_settings,
    iso,
    start_caller_environments,
    warm_caller,
)

from support.api import Api, past_busy
from support.host import WakeHost, closed_port_url, hang, redirect
from support.stack_process import STACK_SETTINGS, MakeStack, StackProcess
from support.waiting import wait_until
from wakeup.arrival import EARLY_REARM_S
from wakeup_awsfacts.template import load_template

# How late a call may be (DESIGN section 3), and how long to watch for a call that must not come.
ON_TIME_S = 1.0
# How late one wake's call may be in a test that runs beside five other workers' stacks on two
# cores: the promise's second, and a second more for the loaded machine (CI saw 1.07 s).
ON_TIME_LOADED_S = ON_TIME_S + 1.0
# The session stack's claim lease.
CLAIM_LEASE_S = float(STACK_SETTINGS["WAKEUP_CLAIM_LEASE_S"])
# How long to watch for a call that must not come. A second call could only follow the first claim's
# end: its lease, plus the time a claim is made ahead of the wake (EARLY_REARM_S), after the first
# call at most; and a loaded machine's second more.
QUIET_S = CLAIM_LEASE_S + EARLY_REARM_S + ON_TIME_LOADED_S
# The tolerance for the last of a hundred wakes at one second, by the service's own clock.
BURST_P99_S = 2 * ON_TIME_S
# How far ahead a burst's wakes are due: registering them all, on a loaded machine, comes first.
BURST_LEAD_S = 10
# The same for the 100-wake burst, which runs alone (make pytest's last phase): registering 160
# took under two seconds here, three with another program keeping one core busy.
ALONE_BURST_LEAD_S = 5
# How long the caller's event source gathers a batch (template.yaml's CallerBatchingWindowSeconds,
# at its default): a message due at once waits it out, one that comes ahead of its time does not.
TEMPLATE = load_template(Path(__file__).parents[2] / "template.yaml")
BATCHING_WINDOW_S = float(TEMPLATE.parameters["CallerBatchingWindowSeconds"]["Default"])


@pytest.fixture
def instances(api: Api) -> Iterator[Instances]:
    made = Instances(api)
    yield made
    made.remove_all()


def test_a_wake_three_seconds_ahead_is_called_once_on_time(instances: Instances, host: WakeHost) -> None:
    # given
    warm_caller(instances, 1)
    instance_id, token = instances.new(host.url)
    at = iso(time.time() + 3)
    # when
    instances.wake(token, at)
    # then
    [call] = host.wait_for_calls(1, timeout=10)
    assert as_registered(at) <= call.wall <= as_registered(at) + ON_TIME_LOADED_S
    assert call.path == "/wake"
    assert call.headers["wakeup-instance"] == instance_id
    assert call.headers["user-agent"].startswith("wakeup/")
    body = instances.wait_for(instance_id, lambda b: b["calledAt"] is not None, "calledAt set")
    assert (body["at"], body["attempts"], body["lastError"]) == (at, 0, None)
    host.assert_no_calls_beyond(1, during=QUIET_S)


def test_a_wake_in_the_past_is_called_within_the_batching_window_and_a_second(
    instances: Instances, host: WakeHost
) -> None:
    # A wake due at once has no lead to gather its batch in: its message waits out the event
    # source's batching window (the price of full batches at a busy second, docs/scaling.md).
    warm_caller(instances, 1)
    _, token = instances.new(host.url)

    instances.wake(token, "2020-01-01T00:00:00Z")
    answered = time.time()

    [call] = host.wait_for_calls(1, timeout=5)
    assert call.wall - answered <= BATCHING_WINDOW_S + ON_TIME_LOADED_S


def test_a_failing_host_is_retried_after_1_2_and_4_seconds_then_succeeds(instances: Instances, host: WakeHost) -> None:
    # given a host that answers 503 three times
    host.script(503, 503, 503)
    instance_id, token = instances.new(host.url)
    # when
    instances.wake(token, iso(time.time()))
    # then the failures show while the retries go on
    host.wait_for_calls(1, timeout=5)
    failing = instances.wait_for(instance_id, lambda b: b["attempts"] >= 1, "a failed attempt recorded")
    assert failing["lastError"] == "HTTP 503"
    assert failing["calledAt"] is None
    calls = host.wait_for_calls(4, timeout=20)
    gaps = [later.monotonic - earlier.monotonic for earlier, later in zip(calls, calls[1:], strict=False)]
    for gap, backoff in zip(gaps, [1, 2, 4], strict=True):
        # Each retry is due its backoff after the failure recorded, and called within a second
        # of that (the margin: the recording itself, on a busy machine).
        assert backoff <= gap <= backoff + ON_TIME_LOADED_S, gaps
    body = instances.wait_for(instance_id, lambda b: b["calledAt"] is not None, "the success recorded")
    assert (body["attempts"], body["lastError"]) == (0, None)
    host.assert_no_calls_beyond(4, during=QUIET_S)


def test_a_redirect_is_a_failure_and_is_not_followed(instances: Instances, host: WakeHost) -> None:
    host.script(redirect(f"{host.url}/elsewhere"))
    instance_id, token = instances.new(host.url)

    instances.wake(token, iso(time.time()))

    failing = instances.wait_for(instance_id, lambda b: b["attempts"] == 1, "the redirect recorded")
    assert failing["lastError"] == "HTTP 302 (redirects are not followed)"
    calls = host.wait_for_calls(2, timeout=5)  # the retry, a second later
    assert [call.path for call in calls] == ["/wake", "/wake"]
    assert host.calls_to("/elsewhere") == []


def test_a_host_that_does_not_answer_in_time_shows_a_timeout(instances: Instances, host: WakeHost) -> None:
    # The session stack's call timeout is 2 s.
    host.script(hang(10))
    instance_id, token = instances.new(host.url)

    instances.wake(token, iso(time.time()))

    failing = instances.wait_for(instance_id, lambda b: b["attempts"] == 1, "the timeout recorded")
    assert failing["lastError"] == "timed out after 2 s"
    instances.wait_for(instance_id, lambda b: b["calledAt"] is not None, "the retry's success recorded")


def test_a_refused_connection_shows_as_such(instances: Instances) -> None:
    with closed_port_url() as url:
        instance_id, token = instances.new(url)
        instances.wake(token, iso(time.time()))
        failing = instances.wait_for(instance_id, lambda b: b["attempts"] >= 1, "the failure recorded")
    assert failing["lastError"] == "connection refused"


# The wakes replaced, deleted or moved below are 4 s ahead: a near wake's message comes one to two
# seconds early and its registration is claimed then, and a registration replaced after its claim
# may still be called once (DESIGN section 1), which these tests are not about.


def test_only_the_newest_of_replaced_wakes_is_called_once(instances: Instances, host: WakeHost) -> None:
    instance_id, token = instances.new(host.url)
    instances.wake(token, iso(time.time() + 4))
    newest = iso(time.time() + 6)
    instances.wake(token, newest)

    [call] = host.wait_for_calls(1, timeout=10)

    assert as_registered(newest) <= call.wall <= as_registered(newest) + ON_TIME_LOADED_S
    host.assert_no_calls_beyond(1, during=QUIET_S)


def test_a_wake_replaced_by_one_days_away_is_not_called(
    instances: Instances, host: WakeHost, stack: StackProcess
) -> None:
    log = StackLog(stack)
    instance_id, token = instances.new(host.url)
    instances.wake(token, iso(time.time() + 4))
    instances.wake(token, iso(time.time() + 3 * 86400))

    log.wait_for("stale trigger dropped", instance_id)  # the near wake's one trigger, handled
    assert host.calls == []


def test_a_deleted_instance_is_not_called(instances: Instances, host: WakeHost, api: Api, stack: StackProcess) -> None:
    log = StackLog(stack)
    instance_id, token = instances.new(host.url)
    instances.wake(token, iso(time.time() + 4))

    assert api.delete(f"/wakeup/instances/{instance_id}").status_code == 204

    log.wait_for("stale trigger dropped", instance_id)  # the wake's one trigger, handled
    assert host.calls == []


def test_a_moved_instance_is_called_at_neither_url(
    instances: Instances, host: WakeHost, api: Api, stack: StackProcess
) -> None:
    log = StackLog(stack)
    instance_id, token = instances.new(host.url_for("old"))
    instances.wake(token, iso(time.time() + 4))

    moved = api.register(host.url_for("new"), token)

    assert moved.status_code == 200 and moved.json() == {"id": instance_id}
    log.wait_for("stale trigger dropped", instance_id)  # the wake's one trigger, handled
    assert host.calls == []
    assert instances.get(instance_id)["at"] is None


# The stack of the burst tests below: wakes BURST_LEAD_S ahead (and two seconds more) are near ones,
# through the caller's queue, as on the session stack; further ahead they go by schedule, and
# `start_caller_environments` starts the caller's environments with them.
BURST_HORIZON_S = BURST_LEAD_S + 3


@pytest.fixture
def burst_stack(make_stack: MakeStack) -> StackProcess:
    """A stack of the test's own, whose caller's environments the test starts first."""
    return make_stack(**far_wake_settings(BURST_HORIZON_S))


@pytest.fixture
def burst_instances(burst_stack: StackProcess) -> Iterator[Instances]:
    """Instances on `burst_stack` (not removed one by one: the stack is stopped with them)."""
    api = Api(burst_stack.url, burst_stack.account_token)
    yield Instances(api)
    api.close()


@pytest.mark.slow
def test_twenty_concurrent_wakes_make_one_call_at_the_time_finally_held(
    burst_stack: StackProcess, burst_instances: Instances, host: WakeHost
) -> None:
    # given 20 requests racing with times seconds ahead: far enough that they have all been
    # answered before the first time's message comes (up to two seconds early) and is claimed, as
    # a registration replaced after its claim may still be called once (DESIGN section 1); on a
    # loaded machine 20 at once took over two seconds
    instances = burst_instances
    start_caller_environments(burst_stack, instances, BURST_HORIZON_S)
    instance_id, token = instances.new(host.url)
    base = time.time() + BURST_LEAD_S
    times = [iso(base + n * 0.1) for n in range(20)]
    with ThreadPoolExecutor(max_workers=20) as pool:
        replies = list(pool.map(lambda at: past_busy(lambda: instances.api.wake(token, at)), times))
    assert {reply.status_code for reply in replies} == {204}
    assert time.time() < base - 2, "registering took too long for the test to mean anything"
    held = instances.get(instance_id)["at"]
    # when / then (waiting from now until well past the time held, however quick the registering)
    [call] = host.wait_for_calls(1, timeout=as_registered(held) - time.time() + 10)
    assert as_registered(held) <= call.wall <= as_registered(held) + ON_TIME_LOADED_S
    host.assert_no_calls_beyond(1, during=QUIET_S)


@pytest.fixture
def unbounded_stack(make_stack: MakeStack) -> StackProcess:
    """A stack whose SQS event source starts at its full concurrency (`WAKEUP_LOCAL_UNBOUNDED=1`):
    the service's own timing, without Lambda's ramp-up of five batches and 300 more a minute,
    which `make bench` measures. Its horizon is the burst's lead: `start_caller_environments`' far
    wakes go by schedule, the burst's by the caller's queue."""
    return make_stack(WAKEUP_LOCAL_UNBOUNDED="1", **far_wake_settings(ALONE_BURST_LEAD_S))


@pytest.fixture
def unbounded_instances(unbounded_stack: StackProcess) -> Iterator[Instances]:
    """Instances on `unbounded_stack`."""
    stack = unbounded_stack
    api = Api(stack.url, stack.account_token)
    # (its instances are not removed one by one: the stack is stopped with them after the test)
    yield Instances(api)
    api.close()


# A hundred calls at one instant hold the one-second goal on this machine's two cores only when no
# other stack shares them: beside three other workers' stacks its median once came 2 s late.
@pytest.mark.alone
@pytest.mark.slow
def test_a_hundred_wakes_due_at_one_second_are_each_called_once_on_time(
    unbounded_instances: Instances, unbounded_stack: StackProcess, host: WakeHost
) -> None:
    instances = unbounded_instances
    # given 100 instances on one host, each with a path of its own
    start_caller_environments(unbounded_stack, instances, ALONE_BURST_LEAD_S)
    made = dict(
        zip(
            [f"/i{n}/wake" for n in range(100)],
            instances.new_many([host.url_for(f"i{n}") for n in range(100)]),
            strict=True,
        )
    )
    at = iso(time.time() + ALONE_BURST_LEAD_S)
    with ThreadPoolExecutor(max_workers=10) as pool:
        replies = list(pool.map(lambda made_one: past_busy(lambda: instances.api.wake(made_one[1], at)), made.values()))
    assert {reply.status_code for reply in replies} == {204}
    assert time.time() < as_registered(at), "registering took too long for the test to mean anything"
    # when
    calls = host.wait_for_calls(100, timeout=30)
    # then each is called once, never early
    assert sorted(call.path for call in calls) == sorted(made)
    assert min(call.wall for call in calls) >= as_registered(at)

    # and on time by the service's own clock: the lateness each call's history keeps, taken as the
    # call starts (the host here, a thread of the busy test process, stamps a call later than that)
    # (kept after the host has answered: awaited)
    def lateness_of(instance_id: str) -> float:
        def recorded() -> list[dict[str, Any]]:
            return list(instances.api.get(f"/wakeup/instances/{instance_id}/attempts").json()["attempts"])

        [attempt] = wait_until(recorded, timeout=20, message=f"the call to {instance_id} in its history")
        return float(attempt["latenessMs"]) / 1000

    with ThreadPoolExecutor(max_workers=10) as pool:
        lateness = sorted(pool.map(lateness_of, [instance_id for instance_id, _ in made.values()]))
    p50 = statistics.median(lateness)
    p99 = lateness[98]
    print(f"\n100 wakes at one second: lateness p50 {p50 * 1000:.0f} ms, p99 {p99 * 1000:.0f} ms")
    assert lateness[0] >= 0
    # The median wake keeps the one-second goal; the last few of a hundred calls made at one
    # instant by ten caller environments and moto sharing this machine's two cores get up to twice
    # that (p99 108 ms here at a load average of 9). `make bench` measures the spread.
    assert p50 <= ON_TIME_S
    assert p99 <= BURST_P99_S
    # and none called twice: awaited until every trigger is handled, when no call can follow (the
    # host keeps a call as it comes, before the caller has its answer), or a call beyond the 100
    aws = StackAws(unbounded_stack)
    wait_until(
        lambda: len(host.calls) > 100 or aws.triggers_left() == 0,
        timeout=30,
        interval=0.1,
        message="every trigger handled",
    )
    host.assert_no_calls_beyond(100, during=0)


# -- at most one call: the claim ----------------------------------------------------------------


def test_a_caller_that_dies_mid_call_is_replaced_after_its_lease_never_sooner(
    instances: Instances, host: WakeHost, stack: StackProcess
) -> None:
    # given a wake 8 s ahead, and a caller that claimed it and died: its claim is in the table,
    # written long before the real caller can claim (its message comes up to two seconds early, and
    # claims up to EARLY_REARM_S ahead), and only where no claim is yet, so that a machine too slow
    # for that fails here, plainly, rather than racing the real caller below
    instance_id, token = instances.new(host.url)
    due = time.time() + 8
    instances.wake(token, iso(due))
    lease_end_ms = int((due + 3) * 1000)  # as stored: to the millisecond
    lease_end = lease_end_ms / 1000
    aws = StackAws(stack)
    stored = aws.stored_instance(instance_id)
    aws.dynamodb.update_item(
        TableName=stack.table_name,
        Key={"pk": {"S": f"INSTANCE#{instance_id}"}},
        UpdateExpression="SET claim_until = :until",
        ConditionExpression="reg = :reg AND attribute_not_exists(claim_until)",
        ExpressionAttributeValues={":until": {"N": str(lease_end_ms)}, ":reg": stored["reg"]},
    )
    # when the trigger comes, the claim is held: then
    [call] = host.wait_for_calls(1, timeout=20)
    assert lease_end <= call.wall <= lease_end + ON_TIME_LOADED_S + 1  # the re-sent trigger's whole-second delay
    instances.wait_for(instance_id, lambda b: b["calledAt"] is not None, "the call recorded")
    host.assert_no_calls_beyond(1, during=QUIET_S)


def test_a_message_delivered_twice_calls_once(instances: Instances, host: WakeHost, stack: StackProcess) -> None:
    # given a wake 3 s ahead, and two more copies of its message arriving with it
    log = StackLog(stack)
    instance_id, token = instances.new(host.url)
    instances.wake(token, iso(time.time() + 3))
    aws = StackAws(stack)
    body, queue_url = aws.trigger_body(instance_id), aws.caller_queue_url()
    for _ in range(2):
        aws.sqs.send_message(QueueUrl=queue_url, MessageBody=body, DelaySeconds=2)
    # then one call, and none when the copies that found the claim held come back after the lease:
    # each of the three messages is handled, one by the call and two dropped once it is recorded
    host.wait_for_calls(1, timeout=10)
    log.wait_for("stale trigger dropped", instance_id, count=2)
    assert len(host.calls) == 1


def test_calls_of_concurrent_deliveries_never_overlap(
    instances: Instances, host: WakeHost, stack: StackProcess
) -> None:
    # given a slow host and five copies of the trigger arriving at once
    log = StackLog(stack)
    host.script(hang(1.5))
    instance_id, token = instances.new(host.url)
    instances.wake(token, iso(time.time() + 3))
    aws = StackAws(stack)
    message = {"QueueUrl": aws.caller_queue_url(), "MessageBody": aws.trigger_body(instance_id), "DelaySeconds": 2}
    threads = [threading.Thread(target=aws.sqs.send_message, kwargs=message) for _ in range(5)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    # then the one call in flight is the only one: the five other messages are dropped once the
    # call is recorded
    host.wait_for_calls(1, timeout=10)
    log.wait_for("stale trigger dropped", instance_id, count=5)
    assert len(host.calls) == 1
