"""Each function's AWS requests are allowed by its own IAM statements in template.yaml.

moto allows any request, so a request a function's code starts making without the template granting
it (the reads by key that keys-only indexes brought, say) would pass every other test and be refused
on AWS (AccessDenied). Here each handler does its usual work over moto while every AWS request made
during its invocation is recorded, and each request's IAM action must be one its function's
statements allow, on the table or on the very index it queries. tests/template/test_template_iam.py
checks the other way: that the template grants nothing more than listed.

IAM authorises a `TransactWriteItems` by its contained actions: PutItem, UpdateItem, DeleteItem,
and ConditionCheckItem for a `ConditionCheck` ("Using IAM with DynamoDB transactions", DynamoDB
developer guide).
"""

import json
import uuid
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from types import ModuleType
from typing import Any

import boto3
import pytest
from botocore.client import BaseClient
from caller_mapping import sqs_mapping
from moto_env import REGION, Deployed, Host, LambdaContext, environment, private_handler
from sample_events import (
    GET_INSTANCE,
    LIST_INSTANCES,
    PUT_WAKE,
    REGISTER_INSTANCE,
    api_event,
    load_event,
    scheduler_invocation,
    sqs_batch,
)

from support.host import closed_port_url
from wakeup.event_source import CallerMapping, StackDeploys
from wakeup.logic.accounts import mint_account
from wakeup.table.pending import PendingIndex
from wakeup.times import format_time, now
from wakeup.tokens import TokenKind, hash_token, mint
from wakeup_awsfacts.template import load_template

pytestmark = pytest.mark.usefixtures("metrics_namespace")

TEMPLATE = load_template(Path(__file__).resolve().parents[2] / "template.yaml")
TABLE = "table"
# A transaction's parts, by the IAM action each needs.
TRANSACTION_PARTS = {
    "Put": "PutItem",
    "Update": "UpdateItem",
    "Delete": "DeleteItem",
    "ConditionCheck": "ConditionCheckItem",
}

Grant = tuple[str, str]  # an IAM action, and the table resource it is on ("" for other services)


# The stack's table, its own or the one it adopts (ExistingTableName), by name.
TABLE_ARN = "arn:${AWS::Partition}:dynamodb:${AWS::Region}:${AWS::AccountId}:table/${TableName}"


def _resource(resource: Any) -> str:
    """The table, an index of it, or "" for a resource that is not the table's."""
    argument = resource.get("Fn::Sub") if isinstance(resource, dict) else None
    if isinstance(argument, list) and str(argument[0]).startswith(TABLE_ARN):
        return TABLE + str(argument[0]).removeprefix(TABLE_ARN)
    return ""


def granted(function: str) -> set[Grant]:
    """What the function's statements allow: its own `Policies`, or those of the role it names."""
    properties = TEMPLATE.resources[function]["Properties"]
    if "Role" in properties:
        role = TEMPLATE.resources[properties["Role"]["Fn::GetAtt"][0]]["Properties"]
        statements = [s for policy in role["Policies"] for s in policy["PolicyDocument"]["Statement"]]
    else:
        statements = [s for policy in properties["Policies"] for s in policy["Statement"]]
    grants = set()
    for statement in statements:
        assert statement["Effect"] == "Allow"
        actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
        resources = statement["Resource"] if isinstance(statement["Resource"], list) else [statement["Resource"]]
        grants |= {(action, _resource(resource)) for action in actions for resource in resources}
    return grants


def needed(service: str, operation: str, params: dict[str, Any]) -> set[Grant]:
    """The IAM actions (and table resources) one request needs."""
    if service != "dynamodb":
        # The services' other actions are named as their operations (none here is a batch).
        return {(f"{service}:{operation}", "")}
    if operation == "TransactWriteItems":
        return {(f"dynamodb:{TRANSACTION_PARTS[part]}", TABLE) for item in params["TransactItems"] for part in item}
    index = params.get("IndexName")
    return {(f"dynamodb:{operation}", f"{TABLE}/index/{index}" if index else TABLE)}


