"""template.yaml: the resources, settings and routes everyone builds against.

docs/architecture.md names the logical ids, settings and table shape; DESIGN section 4 and issue 5
the rest. These tests read the template as CloudFormation receives it (see cfn_template). That
it is lint-clean `make lint` checks (cfn-lint), once.
"""

from __future__ import annotations

import json
import textwrap
import tomllib
from typing import Any

import pytest
import yaml
from cfn_template import REPO, CloudFormationLoader, resources_of_type, sub_variables

from wakeup.api.routes import DEFAULT_ROUTE_FUNCTION, ROUTES
from wakeup_sim.grid import CALLER_MEMORY_MB

SERVICE_OF_FUNCTION = {
    "InstancesFunction": "instances",
    "WakeFunction": "wake",
    "CallerFunction": "caller",
    "SweeperFunction": "sweeper",
    "PlannerFunction": "planner",
}

HANDLER_OF_FUNCTION = {
    "InstancesFunction": ("functions/instances/", "instances_handler.lambda_handler"),
    "WakeFunction": ("functions/wake/", "wake_handler.lambda_handler"),
    "CallerFunction": ("functions/caller/", "caller_handler.lambda_handler"),
    "SweeperFunction": ("functions/sweeper/", "sweeper_handler.lambda_handler"),
    "PlannerFunction": ("functions/planner/", "planner_handler.lambda_handler"),
}
# The planner's own settings (wakeup.logic.planner.PlannerSettings): the caller's mapping and the
# caller's event source parameters it plans with, its assumed delay and margin, and the caller's
# memory at rest and for a burst.
PLANNER_VARIABLES = {
    "WAKEUP_CALLER_MAPPING_UUID": {"Ref": "CallerFunctionCallerQueueMessages"},
    "WAKEUP_CALLER_BATCH_SIZE": {"Ref": "CallerBatchSize"},
    "WAKEUP_CALLER_BATCHING_WINDOW_S": {"Ref": "CallerBatchingWindowSeconds"},
    "WAKEUP_CALLER_MINIMUM_POLLERS": {"Ref": "CallerMinimumPollers"},
    "WAKEUP_CALLER_MAXIMUM_POLLERS": {"Ref": "CallerMaximumPollers"},
    "WAKEUP_PLANNER_UPDATE_DELAY_S": {"Ref": "PlannerUpdateDelaySeconds"},
    "WAKEUP_PLANNER_MARGIN_S": {"Ref": "PlannerMarginSeconds"},
    "WAKEUP_STACK_NAME": {"Ref": "AWS::StackName"},
}

# Properties that give a resource a physical name: a fixed one would keep two stacks of this
# template from living side by side in one account.
NAME_PROPERTIES = {
    "TableName",
    "QueueName",
    "Name",
    "RoleName",
    "FunctionName",
    "LogGroupName",
    "DashboardName",
    "TopicName",
    "AlarmName",
    "LayerName",
}


def test_loader_turns_short_form_tags_into_intrinsic_functions() -> None:
    text = textwrap.dedent(
        """
        a: !Ref Table
        b: !GetAtt SchedulerRole.Arn
        c: !Sub "${Table.Arn}/index/ByAccount"
        d: !Not [!Equals [!Ref AlarmEmail, ""]]
        """
    )

    loaded = yaml.load(text, Loader=CloudFormationLoader)

    assert loaded == {
        "a": {"Ref": "Table"},
        "b": {"Fn::GetAtt": ["SchedulerRole", "Arn"]},
        "c": {"Fn::Sub": "${Table.Arn}/index/ByAccount"},
        "d": {"Fn::Not": [{"Fn::Equals": [{"Ref": "AlarmEmail"}, ""]}]},
    }


def test_the_logical_ids_of_the_architecture_exist(template: dict[str, Any]) -> None:
    expected = {
        "HttpApi": "AWS::Serverless::HttpApi",
        "WakeupLayer": "AWS::Serverless::LayerVersion",
        "InstancesFunction": "AWS::Serverless::Function",
        "WakeFunction": "AWS::Serverless::Function",
        "CallerFunction": "AWS::Serverless::Function",
        "SweeperFunction": "AWS::Serverless::Function",
        "Table": "AWS::DynamoDB::Table",
        "CallerQueue": "AWS::SQS::Queue",
        "CallerDeadLetterQueue": "AWS::SQS::Queue",
        "ScheduleGroup": "AWS::Scheduler::ScheduleGroup",
        "SchedulerRole": "AWS::IAM::Role",
        "SchedulesDeadLetterQueue": "AWS::SQS::Queue",
        "Dashboard": "AWS::CloudWatch::Dashboard",
        "AlarmTopic": "AWS::SNS::Topic",
    }

    found = {logical_id: template["Resources"].get(logical_id, {}).get("Type") for logical_id in expected}

    assert found == expected


