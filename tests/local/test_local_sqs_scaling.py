"""The SQS event source scales as Lambda's does ("Configuring scaling behavior for SQS event source
mappings"): five batches at once when messages appear, up to 300 more a minute while they remain,
never past `ScalingConfig.MaximumConcurrency`, back to five when the queue is empty; it refuses the
mappings Lambda refuses, and honours a batching window. Read from the poller's own counters."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from localstack_helpers import FIXTURE_DIR, FIXTURE_TEMPLATE, StartStack, fake_minter, wait_until

from wakeup_awsfacts.sqs_scaling import Scaling
from wakeup_awsfacts.template import Resolver, TemplateError, load_template
from wakeup_local.event_sources.sqs_poller import batching_of, scaling_of
from wakeup_local.event_sources.sqs_scaling import Concurrency, Counters, Sample
from wakeup_local.stack import LocalStack

# The fixture template: BurstFunction takes one record a batch from BurstQueue, 12 batches at once
# at most (ScalingConfig.MaximumConcurrency), each taking a quarter of a second.
BURST = "BurstFunction.Burst"
BURST_MAXIMUM = 12
# 300 a minute: one more batch every 0.2 s at most.
GROWTH_INTERVAL_S = 60 / 300


def send_due_together(stack: LocalStack, queue: str, count: int, delay_s: int = 2) -> None:
    """`count` messages that all come due at about the same moment (`delay_s` after being sent)."""
    url = stack.resources.queues[queue].url
    for start in range(0, count, 10):
        entries = [
            {"Id": str(n), "MessageBody": f"m{n}", "DelaySeconds": delay_s}
            for n in range(start, min(count, start + 10))
        ]
        stack.clients.sqs.send_message_batch(QueueUrl=url, Entries=entries)  # type: ignore[arg-type]


def counters(stack: LocalStack, name: str = BURST) -> Counters:
    return stack.event_source_counters()[name]


def worked(stack: LocalStack, messages: int, name: str = BURST) -> Counters | None:
    """The counters once `messages` have been handed over and every batch is done, else None."""
    found = counters(stack, name)
    return found if found.messages >= messages and found.in_flight == 0 else None


def assert_growth_within_the_rate(samples: list[Sample], interval_s: float) -> None:
    """From any moment to any later one, the allowance grew by no more than the rate allows."""
    changes = [
        sample for index, sample in enumerate(samples) if index == 0 or sample.target != samples[index - 1].target
    ]
    for index, earlier in enumerate(changes):
        for later in changes[index + 1 :]:
            allowed = int((later.at - earlier.at) / interval_s) + 1
            assert later.target - earlier.target <= allowed, (earlier, later)


def test_a_burst_of_200_is_worked_by_five_batches_first_then_more_at_lambdas_rate(start_stack: StartStack) -> None:
    # given
    stack = start_stack()
    # when 200 messages come due at once
    send_due_together(stack, "BurstQueue", 200)
    final = wait_until(lambda: worked(stack, 200), timeout=90, message="all 200 messages worked")
    # then it started with five batches at once, and only five until the first growth
    samples = final.samples
    assert samples[0].target == 5
    first_growth = next(index for index, sample in enumerate(samples) if sample.target > 5)
    # (how many of the five are busy before the first growth, 0.2 s on, depends on the machine's speed)
    assert max(sample.in_flight for sample in samples[:first_growth]) <= 5
    # grew no faster than 300 a minute, never past MaximumConcurrency, each batch within its allowance
    assert_growth_within_the_rate(samples, GROWTH_INTERVAL_S)
    assert all(sample.in_flight <= sample.target <= BURST_MAXIMUM for sample in samples)
    # and did scale out, to the maximum
    assert final.max_in_flight == BURST_MAXIMUM
    assert (final.batches, final.messages) == (200, 200)
    # once the queue is empty it goes back to five
    wait_until(lambda: counters(stack).target == 5, message="the mapping back to five batches")


def test_the_unbounded_setting_starts_at_the_maximum(start_stack: StartStack) -> None:
    stack = start_stack(env={"WAKEUP_LOCAL_UNBOUNDED": "1"})
    send_due_together(stack, "BurstQueue", 60)
    final = wait_until(lambda: worked(stack, 60), timeout=60, message="all 60 messages worked")
    assert all(sample.target == BURST_MAXIMUM for sample in final.samples)
    assert final.max_in_flight > 5


def test_records_within_the_batching_window_go_in_one_batch(start_stack: StartStack) -> None:
    stack = start_stack()
    url = stack.resources.queues["WindowQueue"].url
    # Two groups, the second 0.4 s after the first: within the mapping's 3 s window (the fixture's),
    # with room for a loaded machine's slow sends.
    send_due_together(stack, "WindowQueue", 5, delay_s=1)
    time.sleep(0.4)
    stack.clients.sqs.send_message_batch(
        QueueUrl=url, Entries=[{"Id": str(n), "MessageBody": f"late{n}", "DelaySeconds": 1} for n in range(5)]
    )
    final = wait_until(lambda: worked(stack, 10, "WindowFunction.Window"), timeout=30, message="10 messages worked")
    assert (final.batches, final.messages) == (1, 10)


# --- the scaling rules, on a clock of the test's own -----------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_standard_scaling_adds_one_batch_every_fifth_of_a_second_while_messages_remain() -> None:
    clock = Clock()
    concurrency = Concurrency(Scaling.standard(maximum_concurrency=8), clock)
    for _ in range(5):
        assert concurrency.acquire(timeout=0)
    assert not concurrency.acquire(timeout=0)  # five at first
    concurrency.messages_remain(1)
    clock.now += 0.19
    assert not concurrency.acquire(timeout=0)
    clock.now += 0.01
    assert concurrency.acquire(timeout=0)  # a sixth after 0.2 s
    clock.now += 10
    assert [concurrency.acquire(timeout=0) for _ in range(3)] == [True, True, False]  # capped at 8
    for _ in range(8):
        concurrency.release(worked=True)
    concurrency.queue_empty()
    assert concurrency.counters().target == 5


def test_growth_stops_when_the_queue_is_found_empty() -> None:
    clock = Clock()
    concurrency = Concurrency(Scaling.standard(), clock)
    concurrency.messages_remain(1)
    concurrency.queue_empty()
    clock.now += 60
    assert concurrency.counters().target == 5
    assert [concurrency.acquire(timeout=0) for _ in range(6)] == [True] * 5 + [False]


def test_provisioned_mode_keeps_ten_invokes_per_minimum_poller_and_grows_a_thousand_a_minute() -> None:
    clock = Clock()
    scaling = Scaling.provisioned(minimum_pollers=3, maximum_pollers=5)
    assert (scaling.initial, scaling.maximum) == (30, 50)
    concurrency = Concurrency(scaling, clock)
    concurrency.messages_remain(1)
    clock.now += 0.6  # 1,000 a minute: ten more in 0.6 s
    assert sum(concurrency.acquire(timeout=0) for _ in range(45)) == 40
    concurrency.queue_empty()
    assert concurrency.counters().target == 40  # never below what is in flight
    assert Scaling.provisioned(None, None) == Scaling(20, 2000, 1000)


def test_provisioned_mode_turned_on_raises_the_batches_ready_at_once() -> None:
    # given a mapping in standard mode with two batches at work
    clock = Clock()
    concurrency = Concurrency(Scaling.standard(), clock)
    assert concurrency.acquire(timeout=0) and concurrency.acquire(timeout=0)
    # when the planner's 3 pollers apply
    concurrency.rescale(Scaling.provisioned(minimum_pollers=3, maximum_pollers=5))
    # then 30 are ready at once, the two at work among them, and growth is provisioned mode's
    assert sum(concurrency.acquire(timeout=0) for _ in range(30)) == 28
    concurrency.messages_remain(1)
    clock.now += 0.6
    assert sum(concurrency.acquire(timeout=0) for _ in range(20)) == 10


def test_provisioned_mode_turned_off_goes_back_to_five_once_the_queue_is_empty() -> None:
    # given provisioned mode with 12 batches at work
    clock = Clock()
    concurrency = Concurrency(Scaling.provisioned(minimum_pollers=3, maximum_pollers=5), clock)
    assert all(concurrency.acquire(timeout=0) for _ in range(12))
    # when it is turned off
    concurrency.rescale(Scaling.standard())
    # then the batches at work finish, and standard mode's five are what an empty queue keeps
    assert concurrency.counters().target == 30
    for _ in range(12):
        concurrency.release(worked=True)
    concurrency.queue_empty()
    assert concurrency.counters().target == 5
    assert [concurrency.acquire(timeout=0) for _ in range(6)] == [True] * 5 + [False]


def test_the_function_bound_caps_the_mapping() -> None:
    assert Scaling.standard(maximum_concurrency=100, function_bound=3) == Scaling(3, 3, 300)
    # The mapping's own 1,250, below it the account's 1,000 by default (services-sqs-scaling).
    assert Scaling.standard() == Scaling(5, 1000, 300)
    assert Scaling.standard(account_concurrency=3000) == Scaling(5, 1250, 300)
    assert Scaling.standard(maximum_concurrency=100).unbounded() == Scaling(100, 100, 300)


# --- what Lambda refuses ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("properties", "fifo", "refusal"),
    [
        ({"BatchSize": 11}, False, "BatchSize of 11 .* needs MaximumBatchingWindowInSeconds of at least 1"),
        ({"BatchSize": 10_001, "MaximumBatchingWindowInSeconds": 1}, False, "BatchSize must be from 1 to 10000"),
        ({"BatchSize": 0}, False, "BatchSize must be from 1 to 10000"),
        ({"BatchSize": 11, "MaximumBatchingWindowInSeconds": 1}, True, "BatchSize must be from 1 to 10"),
        ({"MaximumBatchingWindowInSeconds": 301}, False, "from 0 to 300 seconds"),
        ({"MaximumBatchingWindowInSeconds": 1}, True, "not supported for FIFO queues"),
    ],
)
def test_batching_lambda_refuses_is_refused(properties: dict[str, Any], fifo: bool, refusal: str) -> None:
    with pytest.raises(TemplateError, match=f"F.Queue: .*{refusal}"):
        batching_of("F.Queue", properties, fifo=fifo)


def test_a_large_batch_with_a_window_is_accepted() -> None:
    assert batching_of("F.Queue", {"BatchSize": 500, "MaximumBatchingWindowInSeconds": 1}, fifo=False) == (500, 1.0)
    assert batching_of("F.Queue", {}, fifo=False) == (10, 0.0)


@pytest.mark.parametrize(
    ("properties", "refusal"),
    [
        (
            {"ScalingConfig": {"MaximumConcurrency": 5}, "ProvisionedPollerConfig": {"MinimumPollers": 2}},
            "cannot be used together",
        ),
        ({"ScalingConfig": {"MaximumConcurrency": 1}}, "MaximumConcurrency must be from 2 to 1000"),
        ({"ProvisionedPollerConfig": {"MinimumPollers": 1}}, "MinimumPollers must be from 2 to 200"),
        ({"ProvisionedPollerConfig": {"MinimumPollers": 9, "MaximumPollers": 4}}, "more than MaximumPollers"),
    ],
)
def test_scaling_lambda_refuses_is_refused(properties: dict[str, Any], refusal: str) -> None:
    with pytest.raises(TemplateError, match=refusal):
        scaling_of("F.Queue", properties, function_bound=None)


def test_a_template_lambda_would_refuse_does_not_start(tmp_path: Path) -> None:
    # the fixture template with a batch of 50 and no batching window
    template = FIXTURE_TEMPLATE.read_text().replace(
        "MaximumBatchingWindowInSeconds: 3", "MaximumBatchingWindowInSeconds: 0"
    )
    (tmp_path / "template.yaml").write_text(template)
    (tmp_path / "handlers").symlink_to(FIXTURE_DIR / "handlers")
    with pytest.raises(TemplateError, match="WindowFunction.Window: a BatchSize of 50 .* at least 1"):
        LocalStack(tmp_path / "template.yaml", account_minter=fake_minter).start()


# --- template.yaml's caller mapping ----------------------------------------------------------------

REPO_TEMPLATE = Path(__file__).resolve().parents[2] / "template.yaml"


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        # The defaults: provisioned mode off (the planner turns it on for a burst), so Lambda's
        # default scaling: five batches and 300 more a minute.
        ({}, Scaling(5, 1000, 300)),
        # 100 pollers ready and at most, ten batches each (the local stack then caps them at the
        # caller's own bound, as the function's concurrency caps a mapping on Lambda).
        ({"CallerMinimumPollers": "100"}, Scaling(1000, 1000, 1000)),
        ({"CallerMinimumPollers": "2", "CallerMaximumPollers": "4"}, Scaling(20, 40, 1000)),
    ],
)
def test_the_callers_mapping_follows_the_templates_poller_and_batch_parameters(
    overrides: dict[str, str], expected: Scaling
) -> None:
    template = load_template(REPO_TEMPLATE)
    resolver = Resolver(template, stack_name="t", parameter_overrides=overrides)
    properties = resolver.resolve(template.resources["CallerFunction"]["Properties"]["Events"]["CallerQueueMessages"])[
        "Properties"
    ]
    assert scaling_of("CallerFunction.CallerQueueMessages", properties, function_bound=5000) == expected
    assert batching_of("CallerFunction.CallerQueueMessages", properties, fifo=False) == (10, 1.0)
