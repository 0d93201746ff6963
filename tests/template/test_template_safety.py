"""A stack safe to operate for years (DESIGN.md section 4, docs/operations.md): the table and the
master key can be neither replaced nor deleted by a template change, a stack can adopt existing
ones, the caller's concurrency can be reserved and the API's bounded, the alarms watch what loses or
delays wakes, and Scheduler's role trusts only this stack's schedule group.

Conditions are evaluated here as CloudFormation evaluates them for given parameters, on the
template as SAM transforms it: what a stack with those parameters would create and reference.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from cfn_template import load_template, resources_of_type, sam_transform, sub_variables
from test_template_settings import refused_by_rules

# --- What would replace the table or the secret ---------------------------------------------------
# A change to any of these makes CloudFormation create a new resource and delete (here: orphan) the
# old one: a new, empty table that the functions follow (every token then 401s), or a new master key
# (every account's `whsec_` changes). Their values are pinned as they are; a change must be a
# migration (docs/operations.md, "Adopting a table and a master key"), not a deploy.
#
# AWS::DynamoDB::Table (CloudFormation template reference,
# https://docs.aws.amazon.com/AWSCloudFormation/latest/TemplateReference/aws-resource-dynamodb-table.html):
# "Update requires: Replacement" for TableName, KeySchema, LocalSecondaryIndexes ("A local secondary
# index can only be created when its parent table is created") and ImportSourceSpecification.
# `None` is "not set", as it must stay: setting a TableName replaces the table too.
TABLE_CREATE_ONLY: dict[str, Any] = {
    "TableName": None,
    "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"}],
    "LocalSecondaryIndexes": None,
    "ImportSourceSpecification": None,
}
# AWS::SecretsManager::Secret (https://docs.aws.amazon.com/AWSCloudFormation/latest/TemplateReference/aws-resource-secretsmanager-secret.html):
# "Update requires: Replacement" for Name.
SECRET_CREATE_ONLY: dict[str, Any] = {"Name": None}

RETAINED = {"Table": "AWS::DynamoDB::Table", "SigningMasterKey": "AWS::SecretsManager::Secret"}

EXISTING_SECRET = "arn:aws:secretsmanager:us-east-1:123456789012:secret:wakeup-master-AbCdEf"
ADOPTING = {"ExistingTableName": "wakeup-restored", "ExistingMasterKeySecretArn": EXISTING_SECRET}


@pytest.mark.parametrize(
    ("logical_id", "pinned"), [("Table", TABLE_CREATE_ONLY), ("SigningMasterKey", SECRET_CREATE_ONLY)]
)
def test_no_property_that_would_replace_the_table_or_the_secret_changes(
    template: dict[str, Any], logical_id: str, pinned: dict[str, Any]
) -> None:
    # A new logical id or type is a new resource too.
    resource = template["Resources"][logical_id]
    assert resource["Type"] == RETAINED[logical_id]
    properties = resource["Properties"]

    assert {name: properties.get(name) for name in pinned} == pinned


def test_the_tables_key_attribute_keeps_its_type(template: dict[str, Any]) -> None:
    # The key's type is in AttributeDefinitions; DynamoDB cannot change it on a table.
    definitions = template["Resources"]["Table"]["Properties"]["AttributeDefinitions"]
    assert {"AttributeName": "pk", "AttributeType": "S"} in definitions


def test_the_pins_cover_every_create_only_property_aws_publishes() -> None:
    # The resource schemas in CloudFormation's registry, as cfn-lint ships them: a property AWS makes
    # create-only later (a cfn-lint upgrade brings it) must be pinned above.
    from cfnlint.schema import PROVIDER_SCHEMA_MANAGER

    for resource_type, pinned in (
        ("AWS::DynamoDB::Table", TABLE_CREATE_ONLY),
        ("AWS::SecretsManager::Secret", SECRET_CREATE_ONLY),
    ):
        schema = PROVIDER_SCHEMA_MANAGER.get_resource_schema("us-east-1", resource_type).schema
        paths = schema.get("createOnlyProperties", []) + schema.get("conditionalCreateOnlyProperties", [])
        assert paths, resource_type
        assert {path.removeprefix("/properties/").split("/")[0] for path in paths} <= set(pinned)


@pytest.mark.parametrize("logical_id", RETAINED)
def test_the_table_and_the_secret_outlive_the_stack_and_any_replacement(
    template: dict[str, Any], logical_id: str
) -> None:
    resource = template["Resources"][logical_id]
    assert (resource.get("DeletionPolicy"), resource.get("UpdateReplacePolicy")) == ("Retain", "Retain")


def test_the_table_has_deletion_protection(template: dict[str, Any]) -> None:
    assert template["Resources"]["Table"]["Properties"]["DeletionProtectionEnabled"] is True


# --- Conditions, evaluated as CloudFormation does ---------------------------------------------------


def parameter_values(template: dict[str, Any], given: dict[str, str]) -> dict[str, str]:
    return {name: str(p.get("Default", "")) for name, p in template["Parameters"].items()} | given


def conditions_of(template: dict[str, Any], parameters: dict[str, str]) -> dict[str, bool]:
    values = parameter_values(template, parameters)

    def evaluate(expression: Any) -> Any:
        if isinstance(expression, list):
            return [evaluate(item) for item in expression]
        if not isinstance(expression, dict):
            return str(expression)
        ((function, argument),) = expression.items()
        if function == "Ref":
            return values[argument]
        if function == "Condition":
            return evaluate(template["Conditions"][argument])
        arguments = evaluate(argument)
        return {
            "Fn::Equals": lambda: arguments[0] == arguments[1],
            "Fn::Not": lambda: not arguments[0],
            "Fn::And": lambda: all(arguments),
            "Fn::Or": lambda: any(arguments),
        }[function]()

    return {name: bool(evaluate(expression)) for name, expression in template["Conditions"].items()}


NO_VALUE = object()


def chosen(value: Any, conditions: dict[str, bool]) -> Any:
    """`value` with each Fn::If replaced by the branch CloudFormation takes, AWS::NoValue removed."""
    if isinstance(value, list):
        return [item for item in (chosen(item, conditions) for item in value) if item is not NO_VALUE]
    if not isinstance(value, dict):
        return value
    if value == {"Ref": "AWS::NoValue"}:
        return NO_VALUE
    if list(value) == ["Fn::If"]:
        name, if_true, if_false = value["Fn::If"]
        return chosen(if_true if conditions[name] else if_false, conditions)
    items = {key: chosen(item, conditions) for key, item in value.items()}
    return {key: item for key, item in items.items() if item is not NO_VALUE}


def referenced(value: Any) -> set[str]:
    """The names that Ref, Fn::GetAtt, Fn::Sub and DependsOn reach in `value` (Fn::If already
    chosen)."""
    if isinstance(value, list):
        return set().union(*(referenced(item) for item in value))
    if isinstance(value, str) or not isinstance(value, dict):
        return set()
    found: set[str] = set()
    for key, item in value.items():
        if key == "Ref":
            found.add(str(item))
        elif key == "Fn::GetAtt":
            found.add(str(item[0]))
        elif key == "DependsOn":
            found |= {item} if isinstance(item, str) else set(item)
        elif key == "Fn::Sub":
            text, variables = (item, {}) if isinstance(item, str) else item
            found |= {name.split(".")[0] for name in sub_variables(text) if name not in variables}
            found |= referenced(variables)
        else:
            found |= referenced(item)
    return found


def stack(parameters: dict[str, str]) -> tuple[dict[str, Any], dict[str, Any]]:
    """What CloudFormation creates for these parameters after SAM's transform: the resources its
    conditions keep (each with Fn::If chosen), and the outputs."""
    transformed = sam_transform(load_template(), parameters)
    conditions = conditions_of(transformed, parameters)
    resources = {
        logical_id: chosen(resource, conditions)
        for logical_id, resource in transformed["Resources"].items()
        if conditions.get(resource.get("Condition", ""), True)
    }
    return resources, chosen(transformed["Outputs"], conditions)


def test_by_default_the_stack_makes_its_own_table_and_master_key() -> None:
    resources, outputs = stack({})

    assert {"Table", "SigningMasterKey"} <= set(resources)
    assert outputs["TableName"]["Value"] == {"Ref": "Table"}
    assert outputs["SigningMasterKeyArn"]["Value"] == {"Ref": "SigningMasterKey"}


def test_a_stack_adopting_a_table_and_a_master_key_makes_neither_and_uses_them_everywhere() -> None:
    resources, outputs = stack(ADOPTING)

    assert not {"Table", "SigningMasterKey"} & set(resources)
    # Nothing left names the resources the stack does not make (CloudFormation would refuse it).
    for logical_id, resource in {**resources, **outputs}.items():
        assert not {"Table", "SigningMasterKey"} & referenced(resource), logical_id
    # The functions, their roles and the alarms name the adopted ones instead.
    caller = resources["CallerFunction"]["Properties"]["Environment"]["Variables"]
    assert caller["WAKEUP_TABLE"] == {"Ref": "ExistingTableName"}
    assert caller["WAKEUP_MASTER_KEY_SECRET"] == {"Ref": "ExistingMasterKeySecretArn"}
    role = json.dumps(resources["CallerRole"]["Properties"]["Policies"])
    assert "table/${TableName}" in role and '"Ref": "ExistingTableName"' in role
    assert '"Ref": "ExistingMasterKeySecretArn"' in role
    assert outputs["TableName"]["Value"] == {"Ref": "ExistingTableName"}
    metrics = json.dumps(resources["TableWriteThrottlesAlarm"]["Properties"]["Metrics"])
    assert metrics.count('"Ref": "ExistingTableName"') == 2


def test_adoption_takes_a_secrets_manager_arn_and_a_dynamodb_table_name(template: dict[str, Any]) -> None:
    parameters = template["Parameters"]
    secret_pattern = re.compile(parameters["ExistingMasterKeySecretArn"]["AllowedPattern"])
    table_pattern = re.compile(parameters["ExistingTableName"]["AllowedPattern"])

    assert secret_pattern.fullmatch(EXISTING_SECRET) and secret_pattern.fullmatch("")
    assert not secret_pattern.fullmatch("wakeup-master")  # a name is not an ARN: IAM needs the ARN
    assert table_pattern.fullmatch("wakeup-restored") and table_pattern.fullmatch("")
    assert not table_pattern.fullmatch("arn:aws:dynamodb:us-east-1:123456789012:table/t")


# --- Concurrency ------------------------------------------------------------------------------------

RESERVATIONS = {
    "CallerFunction": "CallerReservedConcurrency",
    "WakeFunction": "WakeReservedConcurrency",
    "InstancesFunction": "InstancesReservedConcurrency",
}


def test_by_default_no_function_reserves_concurrency_so_a_new_account_can_deploy() -> None:
    # Lambda keeps 100 executions unreserved, and a new account may have a quota of 10 ("Configuring
    # reserved concurrency for a function"): any default reservation could fail to deploy there.
    resources, _ = stack({})

    functions = {
        logical_id: resource["Properties"]
        for logical_id, resource in resources.items()
        if resource["Type"] == "AWS::Lambda::Function"
    }
    assert set(RESERVATIONS) <= set(functions)
    assert all("ReservedConcurrentExecutions" not in properties for properties in functions.values())


def test_the_caller_reserves_and_the_api_functions_are_capped_when_set() -> None:
    values = {
        "CallerReservedConcurrency": "400",
        "WakeReservedConcurrency": "200",
        "InstancesReservedConcurrency": "20",
    }
    resources, _ = stack(values)

    for function, parameter in RESERVATIONS.items():
        assert resources[function]["Properties"]["ReservedConcurrentExecutions"] == {"Ref": parameter}
    assert {"Ref": "AWS::NoValue"} not in [
        resources[f]["Properties"].get("ReservedConcurrentExecutions") for f in RESERVATIONS
    ]


@pytest.mark.parametrize("parameter", RESERVATIONS.values())
def test_a_reservation_of_zero_is_refused_before_deploying(template: dict[str, Any], parameter: str) -> None:
    # Reserved concurrency 0 throttles every invocation: the function would never run.
    assert refused_by_rules(template, {parameter: "0"})
    assert not refused_by_rules(template, {parameter: "1"})
    assert template["Parameters"][parameter]["Default"] == -1


def test_the_default_route_has_a_throttle_far_below_the_real_routes(
    template: dict[str, Any], transformed: dict[str, Any]
) -> None:
    (stage,) = resources_of_type(transformed, "AWS::ApiGatewayV2::Stage").values()
    settings = stage["Properties"]
    parameters = template["Parameters"]

    assert settings["RouteSettings"]["$default"] == {
        "ThrottlingRateLimit": {"Ref": "DefaultRouteThrottlingRateLimit"},
        "ThrottlingBurstLimit": {"Ref": "DefaultRouteThrottlingBurstLimit"},
    }
    assert settings["DefaultRouteSettings"]["ThrottlingRateLimit"] == {"Ref": "ApiThrottlingRateLimit"}
    # "Far below": a hundredth of the real routes' rate and burst at most.
    assert (
        parameters["DefaultRouteThrottlingRateLimit"]["Default"] * 100
        <= parameters["ApiThrottlingRateLimit"]["Default"]
    )
    assert (
        parameters["DefaultRouteThrottlingBurstLimit"]["Default"] * 100
        <= parameters["ApiThrottlingBurstLimit"]["Default"]
    )


# --- Alarms -----------------------------------------------------------------------------------------


def alarm(template: dict[str, Any], logical_id: str) -> dict[str, Any]:
    resource = template["Resources"][logical_id]
    assert resource["Type"] == "AWS::CloudWatch::Alarm"
    properties: dict[str, Any] = resource["Properties"]
    assert properties["AlarmActions"] == [{"Ref": "AlarmTopic"}]
    return properties


def test_wake_lateness_alarms_on_its_p99(template: dict[str, Any]) -> None:
    properties = alarm(template, "WakeLatenessAlarm")

    assert (properties["Namespace"], properties["MetricName"]) == ("Wakeup", "WakeLateness")
    assert properties["Dimensions"] == [{"Name": "service", "Value": "caller"}]
    assert properties["ExtendedStatistic"] == "p99"
    assert properties["Threshold"] == {"Ref": "WakeLatenessAlarmMilliseconds"}
    assert properties["ComparisonOperator"] == "GreaterThanThreshold"


def test_the_callers_throttles_alarm(template: dict[str, Any]) -> None:
    properties = alarm(template, "CallerThrottlesAlarm")

    assert (properties["Namespace"], properties["MetricName"]) == ("AWS/Lambda", "Throttles")
    assert properties["Dimensions"] == [{"Name": "FunctionName", "Value": {"Ref": "CallerFunction"}}]
    assert (properties["Threshold"], properties["ComparisonOperator"]) == (0, "GreaterThanThreshold")


def test_dynamodb_write_throttling_of_the_table_and_its_pending_index_alarms(template: dict[str, Any]) -> None:
    properties = alarm(template, "TableWriteThrottlesAlarm")
    table = {"Fn::If": ["MakesTable", {"Ref": "Table"}, {"Ref": "ExistingTableName"}]}

    watched = [
        (
            query["MetricStat"]["Metric"]["Namespace"],
            query["MetricStat"]["Metric"]["MetricName"],
            query["MetricStat"]["Metric"]["Dimensions"],
        )
        for query in properties["Metrics"]
        if "MetricStat" in query
    ]
    assert watched == [
        ("AWS/DynamoDB", "WriteThrottleEvents", [{"Name": "TableName", "Value": table}]),
        (
            "AWS/DynamoDB",
            "WriteThrottleEvents",
            [{"Name": "TableName", "Value": table}, {"Name": "GlobalSecondaryIndexName", "Value": "PendingWakes"}],
        ),
    ]
    (expression,) = [query for query in properties["Metrics"] if query.get("ReturnData", True)]
    assert expression["Expression"] == "FILL(tablewrites, 0) + FILL(pendingwrites, 0)"
    assert (properties["Threshold"], properties["ComparisonOperator"]) == (0, "GreaterThanThreshold")


@pytest.mark.parametrize(
    ("logical_id", "metric"),
    [
        ("SchedulerTargetErrorsAlarm", "TargetErrorCount"),
        ("SchedulerDroppedInvocationsAlarm", "InvocationDroppedCount"),
    ],
)
def test_schedulers_failed_and_dropped_invocations_alarm(
    template: dict[str, Any], logical_id: str, metric: str
) -> None:
    properties = alarm(template, logical_id)

    assert (properties["Namespace"], properties["MetricName"]) == ("AWS/Scheduler", metric)
    assert properties["Dimensions"] == [{"Name": "ScheduleGroup", "Value": {"Ref": "ScheduleGroup"}}]
    assert (properties["Threshold"], properties["ComparisonOperator"]) == (0, "GreaterThanThreshold")


def test_a_sweeper_that_stops_running_is_an_alarm(template: dict[str, Any]) -> None:
    properties = alarm(template, "SweeperHeartbeatAlarm")

    # The metric the sweeper publishes on every run, zero included (wakeup.sweeper.publish).
    assert (properties["Namespace"], properties["MetricName"]) == ("Wakeup", "OverdueWakesRearmed")
    assert properties["Dimensions"] == [{"Name": "service", "Value": "sweeper"}]
    assert properties["Statistic"] == "SampleCount"
    assert (properties["Threshold"], properties["ComparisonOperator"]) == (1, "LessThanThreshold")
    # No data at all is the sweeper not running: a breach, never "fine".
    assert properties["TreatMissingData"] == "breaching"


def test_the_sweeper_publishes_its_heartbeat_on_every_run_even_with_nothing_rearmed() -> None:
    from unittest.mock import patch

    from wakeup.logic import sweeper

    with patch.object(sweeper.metrics, "add_metric") as add_metric:
        sweeper.publish(sweeper.Sweep(overdue=0, rearmed=0, failed=0))

    (call,) = add_metric.call_args_list
    assert (call.kwargs["name"], call.kwargs["value"]) == ("OverdueWakesRearmed", 0)


def test_prod_refuses_to_deploy_without_an_alarm_email(template: dict[str, Any]) -> None:
    refused = refused_by_rules(template, {"Stage": "prod"})
    assert refused == ["Stage prod needs AlarmEmail (an address the alarms are mailed to)."]
    assert not refused_by_rules(template, {"Stage": "prod", "AlarmEmail": "ops@example.com"})
    assert not refused_by_rules(template, {"Stage": "dev"})


def test_the_dashboard_shows_the_new_alarms(template: dict[str, Any]) -> None:
    body = template["Resources"]["Dashboard"]["Properties"]["DashboardBody"]["Fn::Sub"]
    widgets = json.loads(body)["widgets"]

    (status,) = [widget for widget in widgets if widget["type"] == "alarm"]
    assert status["properties"]["alarms"] == [
        "${WakeLatenessAlarm.Arn}",
        "${CallerThrottlesAlarm.Arn}",
        "${TableWriteThrottlesAlarm.Arn}",
        "${SchedulerTargetErrorsAlarm.Arn}",
        "${SchedulerDroppedInvocationsAlarm.Arn}",
        "${SweeperHeartbeatAlarm.Arn}",
    ]