def test_globals_give_every_function_the_runtime_tracing_layer_and_settings(
    template: dict[str, Any],
) -> None:
    function_globals = template["Globals"]["Function"]
    variables = function_globals["Environment"]["Variables"]

    assert function_globals["Runtime"] == "python3.13"
    assert function_globals["Architectures"] == ["arm64"]
    assert function_globals["Tracing"] == {"Ref": "Tracing"}
    assert template["Parameters"]["Tracing"]["Default"] == "PassThrough"
    assert function_globals["Layers"] == [{"Ref": "WakeupLayer"}]
    assert variables == {
        "POWERTOOLS_METRICS_NAMESPACE": "Wakeup",
        "POWERTOOLS_LOG_LEVEL": {"Ref": "LogLevel"},
        # Powertools' Tracer only when Lambda traces the function (wakeup.observability).
        "POWERTOOLS_TRACE_DISABLED": {"Fn::If": ["TracingActive", "false", "true"]},
        # The stack's own table, or the one it adopts (test_template_safety.py).
        "WAKEUP_TABLE": {"Fn::If": ["MakesTable", {"Ref": "Table"}, {"Ref": "ExistingTableName"}]},
        "WAKEUP_QUEUE_URL": {"Ref": "CallerQueue"},
        "WAKEUP_SCHEDULE_GROUP": {"Ref": "ScheduleGroup"},
        "WAKEUP_CALLER_ARN": {
            "Fn::Sub": "arn:${AWS::Partition}:lambda:${AWS::Region}:${AWS::AccountId}:function:${AWS::StackName}-caller"
        },
        "WAKEUP_SCHEDULER_ROLE_ARN": {"Fn::GetAtt": ["SchedulerRole", "Arn"]},
        "WAKEUP_SCHEDULES_DLQ_ARN": {"Fn::GetAtt": ["SchedulesDeadLetterQueue", "Arn"]},
        "WAKEUP_MAX_WAKE_AGE_S": {"Ref": "MaxWakeAgeSeconds"},
        "WAKEUP_SQS_HORIZON_S": {"Ref": "SqsHorizonSeconds"},
        "WAKEUP_SCHEDULE_LEAD_S": {"Ref": "ScheduleLeadSeconds"},
        "WAKEUP_MAX_INSTANCES_PER_ACCOUNT": {"Ref": "MaxInstancesPerAccount"},
        "WAKEUP_MAX_WAKES_PER_WINDOW": {"Ref": "MaxWakesPerWindow"},
        "WAKEUP_WAKE_WINDOW_S": {"Ref": "WakeWindowSeconds"},
        "WAKEUP_CALL_DENIED_CIDRS": {"Ref": "CallDeniedCidrs"},
        "WAKEUP_CALL_ALLOWED_CIDRS": {"Ref": "CallAllowedCidrs"},
        "WAKEUP_CALL_HTTPS_ONLY": {"Ref": "CallHttpsOnly"},
        "WAKEUP_CALL_ALLOWED_PORTS": {"Ref": "CallAllowedPorts"},
    }


def test_settings_parameters_default_to_the_architecture_defaults(template: dict[str, Any]) -> None:
    parameters = template["Parameters"]

    defaults = {name: parameters[name]["Default"] for name in parameters}

    assert defaults["SqsHorizonSeconds"] == 840
    assert parameters["SqsHorizonSeconds"]["MaxValue"] == 900
    assert defaults["ScheduleLeadSeconds"] == 90
    assert defaults["MaxWakeAgeSeconds"] == 0
    assert defaults["AlarmEmail"] == ""
    assert {"Stage", "LogLevel", "LogRetentionDays"} <= set(parameters)


def test_the_caller_arn_setting_names_the_caller_function(template: dict[str, Any]) -> None:
    caller_arn = template["Globals"]["Function"]["Environment"]["Variables"]["WAKEUP_CALLER_ARN"]["Fn::Sub"]

    function_name = template["Resources"]["CallerFunction"]["Properties"]["FunctionName"]["Fn::Sub"]

    assert caller_arn.endswith(f":function:{function_name}")


