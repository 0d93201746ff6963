"""template.yaml's IAM, as SAM transforms it (the roles and policies CloudFormation creates, SAM's
own additions included): each function and the Scheduler role get only the actions they use, on
their own resources.

Every statement names its actions one by one (no `*` in an action) and specific resources. The
exceptions, each with its reason:

- `schedule/<group>/*` in the scheduler statements: the schedules are created at run time, one per
  instance and named after it, so the statement names every schedule of this stack's own group
  (and no other group).
- `*` for the caller's X-Ray actions: X-Ray has no resource-level permissions.
- Managed policies that SAM attaches to the roles it makes: AWSLambdaBasicExecutionRole (logs, on
  `*`) and AWSXrayWriteOnlyAccess (`Tracing: Active`). The caller has a role of its own, with no
  managed policy: SAM would attach AWSLambdaSQSQueueExecutionRole (receive and delete on every
  queue) for its SQS event. The template itself names no managed policy and no SAM policy template.
"""

from __future__ import annotations

from typing import Any

import pytest
from cfn_template import resources_of_type

SCHEDULES_OF_THE_GROUP = {
    "Fn::Sub": "arn:${AWS::Partition}:scheduler:${AWS::Region}:${AWS::AccountId}:schedule/${ScheduleGroup}/*"
}
OWN_STACK = {
    "Fn::Sub": "arn:${AWS::Partition}:cloudformation:${AWS::Region}:${AWS::AccountId}:stack/${AWS::StackName}/*"
}
CALLER_ARN = {
    "Fn::Sub": "arn:${AWS::Partition}:lambda:${AWS::Region}:${AWS::AccountId}:function:${AWS::StackName}-caller"
}
# The stack's own table or the one it adopts (ExistingTableName), and likewise the master key.
TABLE_NAME = {"Fn::If": ["MakesTable", {"Ref": "Table"}, {"Ref": "ExistingTableName"}]}


def table_arn(suffix: str = "") -> dict[str, Any]:
    arn = "arn:${AWS::Partition}:dynamodb:${AWS::Region}:${AWS::AccountId}:table/${TableName}" + suffix
    return {"Fn::Sub": [arn, {"TableName": TABLE_NAME}]}


TABLE = table_arn()
MASTER_KEY = {"Fn::If": ["MakesMasterKey", {"Ref": "SigningMasterKey"}, {"Ref": "ExistingMasterKeySecretArn"}]}
CALLER_QUEUE = {"Fn::GetAtt": ["CallerQueue", "Arn"]}
CALLER_FAILED_EVENTS = {"Fn::GetAtt": ["CallerFailedEventsQueue", "Arn"]}
CALLER_LOG_GROUP = {"Fn::GetAtt": ["CallerLogGroup", "Arn"]}
SCHEDULER_ROLE = {"Fn::GetAtt": ["SchedulerRole", "Arn"]}
# SAM names the caller's SQS mapping <function><event>; its Ref is the mapping's UUID.
CALLER_MAPPING = {
    "Fn::Sub": "arn:${AWS::Partition}:lambda:${AWS::Region}:${AWS::AccountId}:event-source-mapping:"
    "${CallerFunctionCallerQueueMessages}"
}

