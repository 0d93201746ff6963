"""What the template does about AWS behaviours that moto cannot show, read from the template as SAM
transforms it (the CloudFormation that AWS runs).

- Scheduler invokes the caller asynchronously ("Invoking Lambda functions with EventBridge
  Scheduler"; Lambda's "Asynchronous invocation"): a caller error is retried by Lambda and then
  dropped, never reaching the schedule's dead-letter queue. The caller's EventInvokeConfig bounds
  Lambda's retries and keeps what still fails in a queue that an alarm watches.
- `SSEEnabled: true` selects the AWS managed KMS key, which KMS charges for; DynamoDB's default (an
  AWS owned key) costs nothing. A customer managed key only when a parameter names one
  (AWS::DynamoDB::Table SSESpecification).
"""

from __future__ import annotations

from typing import Any

import pytest
from cfn_template import resources_of_type, sam_transform

CALLER_FAILED_EVENTS_ARN = {"Fn::GetAtt": ["CallerFailedEventsQueue", "Arn"]}
KEY_ARN = "arn:aws:kms:us-east-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab"


def _resolved(value: Any, template: dict[str, Any], parameters: dict[str, str]) -> Any:
    """`value` with `Fn::If`, `Ref` of a parameter and the template's conditions evaluated."""
    if isinstance(value, list):
        return [_resolved(item, template, parameters) for item in value]
    if not isinstance(value, dict):
        return value
    if set(value) == {"Fn::If"}:
        condition, if_true, if_false = value["Fn::If"]
        holds = _condition(template["Conditions"][condition], template, parameters)
        return _resolved(if_true if holds else if_false, template, parameters)
    if set(value) == {"Ref"} and value["Ref"] in template["Parameters"]:
        return parameters.get(value["Ref"], template["Parameters"][value["Ref"]].get("Default"))
    return {key: _resolved(item, template, parameters) for key, item in value.items()}


def _condition(expression: dict[str, Any], template: dict[str, Any], parameters: dict[str, str]) -> bool:
    (function, argument), *_ = expression.items()
    if function == "Fn::Not":
        return not _condition(argument[0], template, parameters)
    if function == "Fn::Equals":
        left, right = (_resolved(item, template, parameters) for item in argument)
        return bool(left == right)
    raise AssertionError(f"condition function {function} is not evaluated by this test")


def test_lambda_retries_a_failed_scheduled_trigger_twice_then_keeps_it(transformed: dict[str, Any]) -> None:
    configs = resources_of_type(transformed, "AWS::Lambda::EventInvokeConfig")
    [(logical_id, config)] = configs.items()
    properties = config["Properties"]
    assert properties["FunctionName"] == {"Ref": "CallerFunction"}
    assert properties["MaximumRetryAttempts"] == 2
    # Lambda's range (API_FunctionEventInvokeConfig): 60 s to 6 h.
    assert 60 <= properties["MaximumEventAgeInSeconds"] <= 21600
    assert properties["DestinationConfig"] == {"OnFailure": {"Destination": CALLER_FAILED_EVENTS_ARN}}


def test_an_alarm_watches_the_failed_events_queue(transformed: dict[str, Any]) -> None:
    watching = [
        alarm["Properties"]
        for alarm in resources_of_type(transformed, "AWS::CloudWatch::Alarm").values()
        if alarm["Properties"].get("Dimensions")
        == [{"Name": "QueueName", "Value": {"Fn::GetAtt": ["CallerFailedEventsQueue", "QueueName"]}}]
    ]
    assert len(watching) == 1
    assert watching[0]["MetricName"] == "ApproximateNumberOfMessagesVisible"
    assert (watching[0]["ComparisonOperator"], watching[0]["Threshold"]) == ("GreaterThanThreshold", 0)


def test_the_caller_role_may_send_to_its_failure_destination(transformed: dict[str, Any]) -> None:
    statements = [
        statement
        for policy in transformed["Resources"]["CallerRole"]["Properties"]["Policies"]
        for statement in policy["PolicyDocument"]["Statement"]
    ]
    assert any(s["Action"] == ["sqs:SendMessage"] and s["Resource"] == CALLER_FAILED_EVENTS_ARN for s in statements)


@pytest.mark.parametrize(
    ("parameters", "expected"),
    [
        ({}, {"SSEEnabled": False}),  # DynamoDB's AWS owned key: no KMS charge
        ({"TableKmsKeyArn": KEY_ARN}, {"SSEEnabled": True, "SSEType": "KMS", "KMSMasterKeyId": KEY_ARN}),
    ],
)
def test_the_table_uses_the_aws_owned_key_unless_a_customer_key_is_named(
    template: dict[str, Any], parameters: dict[str, str], expected: dict[str, Any]
) -> None:
    transformed = sam_transform(template, parameters)
    table = transformed["Resources"]["Table"]["Properties"]
    assert _resolved(table["SSESpecification"], transformed, parameters) == expected
