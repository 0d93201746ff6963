"""template.yaml's dashboard and alarms: they read the metrics the code emits, and all of them.

The code's metric names are `wakeup.observability.Metric` (namespace `Wakeup`, dimension
`service`, the function's POWERTOOLS_SERVICE_NAME). cfn-lint does not look inside a
`DashboardBody` built with !Sub, so its JSON is checked here.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from cfn_template import REPO, resources_of_type, sub_variables, substitute

from wakeup.observability import Metric

NAMESPACE = "Wakeup"
FUNCTIONS = ("InstancesFunction", "WakeFunction", "CallerFunction", "SweeperFunction")
DEAD_LETTER_QUEUES = ("CallerDeadLetterQueue", "SchedulesDeadLetterQueue", "CallerFailedEventsQueue")
FAILED_CALL_LOG_FIELDS = ("instance_id", "host", "error", "attempts")


def dashboard_sub(template: dict[str, Any]) -> str:
    body = template["Resources"]["Dashboard"]["Properties"]["DashboardBody"]
    assert set(body) == {"Fn::Sub"}
    assert isinstance(body["Fn::Sub"], str)
    return body["Fn::Sub"]


def dashboard(template: dict[str, Any]) -> dict[str, Any]:
    """The dashboard body as CloudWatch receives it, each `${...}` given a plausible value."""
    text = dashboard_sub(template)
    values = {variable: f"resolved-{variable.replace('::', '-').replace('.', '-')}" for variable in sub_variables(text)}
    loaded = json.loads(substitute(text, values))
    assert isinstance(loaded, dict)
    return loaded


def widget_metrics(widget: dict[str, Any]) -> list[tuple[str, str, dict[str, str], dict[str, Any]]]:
    """(namespace, name, dimensions, options) of each metric line, "." repeating the line above."""
    lines = []
    previous: list[Any] = []
    for row in widget["properties"].get("metrics", []):
        options = row[-1] if isinstance(row[-1], dict) else {}
        fields = [field for field in row if not isinstance(field, dict)]
        fields = [previous[index] if field == "." else field for index, field in enumerate(fields)]
        previous = fields
        if "expression" in options:
            continue
        namespace, name, *dimension_fields = fields
        dimensions = dict(zip(dimension_fields[::2], dimension_fields[1::2], strict=True))
        lines.append((namespace, name, dimensions, options))
    return lines


def dashboard_metrics(template: dict[str, Any]) -> list[tuple[str, str, dict[str, str], dict[str, Any]]]:
    return [line for widget in dashboard(template)["widgets"] for line in widget_metrics(widget)]


def services(template: dict[str, Any]) -> set[str]:
    return {
        function["Properties"]["Environment"]["Variables"]["POWERTOOLS_SERVICE_NAME"]
        for function in resources_of_type(template, "AWS::Serverless::Function").values()
    }


def alarms(template: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The alarms on one metric (TableWriteThrottlesAlarm adds two, with metric math: see
    test_template_safety.py)."""
    return {
        logical_id: alarm["Properties"]
        for logical_id, alarm in resources_of_type(template, "AWS::CloudWatch::Alarm").items()
        if "Metrics" not in alarm["Properties"]
    }


def test_dashboard_body_is_json_once_its_variables_are_substituted(template: dict[str, Any]) -> None:
    body = dashboard(template)

    assert body["widgets"]


def test_dashboard_variables_are_resources_or_pseudo_parameters(template: dict[str, Any]) -> None:
    resources = set(template["Resources"])

    variables = sub_variables(dashboard_sub(template))

    assert [v for v in variables if not (v.startswith("AWS::") or v.split(".", 1)[0] in resources)] == []


def test_dashboard_widgets_fit_the_grid_without_overlapping(template: dict[str, Any]) -> None:
    cells: dict[tuple[int, int], int] = {}
    for index, widget in enumerate(dashboard(template)["widgets"]):
        assert widget["x"] + widget["width"] <= 24
        for x in range(widget["x"], widget["x"] + widget["width"]):
            for y in range(widget["y"], widget["y"] + widget["height"]):
                assert (x, y) not in cells, f"widget {index} overlaps widget {cells[(x, y)]}"
                cells[(x, y)] = index