@pytest.mark.parametrize("logical_id", sorted(SERVICE_OF_FUNCTION))
def test_each_functions_code_folder_has_its_requirements_file_so_sam_build_says_nothing(
    template: dict[str, Any], logical_id: str
) -> None:
    # Its packages come from the layer; without the (empty) file, `sam build`'s pip builder
    # (aws-lambda-builders' PythonPipWorkflow) warns "requirements.txt file not found".
    code_uri = template["Resources"][logical_id]["Properties"]["CodeUri"]

    assert (REPO / code_uri / "requirements.txt").is_file()


@pytest.mark.parametrize("logical_id", sorted(SERVICE_OF_FUNCTION))
def test_each_function_has_its_handler_code_folder_and_service_name(template: dict[str, Any], logical_id: str) -> None:
    properties = template["Resources"][logical_id]["Properties"]
    code_uri, handler = HANDLER_OF_FUNCTION[logical_id]

    assert (properties["CodeUri"], properties["Handler"]) == (code_uri, handler)
    assert (REPO / code_uri).is_dir()
    variables = dict(properties["Environment"]["Variables"])
    if logical_id == "CallerFunction":  # only the caller signs wakes
        assert variables.pop("WAKEUP_MASTER_KEY_SECRET") == {
            "Fn::If": ["MakesMasterKey", {"Ref": "SigningMasterKey"}, {"Ref": "ExistingMasterKeySecretArn"}]
        }
    if logical_id == "PlannerFunction":
        assert {name: variables.pop(name) for name in PLANNER_VARIABLES} == PLANNER_VARIABLES
    if logical_id == "InstancesFunction":  # only the account routes count an account's requests
        assert variables.pop("WAKEUP_ACCOUNT_REQUESTS_PER_S") == {"Ref": "AccountRequestsPerSecond"}
    assert variables == {"POWERTOOLS_SERVICE_NAME": SERVICE_OF_FUNCTION[logical_id]}


@pytest.mark.parametrize("logical_id", sorted(SERVICE_OF_FUNCTION))
def test_each_function_logs_to_its_own_log_group_with_retention(template: dict[str, Any], logical_id: str) -> None:
    log_group_ref = template["Resources"][logical_id]["Properties"]["LoggingConfig"]["LogGroup"]

    log_group = template["Resources"][log_group_ref["Ref"]]

    assert log_group["Type"] == "AWS::Logs::LogGroup"
    assert log_group["Properties"]["RetentionInDays"] == {"Ref": "LogRetentionDays"}


@pytest.mark.parametrize("logical_id", sorted(SERVICE_OF_FUNCTION))
def test_each_function_logs_json_without_lambdas_own_lines_and_its_application_at_info_at_least(
    template: dict[str, Any], logical_id: str
) -> None:
    config = template["Resources"][logical_id]["Properties"]["LoggingConfig"]
    # JSON: Lambda filters by level only in that format ("Log-level filtering").
    assert config["LogFormat"] == "JSON"
    assert config["SystemLogLevel"] == {"Ref": "SystemLogLevel"}
    assert template["Parameters"]["SystemLogLevel"]["Default"] == "WARN"
    # DEBUG when LogLevel asks for it, else INFO: the metrics' EMF lines have no level (INFO).
    assert config["ApplicationLogLevel"] == {"Fn::If": ["LogsDebug", "DEBUG", "INFO"]}
    assert template["Conditions"]["LogsDebug"] == {"Fn::Equals": [{"Ref": "LogLevel"}, "DEBUG"]}


def test_function_log_groups_are_not_shared(template: dict[str, Any]) -> None:
    log_groups = [
        template["Resources"][logical_id]["Properties"]["LoggingConfig"]["LogGroup"]["Ref"]
        for logical_id in SERVICE_OF_FUNCTION
    ]

    assert len(set(log_groups)) == len(SERVICE_OF_FUNCTION)