class Requests:
    """Every AWS request made while `during` is set, with the IAM actions it needs."""

    def __init__(self) -> None:
        self.during: str | None = None
        self.made: dict[str, set[Grant]] = {}

    def record(self, client: BaseClient, operation: str, params: dict[str, Any]) -> None:
        if self.during is not None:
            service = client.meta.service_model.signing_name
            name = client.meta.service_model.operation_model(operation).name
            self.made.setdefault(self.during, set()).update(needed(service, name, params))


@pytest.fixture
def requests(monkeypatch: pytest.MonkeyPatch) -> Requests:
    recorded = Requests()
    make_api_call = BaseClient._make_api_call

    def recording(client: BaseClient, operation: str, params: dict[str, Any]) -> Any:
        recorded.record(client, operation, params)
        return make_api_call(client, operation, params)

    monkeypatch.setattr(BaseClient, "_make_api_call", recording)
    return recorded


@pytest.fixture
def env(own_env: Deployed) -> Deployed:
    return own_env


def invoker(env: Deployed, requests: Requests, function: str) -> Callable[[Any], Any]:
    """The function's handler, its AWS requests recorded under its logical id."""
    module: ModuleType = private_handler(function.removesuffix("Function").lower(), env)

    def invoke(event: Any) -> Any:
        requests.during = function
        try:
            return module.lambda_handler(event, LambdaContext(function_name=function))
        finally:
            requests.during = None

    return invoke


def test_the_wake_function_makes_only_requests_its_role_allows(env: Deployed, requests: Requests) -> None:
    invoke = invoker(env, requests, "WakeFunction")
    token = mint(TokenKind.INSTANCE)
    account = mint_account(env.store, "iam")[0]
    env.store.register_instance(account.id, "https://host.example", hash_token(token), now())
    # near, far, moved further, and back near (its schedule deleted)
    for at in (now() + timedelta(seconds=30), now() + timedelta(days=1), now() + timedelta(days=2), now()):
        assert invoke(api_event(PUT_WAKE, token=token, body={"at": format_time(at)}))["statusCode"] == 204
    assert {
        ("dynamodb:UpdateItem", TABLE),
        ("sqs:SendMessage", ""),
        ("scheduler:CreateSchedule", ""),
        ("scheduler:DeleteSchedule", ""),
    } <= requests.made["WakeFunction"]  # what the work above is here to cover
    assert requests.made["WakeFunction"] <= granted("WakeFunction")


def test_the_instances_function_makes_only_requests_its_role_allows(env: Deployed, requests: Requests) -> None:
    invoke = invoker(env, requests, "InstancesFunction")
    account = mint_account(env.store, "iam")[1]
    body = {"url": "https://host.example", "token": mint(TokenKind.INSTANCE)}
    reply = invoke(api_event(REGISTER_INSTANCE, token=account, body=body))
    assert reply["statusCode"] == 201
    instance_id = json.loads(reply["body"])["id"]
    env.new_wake(instance_id, now() + timedelta(days=1))
    assert (
        invoke(api_event(REGISTER_INSTANCE, token=account, body=body | {"url": "https://moved.example"}))["statusCode"]
        == 200
    )
    assert invoke(api_event(GET_INSTANCE, token=account, instance_id=instance_id))["statusCode"] == 200
    assert invoke(api_event(LIST_INSTANCES, token=account, query={"limit": "1"}))["statusCode"] == 200
    attempts = api_event(
        GET_INSTANCE, token=account, instance_id=instance_id, path=f"/wakeup/instances/{instance_id}/attempts"
    )
    assert invoke(attempts)["statusCode"] == 200
    assert invoke(api_event(GET_INSTANCE, token=account, instance_id=instance_id, method="DELETE"))["statusCode"] == 204
    assert {
        ("dynamodb:Query", "table/index/ByAccount"),
        ("dynamodb:BatchGetItem", TABLE),
        ("dynamodb:DeleteItem", TABLE),
    } <= requests.made["InstancesFunction"]  # what the work above is here to cover
    assert requests.made["InstancesFunction"] <= granted("InstancesFunction")