def test_every_metric_widget_names_its_region(template: dict[str, Any]) -> None:
    widgets = [w for w in dashboard(template)["widgets"] if w["type"] in {"metric", "log"}]

    assert all(w["properties"]["region"] == "resolved-AWS-Region" for w in widgets)


def test_every_wakeup_metric_on_the_dashboard_is_one_the_code_emits(template: dict[str, Any]) -> None:
    named = {name for namespace, name, _, _ in dashboard_metrics(template) if namespace == NAMESPACE}

    assert named - {metric.value for metric in Metric} == set()


def test_every_metric_the_code_emits_is_on_the_dashboard(template: dict[str, Any]) -> None:
    named = {name for namespace, name, _, _ in dashboard_metrics(template) if namespace == NAMESPACE}

    assert {metric.value for metric in Metric} - named == set()


def test_wakeup_metrics_are_read_by_the_service_dimension_of_a_function(template: dict[str, Any]) -> None:
    dimensions = [dims for namespace, _, dims, _ in dashboard_metrics(template) if namespace == NAMESPACE]
    dimensions += [
        {d["Name"]: d["Value"] for d in alarm["Dimensions"]}
        for alarm in alarms(template).values()
        if alarm["Namespace"] == NAMESPACE
    ]

    assert dimensions
    assert [d for d in dimensions if set(d) != {"service"} or d["service"] not in services(template)] == []


def test_every_wakeup_metric_an_alarm_watches_is_one_the_code_emits(template: dict[str, Any]) -> None:
    watched = {alarm["MetricName"] for alarm in alarms(template).values() if alarm["Namespace"] == NAMESPACE}

    assert watched
    assert watched - {metric.value for metric in Metric} == set()


def test_lateness_is_shown_as_p50_p99_and_max(template: dict[str, Any]) -> None:
    stats = {
        options.get("stat") for _, name, _, options in dashboard_metrics(template) if name == Metric.WAKE_LATENESS.value
    }

    assert stats == {"p50", "p99", "Maximum"}


def test_latest_failed_wakes_come_from_the_callers_log_group(template: dict[str, Any]) -> None:
    log_widgets = [w for w in dashboard(template)["widgets"] if w["type"] == "log"]

    assert len(log_widgets) == 2
    query = log_widgets[0]["properties"]["query"]
    assert query.startswith("SOURCE 'resolved-CallerLogGroup' |")
    assert 'filter message = "wake call failed"' in query
    assert all(field in query for field in FAILED_CALL_LOG_FIELDS)


def test_the_instances_and_hosts_failing_most_show_hour_by_hour_with_why(template: dict[str, Any]) -> None:
    [widget] = [w for w in dashboard(template)["widgets"] if "Failing most" in w["properties"].get("title", "")]

    assert widget["type"] == "log" and widget["properties"]["view"] == "table"
    query = widget["properties"]["query"]
    assert query.startswith("SOURCE 'resolved-CallerLogGroup' |")
    assert 'filter message = "wake call failed"' in query
    # counted per hour, by instance and host, with the last error, the latest hour and the most first
    assert "stats count(*) as failures, latest(error) as last_error by bin(1h) as hour, instance_id, host" in query
    assert "sort hour desc, failures desc" in query


@pytest.mark.parametrize("queue", DEAD_LETTER_QUEUES)
def test_dashboard_shows_each_dead_letter_queues_depth(template: dict[str, Any], queue: str) -> None:
    lines = dashboard_metrics(template)

    assert (
        "AWS/SQS",
        "ApproximateNumberOfMessagesVisible",
        {"QueueName": f"resolved-{queue}-QueueName"},
    ) in [(namespace, name, dims) for namespace, name, dims, _ in lines]