def test_http_api_routes_are_the_contract_and_the_default_route(template: dict[str, Any]) -> None:
    routes = set()
    for logical_id, function in resources_of_type(template, "AWS::Serverless::Function").items():
        for event in function["Properties"].get("Events", {}).values():
            if event["Type"] == "HttpApi":
                properties = event["Properties"]
                assert properties["ApiId"] == {"Ref": "HttpApi"}
                # SAM makes an HttpApi event with neither Path nor Method the `$default` route.
                route = f"{properties['Method']} {properties['Path']}" if "Path" in properties else "$default"
                routes.add((route, logical_id))

    # The routes are written once, in the layer (`wakeup.api.routes`); SAM needs them here literally.
    assert routes == {(route.key, route.function) for route in ROUTES} | {("$default", DEFAULT_ROUTE_FUNCTION)}


def test_http_api_throttles_routes_and_writes_json_access_logs(template: dict[str, Any]) -> None:
    properties = template["Resources"]["HttpApi"]["Properties"]
    access_logs = properties["AccessLogSettings"]

    log_group = template["Resources"][access_logs["DestinationArn"]["Fn::GetAtt"][0]]

    assert set(properties["DefaultRouteSettings"]) == {"ThrottlingRateLimit", "ThrottlingBurstLimit"}
    assert "$context.requestId" in access_logs["Format"]
    assert "Authorization" not in access_logs["Format"]
    assert log_group["Properties"]["RetentionInDays"] == {"Ref": "LogRetentionDays"}


def test_access_log_format_is_json_once_api_gateway_fills_it(template: dict[str, Any]) -> None:
    log_format = template["Resources"]["HttpApi"]["Properties"]["AccessLogSettings"]["Format"]

    record = json.loads(log_format.replace("$context.", "context-"))

    assert record["status"] == "context-status"


def test_caller_reads_its_queue_in_batches_with_partial_failures(template: dict[str, Any]) -> None:
    caller = template["Resources"]["CallerFunction"]["Properties"]
    sqs_events = [event for event in caller["Events"].values() if event["Type"] == "SQS"]

    assert sqs_events == [
        {
            "Type": "SQS",
            "Properties": {
                "Queue": {"Fn::GetAtt": ["CallerQueue", "Arn"]},
                "BatchSize": {"Ref": "CallerBatchSize"},
                "MaximumBatchingWindowInSeconds": {"Ref": "CallerBatchingWindowSeconds"},
                "FunctionResponseTypes": ["ReportBatchItemFailures"],
                "ProvisionedPollerConfig": {
                    "Fn::If": [
                        "HasProvisionedPollers",
                        {
                            "MinimumPollers": {"Ref": "CallerMinimumPollers"},
                            "MaximumPollers": {"Ref": "CallerMaximumPollers"},
                        },
                        {"Ref": "AWS::NoValue"},
                    ]
                },
            },
        }
    ]
    assert template["Conditions"]["HasProvisionedPollers"] == {
        "Fn::Not": [{"Fn::Equals": [{"Ref": "CallerMinimumPollers"}, "0"]}]
    }


def test_the_templates_defaults_are_sized_for_a_burst_of_ten_thousand(template: dict[str, Any]) -> None:
    # The simulator's figures (docs/scaling.md) for 10,000 wakes due at one second, and 10,000 hosts
    # registering in one second, run with these; tests/unit/test_simulation.py holds the goals.
    defaults = {name: parameter["Default"] for name, parameter in template["Parameters"].items()}
    assert defaults["CallerBatchSize"] == 10 and defaults["CallerBatchingWindowSeconds"] == 1
    # No poller at rest: the planner raises 100 for a burst of 10,000 the schedule shows, and
    # allows up to 100 (wakeup.logic.planner).
    assert (defaults["CallerMinimumPollers"], defaults["CallerMaximumPollers"]) == (0, 100)
    assert defaults["PlannerEnabled"] == "true"
    # The caller's one memory: nothing changes it (the planner changes only its event source), and it
    # is the size the simulator's grid holds its bound with (docs/scaling.md, "The caller's memory").
    assert defaults["CallerMemorySize"] == CALLER_MEMORY_MB and "CallerBurstMemorySize" not in defaults
    assert defaults["WakeMemorySize"] == 384  # a far wake under $8.50 a million, registrations still accepted
    assert (defaults["TableWarmWriteUnitsPerSecond"], defaults["TableWarmReadUnitsPerSecond"]) == (40000, 12000)
    # The account's API Gateway quota ("Amazon API Gateway quotas"): 10,000 a second, a burst of 5,000.
    assert (defaults["ApiThrottlingRateLimit"], defaults["ApiThrottlingBurstLimit"]) == (10000, 5000)
    caller = template["Resources"]["CallerFunction"]["Properties"]
    table = template["Resources"]["Table"]["Properties"]
    assert caller["MemorySize"] == {"Ref": "CallerMemorySize"}
    assert template["Resources"]["WakeFunction"]["Properties"]["MemorySize"] == {"Ref": "WakeMemorySize"}
    assert table["WarmThroughput"] == {
        "WriteUnitsPerSecond": {"Ref": "TableWarmWriteUnitsPerSecond"},
        "ReadUnitsPerSecond": {"Ref": "TableWarmReadUnitsPerSecond"},
    }


