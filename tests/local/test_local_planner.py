"""The planner on the local stack: template.yaml's PlannerFunction changes the caller's event source
mapping through Lambda's API (served by the stack's moto), the change applies after the mapping's
`Updating`, and the SQS poller scales by it. A planner that fails loses no wake.

Each test runs the planner when it needs a run (`run_sweeper`, the stack's scheduled functions now)
rather than waiting for its minute.
"""

from __future__ import annotations

import math
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from localstack_helpers import ROOT

from support.api import Api
from support.host import WakeHost
from support.waiting import wait_until
from wakeup.times import format_time
from wakeup.tokens import TokenKind, mint
from wakeup_awsfacts.sqs_scaling import Scaling
from wakeup_awsfacts.template import Resolver, load_template
from wakeup_local.event_sources.scheduler import recurring_schedules
from wakeup_local.lambda_.functions import DEFAULT_CONCURRENCY, FunctionError
from wakeup_local.stack import LocalStack

CALLER_MAPPING = "CallerFunction.CallerQueueMessages"
MAPPING_UPDATE_S = 1
PLANNER_UPDATE_DELAY_S = 4
STACK_ENV = {
    "WAKEUP_CALL_TIMEOUT_S": "2",
    "WAKEUP_CLAIM_LEASE_S": "7",
    "WAKEUP_LOCAL_EXACT_SCHEDULES": "1",
    "WAKEUP_LOCAL_MAPPING_UPDATE_S": str(MAPPING_UPDATE_S),
    # The planner counts each wake as a batch of its own and sees a burst in any second with more
    # than five (Lambda's default scaling at first): a dozen wakes make a burst here, where the
    # template's batches of 10 would need more than fifty. It plans the same way (tests/unit).
    "WAKEUP_CALLER_BATCH_SIZE": "1",
    "WAKEUP_PLANNER_TOLERANCE_S": "0",
    # Capacity is dropped as soon as a burst's second has passed (a minute after it by default).
    "WAKEUP_PLANNER_AFTER_S": "0",
    # The planner sends no change that could land during its burst (wakeup.logic.planner): here an
    # update applies in MAPPING_UPDATE_S and the poller follows within the watcher's 2 s, so a burst
    # a few seconds off is raised for.
    "WAKEUP_PLANNER_UPDATE_DELAY_S": str(PLANNER_UPDATE_DELAY_S),
}
BURST = 12
# How far ahead of its registering the test's burst is due.
BURST_AHEAD_S = 16
# What the planner asks for a burst of BURST: its `headroom` of 4, ten invocations a poller (the
# poller then has ten batches a poller ready, within the caller's local bound).
BURST_POLLERS = math.ceil(BURST * 4 / 10)


@contextmanager
def planner_stack(folder: Path, *, warm: bool = True, **env: str) -> Iterator[LocalStack]:
    with (
        (folder / "functions.log").open("w") as log,
        LocalStack(
            ROOT / "template.yaml", stack_name=f"p-{uuid.uuid4().hex[:8]}", env={**STACK_ENV, **env}, function_log=log
        ) as stack,
    ):
        if warm:
            stack.run_sweeper()  # the scheduled functions warm: a test's run of the planner is quick
        yield stack


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    with planner_stack(tmp_path_factory.mktemp("planner")) as started:
        yield started


def run_planner(stack: LocalStack) -> dict[str, Any]:
    [planned] = [result for result in stack.run_sweeper() if "planned" in result]
    return dict(planned)


def mapping(stack: LocalStack) -> dict[str, Any]:
    [found] = stack.clients.awslambda.list_event_source_mappings()["EventSourceMappings"]
    return dict(found)


def settled(stack: LocalStack) -> dict[str, Any]:
    """The mapping once no update is applying."""
    return wait_until(
        lambda: (found := mapping(stack))["State"] == "Enabled" and found,
        timeout=MAPPING_UPDATE_S + 10,
        interval=0.05,
        message="the mapping Enabled",
    )


def poller_follows(stack: LocalStack, scaling: Scaling) -> None:
    """The caller's poller scales by `scaling` and has its `initial` batches ready."""

    def following() -> bool:
        counters = stack.event_source_counters()[CALLER_MAPPING]
        return counters.scaling == scaling and counters.target == scaling.initial

    wait_until(following, timeout=MAPPING_UPDATE_S + 10, interval=0.05, message=f"the caller's poller at {scaling}")


def register_burst(stack: LocalStack, host: WakeHost, ahead_s: float) -> int:
    """BURST instances on `host`, their wakes due at one second `ahead_s` from now: that second."""
    api = Api(stack.url, stack.account_token)
    try:
        tokens = []
        for n in range(BURST):
            token = mint(TokenKind.INSTANCE)
            assert api.register(host.url_for(f"burst{n}"), token).status_code == 201
            tokens.append(token)
        second = math.ceil(time.time() + ahead_s)
        at = format_time(datetime.fromtimestamp(second, UTC))
        for token in tokens:
            assert api.wake(token, at).status_code == 204
        return second
    finally:
        api.close()


