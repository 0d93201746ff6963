"""template.yaml's planner: no provisioned poller at rest with the defaults, a planner every minute
that may change the caller's mapping and nothing else, and alarms for when it stops or fails."""

from __future__ import annotations

from typing import Any

import pytest
from cfn_template import TEMPLATE, resources_of_type

from wakeup_awsfacts.template import NO_VALUE, Resolver
from wakeup_awsfacts.template import load_template as load_for_stack

PLANNER_RESOURCES = {"PlannerFunction", "PlannerLogGroup", "PlannerHeartbeatAlarm", "PlannerFunctionErrorsAlarm"}


def caller_event_source(parameters: dict[str, str]) -> dict[str, Any]:
    """The caller's SQS event as CloudFormation resolves it for these parameters."""
    stack = load_for_stack(TEMPLATE)
    resolver = Resolver(stack, stack_name="t", region="us-east-1", parameter_overrides=parameters)
    events = stack.resources["CallerFunction"]["Properties"]["Events"]
    resolved: dict[str, Any] = resolver.resolve(events["CallerQueueMessages"]["Properties"])
    return resolved


def created(parameters: dict[str, str]) -> set[str]:
    stack = load_for_stack(TEMPLATE)
    resolver = Resolver(stack, stack_name="t", region="us-east-1", parameter_overrides=parameters)
    return {logical_id for logical_id in stack.resources if resolver.is_created(logical_id)}


def test_the_defaults_keep_no_provisioned_poller_at_rest() -> None:
    # No ProvisionedPollerConfig at all (AWS::NoValue): Lambda's default scaling, no poller billed.
    assert "ProvisionedPollerConfig" not in caller_event_source({})
    assert NO_VALUE not in caller_event_source({}).values()


def test_a_floor_of_pollers_is_the_operators_choice() -> None:
    assert caller_event_source({"CallerMinimumPollers": "10"})["ProvisionedPollerConfig"] == {
        "MinimumPollers": "10",
        "MaximumPollers": "100",
    }


def test_the_planner_is_on_by_default_and_goes_whole_when_turned_off() -> None:
    assert PLANNER_RESOURCES <= created({})
    assert PLANNER_RESOURCES & created({"PlannerEnabled": "false"}) == set()


def test_the_planner_runs_every_minute(template: dict[str, Any]) -> None:
    events = template["Resources"]["PlannerFunction"]["Properties"]["Events"]
    assert [(e["Type"], e["Properties"]["Schedule"]) for e in events.values()] == [("Schedule", "rate(1 minute)")]


def test_the_planner_can_touch_no_wake_and_no_trigger(transformed: dict[str, Any]) -> None:
    # Its failure can lose no wake and hold none back: it may read the index and change the
    # caller's mapping and read its stack's deploys, and write nothing else, nor change the caller's
    # configuration (tests/template/test_template_iam.py has its grants).
    from test_template_iam import grants_of

    actions = {action for action, _ in grants_of(transformed, "PlannerFunction")}
    assert actions == {
        "dynamodb:Query",
        "lambda:GetEventSourceMapping",
        "lambda:UpdateEventSourceMapping",
        "cloudformation:DescribeStacks",
        "cloudformation:ListChangeSets",
    }


@pytest.mark.parametrize(
    ("logical_id", "namespace", "metric", "missing"),
    [
        # The metric the planner publishes on every run, zero included (wakeup.logic.planner.publish):
        # no data at all is a planner not running, a breach.
        ("PlannerHeartbeatAlarm", "Wakeup", "PlannedPollers", "breaching"),
        ("PlannerFunctionErrorsAlarm", "AWS/Lambda", "Errors", "notBreaching"),
        # Published only while an "off" has left pollers in place (wakeup.logic.planner): none is fine.
        ("PlannerPollersLeftAlarm", "Wakeup", "PollersLeftAfterOff", "notBreaching"),
    ],
)
def test_a_planner_that_stops_or_fails_is_an_alarm(
    template: dict[str, Any], logical_id: str, namespace: str, metric: str, missing: str
) -> None:
    alarms = resources_of_type(template, "AWS::CloudWatch::Alarm")
    properties = alarms[logical_id]["Properties"]

    assert (properties["Namespace"], properties["MetricName"], properties["TreatMissingData"]) == (
        namespace,
        metric,
        missing,
    )
    assert properties["AlarmActions"] == [{"Ref": "AlarmTopic"}]


def test_the_planner_publishes_its_heartbeat_on_every_run_even_with_provisioned_mode_off() -> None:
    from unittest.mock import patch

    from wakeup.logic import planner

    with patch.object(planner.metrics, "add_metric") as add_metric:
        planner.publish(planner.Run(planner.Plan(None, None, 0), before=None, sent=False, busy=False))

    (call,) = add_metric.call_args_list
    assert (call.kwargs["name"], call.kwargs["value"]) == ("PlannedPollers", 0)