def test_dashboard_shows_api_errors_and_latency(template: dict[str, Any]) -> None:
    api = {name for namespace, name, dims, _ in dashboard_metrics(template) if dims == {"ApiId": "resolved-HttpApi"}}

    assert {"4xx", "5xx", "Latency"} <= api


@pytest.mark.parametrize("function", FUNCTIONS)
def test_dashboard_shows_each_functions_errors_throttles_and_duration(template: dict[str, Any], function: str) -> None:
    shown = {
        name
        for namespace, name, dims, _ in dashboard_metrics(template)
        if namespace == "AWS/Lambda" and dims == {"FunctionName": f"resolved-{function}"}
    }

    assert shown == {"Errors", "Throttles", "Duration"}


def test_dashboard_shows_scheduler_target_errors_and_dropped_invocations(template: dict[str, Any]) -> None:
    shown = {
        name
        for namespace, name, dims, _ in dashboard_metrics(template)
        if namespace == "AWS/Scheduler" and dims == {"ScheduleGroup": "resolved-ScheduleGroup"}
    }

    assert {"TargetErrorCount", "InvocationDroppedCount"} <= shown


def test_every_alarm_notifies_the_alarm_topic(template: dict[str, Any]) -> None:
    topic = [{"Ref": "AlarmTopic"}]

    actions = {logical_id: (a["AlarmActions"], a["OKActions"]) for logical_id, a in alarms(template).items()}

    assert actions
    assert {logical_id: value for logical_id, value in actions.items() if value != (topic, topic)} == {}


def test_alarm_email_is_subscribed_only_when_given(template: dict[str, Any]) -> None:
    subscriptions = resources_of_type(template, "AWS::SNS::Subscription")

    assert template["Conditions"]["HasAlarmEmail"] == {"Fn::Not": [{"Fn::Equals": [{"Ref": "AlarmEmail"}, ""]}]}
    assert [(s["Condition"], s["Properties"]) for s in subscriptions.values()] == [
        (
            "HasAlarmEmail",
            {"TopicArn": {"Ref": "AlarmTopic"}, "Protocol": "email", "Endpoint": {"Ref": "AlarmEmail"}},
        )
    ]


def watched(template: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    return [
        (alarm["Namespace"], alarm["MetricName"], {d["Name"]: d["Value"] for d in alarm["Dimensions"]})
        for alarm in alarms(template).values()
    ]


def test_sustained_failed_calls_raise_an_alarm(template: dict[str, Any]) -> None:
    failed = [a for a in alarms(template).values() if a["MetricName"] == Metric.CALLS_FAILED.value]

    assert len(failed) == 1
    assert failed[0]["EvaluationPeriods"] == failed[0]["DatapointsToAlarm"] > 1


def test_sweeper_recoveries_raise_an_alarm(template: dict[str, Any]) -> None:
    assert (NAMESPACE, Metric.OVERDUE_WAKES_REARMED.value, {"service": "sweeper"}) in watched(template)


@pytest.mark.parametrize("queue", DEAD_LETTER_QUEUES)
def test_messages_in_each_dead_letter_queue_raise_an_alarm(template: dict[str, Any], queue: str) -> None:
    queue_name = {"Fn::GetAtt": [queue, "QueueName"]}

    assert ("AWS/SQS", "ApproximateNumberOfMessagesVisible", {"QueueName": queue_name}) in watched(template)


@pytest.mark.parametrize("function", FUNCTIONS)
def test_errors_of_each_function_raise_an_alarm(template: dict[str, Any], function: str) -> None:
    assert ("AWS/Lambda", "Errors", {"FunctionName": {"Ref": function}}) in watched(template)


def test_every_alarm_is_described_in_the_operations_guide(template: dict[str, Any]) -> None:
    guide = (REPO / "docs/operations.md").read_text(encoding="utf-8")

    every_alarm = resources_of_type(template, "AWS::CloudWatch::Alarm")
    assert [logical_id for logical_id in every_alarm if f"`{logical_id}`" not in guide] == []
