"""The planner's handler with moto: it counts the coming wakes in the table's PendingWakes index and
changes the caller's SQS event source mapping through Lambda's API (moto serves the mapping calls
without Docker), and a run that fails publishes no heartbeat."""

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

from wakeup.event_source import CallerFunction, CallerMapping, FunctionBusyError, MappingBusyError
from wakeup.logic.planner import QUIET_WAKES
from wakeup.table.pending import PendingIndex
from wakeup.times import now

URL = "http://127.0.0.1:9/unused"  # nothing is called here
# Batches of one, so that a dozen wakes at one second are a burst (each needs an invocation of its
# own, more than Lambda's default scaling has at once) without writing a thousand instances.
PLANNER_ENV = {"WAKEUP_CALLER_BATCH_SIZE": "1", "WAKEUP_CALLER_BATCHING_WINDOW_S": "0"}
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
    planner.get_caller = lambda: CallerFunction(function_of(lambda_client, mapping_uuid), lambda_client)  # type: ignore[attr-defined]
    return planner


def function_of(lambda_client: Any, mapping_uuid: str) -> str:
    """The function the mapping invokes: the caller, here."""
    return str(lambda_client.get_event_source_mapping(UUID=mapping_uuid)["FunctionArn"])


def memory_of(lambda_client: Any, mapping_uuid: str) -> int:
    configuration = lambda_client.get_function_configuration(FunctionName=function_of(lambda_client, mapping_uuid))
    return int(configuration["MemorySize"])


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
    # hosts may still register, 10 a poller
    assert result["sent"] and result["plan"]["peak_wakes"] == BURST
    assert pollers_of(lambda_client, mapping_uuid) == {"MinimumPollers": 5, "MaximumPollers": 100}
    assert counted(capsys.readouterr().out, "PlannedPollers") == 5


def test_the_callers_memory_is_its_burst_size_for_a_burst_and_a_quiet_stack_and_its_resting_one_for_a_rate(
    env: Deployed, lambda_client: Any, mapping_uuid: str, metrics_namespace: None
) -> None:
    # given the caller's two sizes (template.yaml's CallerMemorySize and CallerBurstMemorySize) and a
    # dozen wakes due at one second, three minutes from now
    sizes = {"WAKEUP_CALLER_MEMORY_MB": "256", "WAKEUP_CALLER_BURST_MEMORY_MB": "1024"}
    at = (now() + timedelta(minutes=3)).replace(microsecond=0)
    instances = [env.new_instance(URL) for _ in range(BURST)]
    for instance in instances:
        env.new_wake(instance, at)
    with environment(sizes):
        planner = planner_for(env, lambda_client, mapping_uuid, metrics_namespace)

        # when the planner runs, the caller gets its burst memory with the pollers
        assert tick(planner)["memory_mb"] == 1024
        assert memory_of(lambda_client, mapping_uuid) == 1024

        # and once the burst has passed and a steady rate fills the window (a wake every 10 s, no
        # burst), its resting memory back
        instances += [env.new_instance(URL) for _ in range(2 * QUIET_WAKES + 1 - BURST)]
        start = now() + timedelta(seconds=30)
        for index, instance in enumerate(instances):
            env.new_wake(instance, start + timedelta(seconds=10 * index))
        assert tick(planner)["memory_mb"] == 256
        assert memory_of(lambda_client, mapping_uuid) == 256

        # and once the stack is quiet (the wakes replaced by ones hours off), its burst memory again:
        # a quiet stack's wakes meet cold starts
        for instance in instances:
            env.new_wake(instance, now() + timedelta(hours=2))
        assert tick(planner)["memory_mb"] == 1024
    assert memory_of(lambda_client, mapping_uuid) == 1024


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


def test_provisioned_mode_is_turned_off_by_an_empty_config_and_a_busy_mapping_is_told_apart() -> None:
    # The exact request is what is under test (STYLE.md: botocore's Stubber): an empty
    # ProvisionedPollerConfig, no minimum and no maximum; Lambda's ResourceInUseException becomes
    # the planner's "busy", any other error stays an error.
    client = boto3.client("lambda", region_name=REGION)
    mapping_id = str(uuid.uuid4())
    mapping = CallerMapping(mapping_id, client)
    with Stubber(client) as stub:
        stub.add_response(
            "update_event_source_mapping", {}, expected_params={"UUID": mapping_id, "ProvisionedPollerConfig": {}}
        )
        stub.add_client_error("update_event_source_mapping", service_error_code="ResourceInUseException")
        stub.add_client_error("update_event_source_mapping", service_error_code="AccessDeniedException")

        mapping.set_pollers(None, 100)
        with pytest.raises(MappingBusyError):
            mapping.set_pollers(None, 100)
        with pytest.raises(ClientError):
            mapping.set_pollers(None, 100)
        stub.assert_no_pending_responses()


def test_the_callers_memory_is_set_alone_and_a_busy_function_is_told_apart() -> None:
    # Only MemorySize is sent (every other setting stays as deployed); Lambda's
    # ResourceConflictException (an update still applying) becomes the planner's "busy".
    client = boto3.client("lambda", region_name=REGION)
    caller = CallerFunction("stack-caller", client)
    with Stubber(client) as stub:
        stub.add_response(
            "update_function_configuration", {}, expected_params={"FunctionName": "stack-caller", "MemorySize": 1024}
        )
        stub.add_client_error("update_function_configuration", service_error_code="ResourceConflictException")
        stub.add_client_error("update_function_configuration", service_error_code="AccessDeniedException")

        caller.set_memory(1024)
        with pytest.raises(FunctionBusyError):
            caller.set_memory(1024)
        with pytest.raises(ClientError):
            caller.set_memory(1024)
        stub.assert_no_pending_responses()
