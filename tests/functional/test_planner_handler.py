"""The planner's handler with moto: it counts the coming wakes in the table's PendingWakes index and
changes the caller's SQS event source mapping through Lambda's API (moto serves the mapping calls
without Docker), reads it back after an "off", takes Lambda's refusals as "busy", keeps out of its
stack's deploys (moto's CloudFormation), and a run that fails publishes no heartbeat."""

import uuid
from collections.abc import Iterator
from datetime import timedelta
from types import ModuleType
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from botocore.stub import Stubber
from caller_mapping import sqs_mapping
from moto_env import (
    REGION,
    Deployed,
    LambdaContext,
    counted,
    emitted_metrics,
    environment,
    private_handler,
)
from sample_events import load_event

from wakeup.event_source import CallerMapping, MappingBusyError, StackDeploys
from wakeup.table.pending import PendingIndex
from wakeup.times import now

URL = "http://127.0.0.1:9/unused"  # nothing is called here
# Batches of one, so that a dozen wakes at one second are a burst (each needs an invocation of its
# own, more than Lambda's default scaling has at once) without writing a thousand instances.
# An update assumed to apply within a minute: a burst three minutes off is raised for now.
PLANNER_ENV = {
    "WAKEUP_CALLER_BATCH_SIZE": "1",
    "WAKEUP_CALLER_BATCHING_WINDOW_S": "0",
    "WAKEUP_PLANNER_UPDATE_DELAY_S": "60",
}
BURST = 12


@pytest.fixture
def env(own_env: Deployed) -> Deployed:
    return own_env


@pytest.fixture
def mapping(endpoint: str) -> Iterator[tuple[Any, str]]:
    with sqs_mapping(endpoint) as made:
        yield made


@pytest.fixture
def lambda_client(mapping: tuple[Any, str]) -> Any:
    return mapping[0]


@pytest.fixture
def mapping_uuid(mapping: tuple[Any, str]) -> str:
    return mapping[1]


def planner_for(env: Deployed, lambda_client: Any, mapping_uuid: str, metrics_namespace: None) -> ModuleType:
    variables = {**PLANNER_ENV, "WAKEUP_CALLER_MAPPING_UUID": mapping_uuid}
    with environment(variables):
        planner = private_handler("planner", env)
    planner.get_pending_index = lambda: PendingIndex(env.settings.table, env.clients.dynamodb)  # type: ignore[attr-defined]
    planner.get_mapping = lambda: CallerMapping(mapping_uuid, lambda_client)  # type: ignore[attr-defined]
    planner.get_deploys = lambda: None  # type: ignore[attr-defined]
    return planner


def tick(planner: ModuleType) -> dict[str, Any]:
    result: dict[str, Any] = planner.lambda_handler(load_event("sweeper_tick.json"), LambdaContext())
    return result


def pollers_of(lambda_client: Any, mapping_uuid: str) -> dict[str, int]:
    config: dict[str, int] = lambda_client.get_event_source_mapping(UUID=mapping_uuid).get("ProvisionedPollerConfig")
    return config or {}