# What each function may do, action by action, on which resource: the calls its code makes
# (wakeup.table's DynamoDB calls, wakeup.triggers' SQS and Scheduler calls). A change here is a
# change of privilege: make it on purpose, together with the code that needs it.
EXPECTED_GRANTS: dict[str, set[tuple[str, str]]] = {
    # Auth reads, registration (a transaction of two Puts and a ConditionCheck on the account),
    # a move (Update), a delete (a transaction of two Deletes), listing, and removing the schedule
    # a moved or deleted instance may have left.
    "InstancesFunction": {
        ("dynamodb:GetItem", repr(TABLE)),
        ("dynamodb:PutItem", repr(TABLE)),
        ("dynamodb:UpdateItem", repr(TABLE)),
        ("dynamodb:DeleteItem", repr(TABLE)),
        ("dynamodb:ConditionCheckItem", repr(TABLE)),
        # Items by key: an instance's history, and what a keys-only listing finds.
        ("dynamodb:BatchGetItem", repr(TABLE)),
        ("dynamodb:Query", repr(table_arn("/index/ByAccount"))),
        ("scheduler:DeleteSchedule", repr(SCHEDULES_OF_THE_GROUP)),
    },
    # Auth and re-read (Get), the registration (Update), arming near (SQS) or far (a schedule,
    # created or replaced), and removing the schedule of a replaced far wake.
    "WakeFunction": {
        ("dynamodb:GetItem", repr(TABLE)),
        ("dynamodb:UpdateItem", repr(TABLE)),
        ("sqs:SendMessage", repr(CALLER_QUEUE)),
        ("scheduler:CreateSchedule", repr(SCHEDULES_OF_THE_GROUP)),
        ("scheduler:UpdateSchedule", repr(SCHEDULES_OF_THE_GROUP)),
        ("scheduler:DeleteSchedule", repr(SCHEDULES_OF_THE_GROUP)),
        ("iam:PassRole", repr(SCHEDULER_ROLE)),
    },
    # Claim and record (Update, which also reads), the account's signing versions (GetItem), and
    # re-arm: the last approach and
    # retries through SQS, a trigger for a far registration through a schedule. Schedules delete
    # themselves after firing. Then what its own role must grant that SAM would have: its queue as
    # an event source (on that queue only), the destination of failed asynchronous events, its logs
    # and traces.
    "CallerFunction": {
        ("dynamodb:GetItem", repr(TABLE)),
        # An invocation's calls kept in their instances' history (attempt items), together.
        ("dynamodb:BatchWriteItem", repr(TABLE)),
        ("dynamodb:UpdateItem", repr(TABLE)),
        ("sqs:SendMessage", repr(CALLER_QUEUE)),
        ("scheduler:CreateSchedule", repr(SCHEDULES_OF_THE_GROUP)),
        ("scheduler:UpdateSchedule", repr(SCHEDULES_OF_THE_GROUP)),
        ("iam:PassRole", repr(SCHEDULER_ROLE)),
        ("sqs:ReceiveMessage", repr(CALLER_QUEUE)),
        ("sqs:DeleteMessage", repr(CALLER_QUEUE)),
        ("sqs:GetQueueAttributes", repr(CALLER_QUEUE)),
        ("sqs:SendMessage", repr(CALLER_FAILED_EVENTS)),
        ("logs:CreateLogStream", repr(CALLER_LOG_GROUP)),
        ("logs:PutLogEvents", repr(CALLER_LOG_GROUP)),
        ("xray:PutTraceSegments", repr("*")),
        ("xray:PutTelemetryRecords", repr("*")),
        ("xray:GetSamplingRules", repr("*")),
        ("xray:GetSamplingTargets", repr("*")),
        # The master key its signatures are derived from, and no other secret.
        ("secretsmanager:GetSecretValue", repr(MASTER_KEY)),
    },
    # Overdue wakes from the sparse index (keys only, then their items by key), postponed (Update)
    # and re-armed for now: through SQS.
    "SweeperFunction": {
        ("dynamodb:Query", repr(table_arn("/index/PendingWakes"))),
        ("dynamodb:BatchGetItem", repr(TABLE)),
        ("dynamodb:UpdateItem", repr(TABLE)),
        ("sqs:SendMessage", repr(CALLER_QUEUE)),
    },
    # The coming wakes counted from the sparse index (keys only, no item read), and the caller's
    # SQS mapping read and changed: that mapping alone, no other mapping; and its own stack's
    # status and change sets read (a deploy under way), no other stack. No function's configuration.
    "PlannerFunction": {
        ("dynamodb:Query", repr(table_arn("/index/PendingWakes"))),
        ("lambda:GetEventSourceMapping", repr(CALLER_MAPPING)),
        ("lambda:UpdateEventSourceMapping", repr(CALLER_MAPPING)),
        ("cloudformation:DescribeStacks", repr(OWN_STACK)),
        ("cloudformation:ListChangeSets", repr(OWN_STACK)),
    },
}

# The resources that may end in a wildcard, and why (see the module docstring).
WILDCARD_RESOURCES_ALLOWED = {repr(SCHEDULES_OF_THE_GROUP), repr(OWN_STACK)}
XRAY_ACTIONS = {"xray:PutTraceSegments", "xray:PutTelemetryRecords", "xray:GetSamplingRules", "xray:GetSamplingTargets"}