def test_the_pending_wakes_index_takes_a_bursts_writes_as_the_table_does(template: dict[str, Any]) -> None:
    # Each wake of a burst writes the PendingWakes index (a registration puts its entry, an outcome
    # deletes it). An index has warm throughput of its own, a new on-demand one 4,000 writes a
    # second ("Understanding DynamoDB warm throughput"), and an index that cannot take its writes
    # throttles the table's writes that cause them ("Understanding global secondary index (GSI)
    # write throttling and back pressure in DynamoDB"): the table's warmth alone would not do.
    table = template["Resources"]["Table"]["Properties"]
    [pending] = [i for i in table["GlobalSecondaryIndexes"] if i["IndexName"] == "PendingWakes"]
    assert pending["WarmThroughput"]["WriteUnitsPerSecond"] == {"Ref": "TableWarmWriteUnitsPerSecond"}


def test_callers_retry_chain_through_its_own_queue_is_not_stopped_as_a_recursive_loop(
    template: dict[str, Any],
) -> None:
    # Lambda stops SQS -> function -> same SQS after about 16 hops unless the function allows it.
    assert template["Resources"]["CallerFunction"]["Properties"]["RecursiveLoop"] == "Allow"


def test_caller_queue_visibility_timeout_is_at_least_six_caller_timeouts(template: dict[str, Any]) -> None:
    caller_timeout = template["Resources"]["CallerFunction"]["Properties"]["Timeout"]

    visibility_timeout = template["Resources"]["CallerQueue"]["Properties"]["VisibilityTimeout"]

    assert visibility_timeout >= 6 * caller_timeout


def test_caller_queue_redrives_to_its_dead_letter_queue_after_five_receives(template: dict[str, Any]) -> None:
    redrive = template["Resources"]["CallerQueue"]["Properties"]["RedrivePolicy"]

    assert redrive == {"deadLetterTargetArn": {"Fn::GetAtt": ["CallerDeadLetterQueue", "Arn"]}, "maxReceiveCount": 5}


@pytest.mark.parametrize(
    "logical_id", ["CallerQueue", "CallerDeadLetterQueue", "SchedulesDeadLetterQueue", "CallerFailedEventsQueue"]
)
def test_queues_are_encrypted(template: dict[str, Any], logical_id: str) -> None:
    assert template["Resources"][logical_id]["Properties"]["SqsManagedSseEnabled"] is True


@pytest.mark.parametrize("logical_id", ["CallerDeadLetterQueue", "SchedulesDeadLetterQueue", "CallerFailedEventsQueue"])
def test_dead_letter_queues_keep_messages_fourteen_days(template: dict[str, Any], logical_id: str) -> None:
    assert template["Resources"][logical_id]["Properties"]["MessageRetentionPeriod"] == 14 * 24 * 3600


def test_the_signing_master_key_is_generated_long_and_retained(template: dict[str, Any]) -> None:
    secret = template["Resources"]["SigningMasterKey"]

    assert secret["Type"] == "AWS::SecretsManager::Secret"
    assert (secret["DeletionPolicy"], secret["UpdateReplacePolicy"]) == ("Retain", "Retain")
    assert "SecretString" not in secret["Properties"]  # never written in the template
    assert secret["Properties"]["GenerateSecretString"]["PasswordLength"] >= 64


def test_table_is_retained_and_recoverable(template: dict[str, Any]) -> None:
    table = template["Resources"]["Table"]

    assert (table["DeletionPolicy"], table["UpdateReplacePolicy"]) == ("Retain", "Retain")
    assert table["Properties"]["BillingMode"] == "PAY_PER_REQUEST"
    assert table["Properties"]["PointInTimeRecoverySpecification"] == {"PointInTimeRecoveryEnabled": True}


