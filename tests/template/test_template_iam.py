"""template.yaml's IAM: each function and the Scheduler role get only the actions they use, on
their own resources.

Every statement names its actions one by one (no `*` in an action) and specific resources. The
exceptions, each with its reason:

- `schedule/<group>/*` in the scheduler statements: the schedules are created at run time, one per
  instance and named after it, so the statement names every schedule of this stack's own group
  (and no other group).
- Managed policies that SAM attaches by itself, outside this template: AWSLambdaBasicExecutionRole
  (logs, on `*`), AWSXrayWriteOnlyAccess (X-Ray has no resource-level permissions; `Tracing:
  Active`) and, for the caller's SQS event, AWSLambdaSQSQueueExecutionRole (receive and delete on
  `*`). The template itself names no managed policy and no SAM policy template.
"""

from __future__ import annotations

from typing import Any

import pytest
from cfn_template import resources_of_type

SCHEDULES_OF_THE_GROUP = {
    "Fn::Sub": "arn:${AWS::Partition}:scheduler:${AWS::Region}:${AWS::AccountId}:schedule/${ScheduleGroup}/*"
}
CALLER_ARN = {
    "Fn::Sub": "arn:${AWS::Partition}:lambda:${AWS::Region}:${AWS::AccountId}:function:${AWS::StackName}-caller"
}
TABLE = {"Fn::GetAtt": ["Table", "Arn"]}
CALLER_QUEUE = {"Fn::GetAtt": ["CallerQueue", "Arn"]}
SCHEDULER_ROLE = {"Fn::GetAtt": ["SchedulerRole", "Arn"]}

# What each function may do, action by action, on which resource: the calls its code makes
# (wakeup.store's DynamoDB calls, wakeup.triggers' SQS and Scheduler calls). A change here is a
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
        ("dynamodb:Query", repr({"Fn::Sub": "${Table.Arn}/index/ByAccount"})),
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
    # Read, claim and record (Update), and re-arm: the last approach and retries through SQS, a
    # trigger for a far registration through a schedule. Schedules delete themselves after firing.
    "CallerFunction": {
        ("dynamodb:GetItem", repr(TABLE)),
        ("dynamodb:UpdateItem", repr(TABLE)),
        ("sqs:SendMessage", repr(CALLER_QUEUE)),
        ("scheduler:CreateSchedule", repr(SCHEDULES_OF_THE_GROUP)),
        ("scheduler:UpdateSchedule", repr(SCHEDULES_OF_THE_GROUP)),
        ("iam:PassRole", repr(SCHEDULER_ROLE)),
    },
    # Overdue wakes from the sparse index, postponed (Update) and re-armed for now: through SQS.
    "SweeperFunction": {
        ("dynamodb:Query", repr({"Fn::Sub": "${Table.Arn}/index/PendingWakes"})),
        ("dynamodb:UpdateItem", repr(TABLE)),
        ("sqs:SendMessage", repr(CALLER_QUEUE)),
    },
}

# The resources that may end in a wildcard, and why (see the module docstring).
WILDCARD_RESOURCES_ALLOWED = {repr(SCHEDULES_OF_THE_GROUP)}


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def all_statements(template: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """Every IAM policy statement in the template, with the logical id that holds it."""
    statements = []
    for logical_id, function in resources_of_type(template, "AWS::Serverless::Function").items():
        for policy in function["Properties"].get("Policies", []):
            statements += [(logical_id, statement) for statement in policy["Statement"]]
    for logical_id, role in resources_of_type(template, "AWS::IAM::Role").items():
        for policy in role["Properties"].get("Policies", []):
            statements += [(logical_id, statement) for statement in policy["PolicyDocument"]["Statement"]]
    for logical_id, policy in resources_of_type(template, "AWS::IAM::Policy").items():
        statements += [(logical_id, statement) for statement in policy["Properties"]["PolicyDocument"]["Statement"]]
    return statements


def grants_of(template: dict[str, Any], logical_id: str) -> set[tuple[str, str]]:
    return {
        (action, repr(resource))
        for holder, statement in all_statements(template)
        if holder == logical_id
        for action in as_list(statement["Action"])
        for resource in as_list(statement["Resource"])
    }


def test_the_template_holds_iam_statements_to_check(template: dict[str, Any]) -> None:
    holders = {holder for holder, _ in all_statements(template)}

    assert holders == {*EXPECTED_GRANTS, "SchedulerRole"}


def test_every_statement_allows_named_actions_only(template: dict[str, Any]) -> None:
    broad = [
        (holder, action)
        for holder, statement in all_statements(template)
        for action in as_list(statement["Action"])
        if "*" in action or ":" not in action
    ]

    assert broad == []


def test_every_statement_is_an_allow_on_specific_resources(template: dict[str, Any]) -> None:
    broad = []
    for holder, statement in all_statements(template):
        assert statement["Effect"] == "Allow"
        assert "NotAction" not in statement and "NotResource" not in statement
        for resource in as_list(statement["Resource"]):
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
def test_each_function_gets_exactly_its_grants(template: dict[str, Any], logical_id: str) -> None:
    assert grants_of(template, logical_id) == EXPECTED_GRANTS[logical_id]


def test_only_the_wake_and_caller_may_pass_the_scheduler_role_and_only_to_scheduler(
    template: dict[str, Any],
) -> None:
    passing = {}
    for holder, statement in all_statements(template):
        if "iam:PassRole" in as_list(statement["Action"]):
            passing[holder] = (statement["Resource"], statement.get("Condition"))

    assert passing == {
        holder: (SCHEDULER_ROLE, {"StringEquals": {"iam:PassedToService": "scheduler.amazonaws.com"}})
        for holder in ("WakeFunction", "CallerFunction")
    }


def test_scheduler_role_may_only_invoke_the_caller_and_dead_letter(template: dict[str, Any]) -> None:
    assert grants_of(template, "SchedulerRole") == {
        ("lambda:InvokeFunction", repr(CALLER_ARN)),
        ("sqs:SendMessage", repr({"Fn::GetAtt": ["SchedulesDeadLetterQueue", "Arn"]})),
    }


def test_scheduler_role_trusts_only_scheduler_acting_for_this_account(template: dict[str, Any]) -> None:
    trust = template["Resources"]["SchedulerRole"]["Properties"]["AssumeRolePolicyDocument"]["Statement"]

    assert trust == [
        {
            "Effect": "Allow",
            "Principal": {"Service": "scheduler.amazonaws.com"},
            "Action": "sts:AssumeRole",
            "Condition": {"StringEquals": {"aws:SourceAccount": {"Ref": "AWS::AccountId"}}},
        }
    ]


def test_caller_arn_granted_to_scheduler_is_the_caller_functions_name(template: dict[str, Any]) -> None:
    function_name = template["Resources"]["CallerFunction"]["Properties"]["FunctionName"]["Fn::Sub"]

    assert CALLER_ARN["Fn::Sub"].endswith(f":function:{function_name}")