# The managed policies SAM attaches to the roles it makes for the functions.
SAM_MANAGED = {
    "arn:aws:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole",
    "arn:aws:iam::aws:policy/AWSXrayWriteOnlyAccess",
}
EXPECTED_MANAGED_POLICIES = {
    "InstancesFunction": SAM_MANAGED,
    "WakeFunction": SAM_MANAGED,
    "CallerFunction": set(),
    "SweeperFunction": SAM_MANAGED,
    "PlannerFunction": SAM_MANAGED,
}


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def role_of(transformed: dict[str, Any], function_id: str) -> str:
    """The logical id of the role a function runs with, after SAM's transform."""
    role = transformed["Resources"][function_id]["Properties"]["Role"]
    assert isinstance(role, dict) and set(role) == {"Fn::GetAtt"} and role["Fn::GetAtt"][1] == "Arn"
    return str(role["Fn::GetAtt"][0])


def all_statements(transformed: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """Every IAM policy statement of the transformed template, with the function (or the role, for
    a role no function runs with) that holds it."""
    holder_of_role = {role_of(transformed, f): f for f in resources_of_type(transformed, "AWS::Lambda::Function")}
    statements = []
    for logical_id, role in resources_of_type(transformed, "AWS::IAM::Role").items():
        holder = holder_of_role.get(logical_id, logical_id)
        for policy in role["Properties"].get("Policies", []):
            statements += [(holder, statement) for statement in policy["PolicyDocument"]["Statement"]]
    for logical_id, policy in resources_of_type(transformed, "AWS::IAM::Policy").items():
        statements += [(logical_id, statement) for statement in policy["Properties"]["PolicyDocument"]["Statement"]]
    return statements


def grants_of(transformed: dict[str, Any], logical_id: str) -> set[tuple[str, str]]:
    return {
        (action, repr(resource))
        for holder, statement in all_statements(transformed)
        if holder == logical_id
        for action in as_list(statement["Action"])
        for resource in as_list(statement["Resource"])
    }


def test_the_template_holds_iam_statements_to_check(transformed: dict[str, Any]) -> None:
    holders = {holder for holder, _ in all_statements(transformed)}

    assert holders == {*EXPECTED_GRANTS, "SchedulerRole"}


def test_every_statement_allows_named_actions_only(transformed: dict[str, Any]) -> None:
    broad = [
        (holder, action)
        for holder, statement in all_statements(transformed)
        for action in as_list(statement["Action"])
        if "*" in action or ":" not in action
    ]

    assert broad == []


def test_every_statement_is_an_allow_on_specific_resources(transformed: dict[str, Any]) -> None:
    broad = []
    for holder, statement in all_statements(transformed):
        assert statement["Effect"] == "Allow"
        assert "NotAction" not in statement and "NotResource" not in statement
        xray_only = set(as_list(statement["Action"])) <= XRAY_ACTIONS
        for resource in as_list(statement["Resource"]):
            if resource == "*" and xray_only:
                continue
            if "*" in repr(resource) and repr(resource) not in WILDCARD_RESOURCES_ALLOWED:
                broad.append((holder, statement.get("Sid"), resource))

    assert broad == []


def test_functions_name_no_managed_policy_or_policy_template(template: dict[str, Any]) -> None:
    not_inline = [
        (logical_id, policy)
        for logical_id, function in resources_of_type(template, "AWS::Serverless::Function").items()
        for policy in function["Properties"].get("Policies", [])
        if not (isinstance(policy, dict) and set(policy) == {"Version", "Statement"})
    ]

    assert not_inline == []


@pytest.mark.parametrize("logical_id", sorted(EXPECTED_GRANTS))
def test_each_function_gets_exactly_its_grants(transformed: dict[str, Any], logical_id: str) -> None:
    assert grants_of(transformed, logical_id) == EXPECTED_GRANTS[logical_id]


@pytest.mark.parametrize("logical_id", sorted(EXPECTED_MANAGED_POLICIES))
def test_each_function_gets_exactly_its_managed_policies(transformed: dict[str, Any], logical_id: str) -> None:
    role = transformed["Resources"][role_of(transformed, logical_id)]["Properties"]
    attached = {substitute_partition(arn) for arn in role.get("ManagedPolicyArns", [])}
    assert attached == EXPECTED_MANAGED_POLICIES[logical_id]


def test_no_role_may_receive_or_delete_on_every_queue(transformed: dict[str, Any]) -> None:
    attached = [
        (logical_id, arn)
        for logical_id, role in resources_of_type(transformed, "AWS::IAM::Role").items()
        for arn in role["Properties"].get("ManagedPolicyArns", [])
        if "SQS" in repr(arn)
    ]
    assert attached == []


def test_the_caller_queue_feeds_the_caller_by_its_own_role(transformed: dict[str, Any]) -> None:
    mappings = resources_of_type(transformed, "AWS::Lambda::EventSourceMapping")
    assert [m["Properties"]["EventSourceArn"] for m in mappings.values()] == [CALLER_QUEUE]
    assert role_of(transformed, "CallerFunction") == "CallerRole"


def test_the_mapping_the_planner_may_change_is_the_callers(transformed: dict[str, Any]) -> None:
    # The id the planner's policy and environment name is the one SAM gave the caller's mapping.
    assert list(resources_of_type(transformed, "AWS::Lambda::EventSourceMapping")) == [
        "CallerFunctionCallerQueueMessages"
    ]
    environment = transformed["Resources"]["PlannerFunction"]["Properties"]["Environment"]["Variables"]
    assert environment["WAKEUP_CALLER_MAPPING_UUID"] == {"Ref": "CallerFunctionCallerQueueMessages"}


def substitute_partition(arn: Any) -> str:
    """A managed policy's ARN as SAM writes it, `${AWS::Partition}` taken as `aws`."""
    if isinstance(arn, dict) and "Fn::Sub" in arn:
        return str(arn["Fn::Sub"]).replace("${AWS::Partition}", "aws")
    return str(arn)


def test_only_the_wake_and_caller_may_pass_the_scheduler_role_and_only_to_scheduler(
    transformed: dict[str, Any],
) -> None:
    passing = {}
    for holder, statement in all_statements(transformed):
        if "iam:PassRole" in as_list(statement["Action"]):
            passing[holder] = (statement["Resource"], statement.get("Condition"))

    assert passing == {
        holder: (SCHEDULER_ROLE, {"StringEquals": {"iam:PassedToService": "scheduler.amazonaws.com"}})
        for holder in ("WakeFunction", "CallerFunction")
    }


def test_scheduler_role_may_only_invoke_the_caller_and_dead_letter(transformed: dict[str, Any]) -> None:
    assert grants_of(transformed, "SchedulerRole") == {
        ("lambda:InvokeFunction", repr(CALLER_ARN)),
        ("sqs:SendMessage", repr({"Fn::GetAtt": ["SchedulesDeadLetterQueue", "Arn"]})),
    }


def test_scheduler_role_trusts_only_scheduler_acting_for_this_account(template: dict[str, Any]) -> None:
    # aws:SourceArn, the schedule group's ARN, is the confused-deputy condition of "Set up the
    # execution role" (EventBridge Scheduler user guide,
    # https://docs.aws.amazon.com/scheduler/latest/UserGuide/setting-up.html#setting-up-execution-role):
    # only schedules of this stack's group may use the role.
    trust = template["Resources"]["SchedulerRole"]["Properties"]["AssumeRolePolicyDocument"]["Statement"]

    assert trust == [
        {
            "Effect": "Allow",
            "Principal": {"Service": "scheduler.amazonaws.com"},
            "Action": "sts:AssumeRole",
            "Condition": {
                "StringEquals": {
                    "aws:SourceAccount": {"Ref": "AWS::AccountId"},
                    "aws:SourceArn": {"Fn::GetAtt": ["ScheduleGroup", "Arn"]},
                }
            },
        }
    ]


def test_caller_arn_granted_to_scheduler_is_the_caller_functions_name(template: dict[str, Any]) -> None:
    function_name = template["Resources"]["CallerFunction"]["Properties"]["FunctionName"]["Fn::Sub"]

    assert CALLER_ARN["Fn::Sub"].endswith(f":function:{function_name}")
