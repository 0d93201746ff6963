"""The template refuses at deploy time the settings the functions would refuse at init: its
parameters' ranges are `wakeup.settings`' ranges, and its `Rules` refuse the same combinations.

CloudFormation evaluates `Rules` before it creates or changes anything; the rule functions are
those of https://docs.aws.amazon.com/AWSCloudFormation/latest/TemplateReference/intrinsic-function-reference-rules.html
(a Number parameter's value is a string there, as everywhere a `Ref` reads it).
"""

from __future__ import annotations

from typing import Any

import annotated_types
import pytest

from wakeup.settings import Settings, SettingsError, load_settings

# Each numeric parameter and the variable the template sets from it.
PARAMETER_SETTINGS = {
    "SqsHorizonSeconds": "sqs_horizon_s",
    "ScheduleLeadSeconds": "schedule_lead_s",
    "MaxWakeAgeSeconds": "max_wake_age_s",
    "MaxInstancesPerAccount": "max_instances_per_account",
    "MaxWakesPerWindow": "max_wakes_per_window",
    "WakeWindowSeconds": "wake_window_s",
    "AccountRequestsPerSecond": "account_requests_per_s",
}


def _bounds(field: str) -> tuple[float | None, float | None]:
    low = high = None
    for constraint in Settings.model_fields[field].metadata:
        if isinstance(constraint, annotated_types.Ge):
            low = constraint.ge
        if isinstance(constraint, annotated_types.Le):
            high = constraint.le
    return low, high  # type: ignore[return-value]


def _evaluate(expression: Any, parameters: dict[str, str]) -> Any:
    """A rule's condition or assertion, with the rule functions this template uses."""
    if isinstance(expression, list):
        return [_evaluate(item, parameters) for item in expression]
    if not isinstance(expression, dict):
        return str(expression)
    (function, argument), *_ = expression.items()
    if function == "Ref":
        return parameters[argument]
    values = _evaluate(argument, parameters)
    match function:
        case "Fn::Equals":
            return values[0] == values[1]
        case "Fn::Not":
            return not values[0]
        case "Fn::And":
            return all(values)
        case "Fn::Or":
            return any(values)
        case "Fn::Contains":
            return values[1] in values[0]
    raise AssertionError(f"rule function {function} is not evaluated by this test")


def refused_by_rules(template: dict[str, Any], parameters: dict[str, str]) -> list[str]:
    """The descriptions of the assertions that refuse these parameter values (the others at their
    defaults)."""
    parameters = {name: str(p.get("Default", "")) for name, p in template["Parameters"].items()} | parameters
    refused = []
    for rule in template.get("Rules", {}).values():
        if "RuleCondition" in rule and not _evaluate(rule["RuleCondition"], parameters):
            continue
        refused += [a["AssertDescription"] for a in rule["Assertions"] if not _evaluate(a["Assert"], parameters)]
    return refused


@pytest.mark.parametrize(("parameter", "field"), PARAMETER_SETTINGS.items())
def test_each_parameter_has_the_range_and_default_of_its_setting(
    template: dict[str, Any], parameter: str, field: str
) -> None:
    declared = template["Parameters"][parameter]
    low, high = _bounds(field)
    assert (declared.get("MinValue"), declared.get("MaxValue")) == (low, high)
    assert declared["Default"] == Settings.model_fields[field].default
    for allowed in declared.get("AllowedValues", []):
        assert low is not None and high is not None and low <= allowed <= high


def test_the_rules_refuse_exactly_the_lead_and_horizon_the_functions_refuse(template: dict[str, Any]) -> None:
    horizon = template["Parameters"]["SqsHorizonSeconds"]
    leads = template["Parameters"]["ScheduleLeadSeconds"]["AllowedValues"]
    checked = refused = 0
    for lead in leads:
        for seconds in range(horizon["MinValue"], horizon["MaxValue"] + 1):
            parameters = {"ScheduleLeadSeconds": str(lead), "SqsHorizonSeconds": str(seconds)}
            env = {"WAKEUP_TABLE": "t", "WAKEUP_SCHEDULE_LEAD_S": str(lead), "WAKEUP_SQS_HORIZON_S": str(seconds)}
            try:
                load_settings(env)
                functions_refuse = False
            except SettingsError:
                functions_refuse = True
            assert bool(refused_by_rules(template, parameters)) == functions_refuse, parameters
            checked += 1
            refused += functions_refuse
    assert refused > 0 and checked > refused  # both kinds were seen


def test_the_default_parameters_pass_every_rule(template: dict[str, Any]) -> None:
    defaults = {name: str(p.get("Default", "")) for name, p in template["Parameters"].items()}
    assert refused_by_rules(template, defaults) == []


def test_a_lead_of_sixty_with_a_horizon_of_sixty_is_refused_with_a_reason(template: dict[str, Any]) -> None:
    refused = refused_by_rules(template, {"ScheduleLeadSeconds": "60", "SqsHorizonSeconds": "60"})
    assert refused == ["SqsHorizonSeconds must be greater than ScheduleLeadSeconds (60)."]


def test_the_call_settings_default_to_the_services_own_on_aws(template: dict[str, Any]) -> None:
    # On AWS the caller refuses what is not global and allows none back, over http and https on any
    # port; the local stack, whose hosts are on this machine, allows loopback (tests/local).
    parameters = template["Parameters"]
    fields = Settings.model_fields
    assert parameters["CallDeniedCidrs"]["Default"] == fields["call_denied_cidrs"].default == ""
    assert parameters["CallAllowedCidrs"]["Default"] == fields["call_allowed_cidrs"].default == ""
    assert parameters["CallHttpsOnly"]["Default"] == str(fields["call_https_only"].default).lower() == "false"
    assert parameters["CallAllowedPorts"]["Default"] == fields["call_allowed_ports"].default == ""


@pytest.mark.parametrize(("https_only", "ports"), [("true", "443"), ("false", "443,8000-8999"), ("true", "")])
def test_the_template_s_call_settings_are_ones_the_functions_take(https_only: str, ports: str) -> None:
    settings = load_settings(
        {"WAKEUP_TABLE": "t", "WAKEUP_CALL_HTTPS_ONLY": https_only, "WAKEUP_CALL_ALLOWED_PORTS": ports}
    )
    assert settings.address_policy.https_only == (https_only == "true")


@pytest.mark.parametrize(
    ("pollers", "refused"), [("0", False), ("1", True), ("2", False), ("100", False), ("200", False)]
)
def test_minimum_pollers_are_off_or_what_an_sqs_event_source_takes(
    template: dict[str, Any], pollers: str, refused: bool
) -> None:
    # ProvisionedPollerConfig for SQS: MinimumPollers 2 to 200 (Lambda API reference); 0 turns
    # provisioned mode off (the template's condition HasProvisionedPollers).
    assert bool(refused_by_rules(template, {"CallerMinimumPollers": pollers})) == refused