def test_the_caller_makes_only_requests_its_role_allows(env: Deployed, requests: Requests, host: Host) -> None:
    invoke = invoker(env, requests, "CallerFunction")
    # a schedule that fired early, one due that calls its host, a stale one, and a call that fails
    early = env.new_wake(env.new_instance(host.url), now() + timedelta(seconds=40))
    due = env.new_wake(env.new_instance(host.url), now())
    stale_id = env.new_instance(host.url)
    stale = env.new_wake(stale_id, now() + timedelta(days=1))
    env.new_wake(stale_id, now() + timedelta(days=2))
    with closed_port_url() as url:
        failing = env.new_wake(env.new_instance(url), now())
        assert invoke(scheduler_invocation(early)) == {"result": "early"}
        assert invoke(scheduler_invocation(due)) == {"result": "called"}
        assert invoke(scheduler_invocation(stale)) == {"result": "stale"}
        assert invoke(sqs_batch(failing)) == {"batchItemFailures": []}
    assert {
        ("dynamodb:GetItem", TABLE),
        ("dynamodb:BatchWriteItem", TABLE),
        ("secretsmanager:GetSecretValue", ""),
    } <= requests.made["CallerFunction"]  # what the work above is here to cover
    assert requests.made["CallerFunction"] <= granted("CallerFunction")


def test_the_sweeper_makes_only_requests_its_role_allows(env: Deployed, requests: Requests) -> None:
    invoke = invoker(env, requests, "SweeperFunction")
    env.new_wake(env.new_instance("https://host.example"), now() - timedelta(minutes=5))
    assert invoke(load_event("sweeper_tick.json"))["rearmed"] == 1
    assert {("dynamodb:Query", "table/index/PendingWakes"), ("dynamodb:BatchGetItem", TABLE)} <= requests.made[
        "SweeperFunction"
    ]  # what the work above is here to cover
    assert requests.made["SweeperFunction"] <= granted("SweeperFunction")


def test_the_planner_makes_only_requests_its_role_allows(env: Deployed, requests: Requests, endpoint: str) -> None:
    # given a burst coming (batches of one: a dozen wakes at one second are one) and a mapping to raise
    at = (now() + timedelta(minutes=3)).replace(microsecond=0)
    for _ in range(12):
        env.new_wake(env.new_instance("https://host.example"), at)
    # and its stack (moto's CloudFormation), which it reads for a deploy under way
    cloudformation = boto3.client("cloudformation", endpoint_url=endpoint, region_name=REGION)
    stack = f"wakeup-iam-{uuid.uuid4().hex[:8]}"
    cloudformation.create_stack(StackName=stack, TemplateBody='{"Resources": {"Q": {"Type": "AWS::SQS::Queue"}}}')
    with sqs_mapping(endpoint) as (lambda_client, mapping_uuid):
        variables = {
            "WAKEUP_CALLER_MAPPING_UUID": mapping_uuid,
            "WAKEUP_CALLER_BATCH_SIZE": "1",
            "WAKEUP_PLANNER_UPDATE_DELAY_S": "60",
        }
        with environment(variables):
            planner = private_handler("planner", env)
        planner.get_pending_index = lambda: PendingIndex(env.settings.table, env.clients.dynamodb)
        planner.get_mapping = lambda: CallerMapping(mapping_uuid, lambda_client)
        planner.get_deploys = lambda: StackDeploys(stack, cloudformation)
        requests.during = "PlannerFunction"
        try:
            result = planner.lambda_handler(load_event("sweeper_tick.json"), LambdaContext())
            assert result["sent"], result["held"]
        finally:
            requests.during = None
    assert {
        ("dynamodb:Query", "table/index/PendingWakes"),
        ("lambda:GetEventSourceMapping", ""),
        ("lambda:UpdateEventSourceMapping", ""),
        ("cloudformation:DescribeStacks", ""),
        ("cloudformation:ListChangeSets", ""),
    } <= requests.made["PlannerFunction"]  # what the work above is here to cover
    assert requests.made["PlannerFunction"] <= granted("PlannerFunction")