def test_a_coming_burst_turns_provisioned_mode_on(
    env: Deployed,
    lambda_client: Any,
    mapping_uuid: str,
    metrics_namespace: None,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # given a dozen wakes due at one second, three minutes from now
    at = (now() + timedelta(minutes=3)).replace(microsecond=0)
    for _ in range(BURST):
        env.new_wake(env.new_instance(URL), at)
    planner = planner_for(env, lambda_client, mapping_uuid, metrics_namespace)

    # when the planner runs
    result = tick(planner)

    # then the caller's mapping has provisioned pollers: 12 invocations, four times over while
    # hosts may still register, 10 a poller; and no more (autoscaling adds none to pay for)
    assert result["sent"] and result["plan"]["peak_wakes"] == BURST
    assert pollers_of(lambda_client, mapping_uuid) == {"MinimumPollers": 5, "MaximumPollers": 5}
    assert counted(capsys.readouterr().out, "PlannedPollers") == 5


def test_with_no_burst_coming_provisioned_mode_is_turned_off(
    env: Deployed,
    lambda_client: Any,
    mapping_uuid: str,
    metrics_namespace: None,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # given pollers raised for a burst that has passed, and a wake far off alone
    lambda_client.update_event_source_mapping(
        UUID=mapping_uuid, ProvisionedPollerConfig={"MinimumPollers": 100, "MaximumPollers": 100}
    )
    env.new_wake(env.new_instance(URL), now() + timedelta(hours=2))
    planner = planner_for(env, lambda_client, mapping_uuid, metrics_namespace)

    # when
    result = tick(planner)

    # then provisioned mode is off: no poller is left to pay for
    assert result["sent"] and result["plan"]["pollers"] is None
    assert "MinimumPollers" not in pollers_of(lambda_client, mapping_uuid)
    assert emitted_metrics(capsys.readouterr().out)["PlannedPollers"] == [0]


def test_a_failing_run_publishes_no_heartbeat(
    env: Deployed,
    lambda_client: Any,
    metrics_namespace: None,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # given a planner whose mapping Lambda does not know (deleted, or a role that may not read it)
    planner = planner_for(env, lambda_client, str(uuid.uuid4()), metrics_namespace)

    # when it runs, it fails (the function's Errors: PlannerFunctionErrorsAlarm), with no metric
    with (
        pytest.raises(lambda_client.exceptions.ResourceNotFoundException),
        pytest.warns(UserWarning, match="No application metrics to publish"),
    ):
        tick(planner)

    # and PlannedPollers has no sample: PlannerHeartbeatAlarm treats that as a breach
    assert "PlannedPollers" not in capsys.readouterr().out


def test_with_no_mapping_named_the_planner_is_idle(
    env: Deployed, metrics_namespace: None, capsys: pytest.CaptureFixture[str]
) -> None:
    # given the local stack's planner: it has no Lambda API, and no mapping is named
    with environment({"WAKEUP_CALLER_MAPPING_UUID": ""}):
        planner = private_handler("planner", env)

    # then it plans nothing, and says so: no pollers
    assert tick(planner) == {"planned": False}
    assert emitted_metrics(capsys.readouterr().out)["PlannedPollers"] == [0]


# What UpdateEventSourceMapping refuses with while Lambda is busy (its API reference's "Errors").
BUSY = ("ResourceInUseException", "ResourceConflictException", "TooManyRequestsException")
STATUS = {"ResourceInUseException": 400, "ResourceConflictException": 409, "TooManyRequestsException": 429}


def test_provisioned_mode_is_turned_off_by_an_empty_config_and_a_busy_mapping_is_told_apart() -> None:
    # The exact request is what is under test (STYLE.md: botocore's Stubber): an empty
    # ProvisionedPollerConfig, no minimum and no maximum; Lambda's ResourceInUseException,
    # ResourceConflictException and TooManyRequestsException become the planner's "busy", any other
    # error stays an error.
    client = boto3.client("lambda", region_name=REGION)
    mapping_id = str(uuid.uuid4())
    mapping = CallerMapping(mapping_id, client)
    with Stubber(client) as stub:
        stub.add_response(
            "update_event_source_mapping", {}, expected_params={"UUID": mapping_id, "ProvisionedPollerConfig": {}}
        )
        for code in BUSY:
            stub.add_client_error("update_event_source_mapping", service_error_code=code)
        stub.add_client_error("update_event_source_mapping", service_error_code="AccessDeniedException")

        mapping.set_pollers(None, 100)
        for _ in BUSY:
            with pytest.raises(MappingBusyError):
                mapping.set_pollers(None, 100)
        with pytest.raises(ClientError):
            mapping.set_pollers(None, 100)
        stub.assert_no_pending_responses()


def refusing(lambda_client: Any, code: str) -> Any:
    """Makes Lambda (moto) refuse the next UpdateEventSourceMapping with `code`, as AWS may while
    a deploy's update applies or the account's control-plane rate is spent; returns the hook."""

    def refuse(**_: Any) -> tuple[Any, dict[str, Any]]:
        response = type("Http", (), {"status_code": STATUS[code], "headers": {}, "content": b""})()
        return response, {"Error": {"Code": code, "Message": "refused by the test"}, "ResponseMetadata": {}}

    lambda_client.meta.events.register_first("before-call.lambda.UpdateEventSourceMapping", refuse)
    return refuse


@pytest.mark.parametrize("code", BUSY)
def test_a_refused_update_is_busy_and_the_next_run_sends_it(
    env: Deployed,
    lambda_client: Any,
    mapping_uuid: str,
    metrics_namespace: None,
    capsys: pytest.CaptureFixture[str],
    code: str,
) -> None:
    # given a coming burst, and Lambda refusing the update with `code`
    at = (now() + timedelta(minutes=3)).replace(microsecond=0)
    for _ in range(BURST):
        env.new_wake(env.new_instance(URL), at)
    planner = planner_for(env, lambda_client, mapping_uuid, metrics_namespace)
    hook = refusing(lambda_client, code)

    # when the planner runs, the run ends calmly: busy, nothing changed, its heartbeat published
    result = tick(planner)
    assert result["busy"] and not result["sent"] and result["held"] == "busy"
    assert pollers_of(lambda_client, mapping_uuid) == {}
    assert counted(capsys.readouterr().out, "PlannedPollers") == 5

    # and the next run, Lambda no longer busy, sends it
    lambda_client.meta.events.unregister("before-call.lambda.UpdateEventSourceMapping", hook)
    assert tick(planner)["sent"]
    assert pollers_of(lambda_client, mapping_uuid)["MinimumPollers"] == 5


def test_after_off_the_mapping_is_read_back_and_pollers_left_raise_the_alarm_instead_of_a_resend(
    env: Deployed,
    lambda_client: Any,
    mapping_uuid: str,
    metrics_namespace: None,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # given pollers raised for a burst that has passed
    lambda_client.update_event_source_mapping(
        UUID=mapping_uuid, ProvisionedPollerConfig={"MinimumPollers": 100, "MaximumPollers": 100}
    )
    planner = planner_for(env, lambda_client, mapping_uuid, metrics_namespace)
    assert tick(planner)["sent"]  # the "off"
    capsys.readouterr()

    # when Lambda reads back with pollers still (no off value is documented: the defaults, say)
    lambda_client.update_event_source_mapping(
        UUID=mapping_uuid, ProvisionedPollerConfig={"MinimumPollers": 2, "MaximumPollers": 200}
    )
    first, second = tick(planner), tick(planner)

    # then the planner reads it back once Enabled, publishes the pollers left (PlannerPollersLeftAlarm)
    # and the update's delay, and sends the "off" no more
    published = emitted_metrics(capsys.readouterr().out)
    assert published["PollersLeftAfterOff"] == [2, 2]
    assert len(published["PlannerUpdateDelay"]) == 1
    assert not first["sent"] and not second["sent"] and second["held"] == "left"
    assert pollers_of(lambda_client, mapping_uuid) == {"MinimumPollers": 2, "MaximumPollers": 200}


@pytest.fixture
def stack(endpoint: str) -> Iterator[tuple[Any, str]]:
    """A CloudFormation stack in moto, as the planner's own is on AWS: (a client, its name)."""
    cloudformation = boto3.client("cloudformation", endpoint_url=endpoint, region_name=REGION)
    name = f"wakeup-{uuid.uuid4().hex[:8]}"
    cloudformation.create_stack(StackName=name, TemplateBody=queue_template(f"{name}-a"))
    yield cloudformation, name
    cloudformation.delete_stack(StackName=name)


def queue_template(queue_name: str) -> str:
    return '{"Resources": {"Queue": {"Type": "AWS::SQS::Queue", "Properties": {"QueueName": "' + queue_name + '"}}}}'


def test_the_planner_sends_nothing_while_its_stack_is_being_deployed(
    env: Deployed,
    lambda_client: Any,
    mapping_uuid: str,
    metrics_namespace: None,
    stack: tuple[Any, str],
) -> None:
    # given pollers the planner raised for a burst (its update applied or still applying), and a
    # deploy that begins: `sam deploy` creates its change set, then executes it
    cloudformation, name = stack
    lambda_client.update_event_source_mapping(
        UUID=mapping_uuid, ProvisionedPollerConfig={"MinimumPollers": 100, "MaximumPollers": 100}
    )
    planner = planner_for(env, lambda_client, mapping_uuid, metrics_namespace)
    planner.get_deploys = lambda: StackDeploys(name, cloudformation)  # type: ignore[attr-defined]
    change_set = cloudformation.create_change_set(
        StackName=name, ChangeSetName="deploy", TemplateBody=queue_template(f"{name}-b")
    )["Id"]

    # when the planner runs with the burst passed (provisioned mode due off), it sends nothing:
    # the deploy's own update of the mapping can meet no update of the planner's
    held = tick(planner)
    assert held["busy"] and held["held"] == "deploy" and not held["sent"]
    assert pollers_of(lambda_client, mapping_uuid)["MinimumPollers"] == 100

    # and once the deploy has run (its stack *_COMPLETE, its change set executed), the next run does
    cloudformation.execute_change_set(ChangeSetName=change_set)
    assert cloudformation.describe_stacks(StackName=name)["Stacks"][0]["StackStatus"].endswith("_COMPLETE")
    assert tick(planner)["sent"]
    assert "MinimumPollers" not in pollers_of(lambda_client, mapping_uuid)


def test_a_deploy_is_seen_from_its_change_set_to_its_stacks_completion(stack: tuple[Any, str]) -> None:
    cloudformation, name = stack
    deploys = StackDeploys(name, cloudformation)
    assert not deploys.in_progress(now())
    cloudformation.create_change_set(StackName=name, ChangeSetName="deploy", TemplateBody=queue_template(f"{name}-b"))
    assert deploys.in_progress(now())
    # one left unexecuted for longer than a deploy takes stops counting (an operator declined it)
    assert not deploys.in_progress(now() + timedelta(hours=2))