def test_the_callers_mapping_is_the_templates_and_the_planner_names_it_every_minute(stack: LocalStack) -> None:
    # the mapping, from CallerFunction's CallerQueueMessages event
    found = mapping(stack)
    caller = stack.functions.by_logical_id("CallerFunction")
    assert (found["FunctionArn"], found["EventSourceArn"]) == (caller.arn, stack.resources.queues["CallerQueue"].arn)
    assert (found["BatchSize"], found["MaximumBatchingWindowInSeconds"]) == (10, 1)
    assert found["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    assert "ProvisionedPollerConfig" not in found  # CallerMinimumPollers 0: none at rest
    # the planner: its template variables, the mapping's UUID among them, and its minute
    planner = stack.functions.by_logical_id("PlannerFunction")
    assert planner.spec.environment["WAKEUP_CALLER_MAPPING_UUID"] == found["UUID"]
    assert planner.spec.environment["WAKEUP_PLANNER_UPDATE_DELAY_S"] == str(PLANNER_UPDATE_DELAY_S)
    # and its stack, which it reads for a deploy under way, is in the stack's moto as on AWS
    assert planner.spec.environment["WAKEUP_STACK_NAME"] == stack.stack_name
    [described] = stack.clients.cloudformation.describe_stacks(StackName=stack.stack_name)["Stacks"]
    assert described["StackStatus"] == "CREATE_COMPLETE"
    template = load_template(ROOT / "template.yaml")
    schedules = recurring_schedules(template, Resolver(template, stack.stack_name), stack.functions)
    assert [schedule.period_s for schedule in schedules if schedule.function is planner] == [60]


def test_a_burst_registered_ahead_raises_the_mapping_and_the_poller_follows(stack: LocalStack, host: WakeHost) -> None:
    assert "ProvisionedPollerConfig" not in settled(stack)
    # given a burst due in a few seconds: far enough that its PUTs and the planner's run leave more
    # than the update's delay the planner assumes before it, else the planner holds the change (it
    # could land during the burst); with one core busy those took over 4 s
    second = register_burst(stack, host, ahead_s=BURST_AHEAD_S)
    # when the planner runs
    planned = run_planner(stack)
    # then it asked for provisioned pollers for that burst ...
    assert planned["sent"], planned
    assert planned["plan"] == {
        "pollers": BURST_POLLERS,
        "burst_at": second,
        "peak_wakes": BURST,
        "coming_at": second,
    }
    # ... the mapping has them once its update applied, and the poller has their batches ready
    assert settled(stack)["ProvisionedPollerConfig"]["MinimumPollers"] == BURST_POLLERS
    poller_follows(stack, Scaling.provisioned(BURST_POLLERS, 100, function_bound=DEFAULT_CONCURRENCY))
    # and every wake of the burst is called
    host.wait_for_calls(BURST, timeout=30)


def test_turning_provisioned_mode_off_returns_the_poller_to_standard_scaling(stack: LocalStack) -> None:
    # given the mapping in provisioned mode, as the planner leaves it for a burst
    settled(stack)
    stack.clients.awslambda.update_event_source_mapping(
        UUID=mapping(stack)["UUID"], ProvisionedPollerConfig={"MinimumPollers": 2, "MaximumPollers": 100}
    )
    assert settled(stack)["ProvisionedPollerConfig"]["MinimumPollers"] == 2
    poller_follows(stack, Scaling.provisioned(2, 100, function_bound=DEFAULT_CONCURRENCY))
    # when the planner runs with no burst coming
    planned = run_planner(stack)
    # then it turned provisioned mode off, and the poller is back to Lambda's five at once
    assert planned["sent"] and planned["plan"]["pollers"] is None
    assert "ProvisionedPollerConfig" not in settled(stack)
    poller_follows(stack, Scaling.standard(function_bound=DEFAULT_CONCURRENCY))


@pytest.mark.slow  # a stack of its own: about 20 s
def test_a_failing_planner_loses_no_wake(tmp_path: Path, host: WakeHost) -> None:
    # given a planner whose every run fails (the mapping it names does not exist: Lambda refuses it)
    with planner_stack(tmp_path, warm=False, WAKEUP_CALLER_MAPPING_UUID=str(uuid.uuid4())) as failing:
        register_burst(failing, host, ahead_s=6)
        # when it runs
        with pytest.raises(FunctionError):
            failing.run_sweeper()
        # then the burst meets Lambda's default scaling, and every wake is called all the same
        host.wait_for_calls(BURST, timeout=30)
        assert "ProvisionedPollerConfig" not in mapping(failing)
        assert failing.event_source_counters()[CALLER_MAPPING].scaling == Scaling.standard(
            function_bound=DEFAULT_CONCURRENCY
        )