def test_table_key_and_indexes_are_those_of_the_architecture(template: dict[str, Any]) -> None:
    properties = template["Resources"]["Table"]["Properties"]

    indexes = {
        index["IndexName"]: (
            [(key["AttributeName"], key["KeyType"]) for key in index["KeySchema"]],
            index["Projection"]["ProjectionType"],
        )
        for index in properties["GlobalSecondaryIndexes"]
    }

    assert properties["KeySchema"] == [{"AttributeName": "pk", "KeyType": "HASH"}]
    assert {a["AttributeName"]: a["AttributeType"] for a in properties["AttributeDefinitions"]} == {
        "pk": "S",
        "list_pk": "S",
        "list_sk": "S",
        "pending_shard": "S",
        "pending_due": "S",
    }
    assert indexes == {
        "ByAccount": ([("list_pk", "HASH"), ("list_sk", "RANGE")], "KEYS_ONLY"),
        "PendingWakes": ([("pending_shard", "HASH"), ("pending_due", "RANGE")], "KEYS_ONLY"),
    }


def test_sweeper_runs_every_minute(template: dict[str, Any]) -> None:
    events = template["Resources"]["SweeperFunction"]["Properties"]["Events"]

    schedules = [event["Properties"]["Schedule"] for event in events.values() if event["Type"] == "Schedule"]

    assert schedules == ["rate(1 minute)"]


def test_no_resource_has_a_fixed_physical_name(template: dict[str, Any]) -> None:
    fixed = []
    for logical_id, resource in template["Resources"].items():
        for name_property in NAME_PROPERTIES & set(resource.get("Properties", {})):
            name = resource["Properties"][name_property]
            derived = isinstance(name, dict) and "${AWS::StackName}" in str(name.get("Fn::Sub", ""))
            if not derived:
                fixed.append(f"{logical_id}.{name_property}")

    assert fixed == []


def test_every_sub_variable_names_a_parameter_resource_or_pseudo_parameter(template: dict[str, Any]) -> None:
    # SAM names an SQS event's mapping <function><event> ("Generated CloudFormation resources").
    generated = {
        f"{logical_id}{event_id}"
        for logical_id, function in resources_of_type(template, "AWS::Serverless::Function").items()
        for event_id, event in function["Properties"].get("Events", {}).items()
        if event["Type"] == "SQS"
    }
    known = set(template["Parameters"]) | set(template["Resources"]) | generated
    unknown = []

    def visit(node: Any) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if key == "Fn::Sub" and isinstance(value, str):
                    for variable in sub_variables(value):
                        name = variable.split(".", 1)[0]
                        if not (name.startswith("AWS::") or name in known):
                            unknown.append(variable)
                visit(value)
        elif isinstance(node, list):
            for item in node:
                visit(item)

    visit(template)

    assert unknown == []


def test_layer_is_built_for_python313_on_arm64(template: dict[str, Any]) -> None:
    layer = template["Resources"]["WakeupLayer"]

    assert layer["Properties"]["ContentUri"] == "layers/wakeup/"
    assert layer["Properties"]["CompatibleRuntimes"] == ["python3.13"]
    assert layer["Metadata"] == {"BuildMethod": "python3.13", "BuildArchitecture": "arm64"}
    assert (REPO / "layers/wakeup/wakeup/__init__.py").is_file()


def test_layer_pins_match_the_projects_pins() -> None:
    def pins(lines: list[str]) -> dict[str, str]:
        found = {}
        for line in lines:
            requirement = line.split("#", 1)[0].strip()
            if "==" in requirement:
                name, version = requirement.split("==", 1)
                found[name.strip().lower()] = version.strip()
        return found

    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    layer_pins = pins((REPO / "layers/wakeup/requirements.txt").read_text(encoding="utf-8").splitlines())
    project_pins = pins(project["project"]["dependencies"])

    assert set(layer_pins) == {"aws-lambda-powertools[tracer]", "pydantic", "idna", "boto3"}
    assert {name: project_pins.get(name) for name in layer_pins} == layer_pins


def test_outputs_name_what_an_operator_and_the_tests_need(template: dict[str, Any]) -> None:
    assert {
        "ApiUrl",
        "TableName",
        "CallerQueueUrl",
        "CallerDeadLetterQueueUrl",
        "SchedulesDeadLetterQueueUrl",
        "ScheduleGroupName",
        "DashboardUrl",
    } <= set(template["Outputs"])
