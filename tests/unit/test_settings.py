from pathlib import Path

import pytest
from pydantic import ValidationError

from wakeup.deadlines import CALLER_TIMEOUT_S
from wakeup.settings import Settings, SettingsError, load_settings
from wakeup_awsfacts.template import load_template


def test_defaults_follow_the_design() -> None:
    settings = Settings.model_validate({"WAKEUP_TABLE": "t"})
    assert settings.sqs_horizon_s == 840
    assert settings.schedule_lead_s == 90
    assert settings.call_timeout_s == 10
    assert settings.max_wake_age_s == 0


def test_a_lead_of_zero_is_refused_since_scheduler_fires_within_the_minute_after() -> None:
    with pytest.raises(ValidationError, match="WAKEUP_SCHEDULE_LEAD_S"):
        Settings.model_validate({"WAKEUP_TABLE": "t", "WAKEUP_SCHEDULE_LEAD_S": "0"})


def test_a_lead_not_shorter_than_the_horizon_is_refused() -> None:
    with pytest.raises(ValidationError, match="WAKEUP_SCHEDULE_LEAD_S"):
        Settings.model_validate({"WAKEUP_TABLE": "t", "WAKEUP_SQS_HORIZON_S": "60", "WAKEUP_SCHEDULE_LEAD_S": "60"})


def test_a_horizon_beyond_the_sqs_delay_limit_is_refused() -> None:
    with pytest.raises(ValidationError):
        Settings.model_validate({"WAKEUP_TABLE": "t", "WAKEUP_SQS_HORIZON_S": "901"})


@pytest.mark.parametrize("lease", ["10", "12", "14.9"])
def test_a_lease_that_cannot_outlast_the_call_and_the_outcomes_write_is_refused(lease: str) -> None:
    # the call (10 s), one attempt of the outcome's write (3 s), the clocks' margin and the moment
    # between the claim and the call (1 s each)
    with pytest.raises(ValidationError, match="WAKEUP_CLAIM_LEASE_S"):
        Settings.model_validate({"WAKEUP_TABLE": "t", "WAKEUP_CALL_TIMEOUT_S": "10", "WAKEUP_CLAIM_LEASE_S": lease})


def test_the_shortest_lease_the_rule_allows_is_accepted() -> None:
    settings = Settings.model_validate(
        {"WAKEUP_TABLE": "t", "WAKEUP_CALL_TIMEOUT_S": "10", "WAKEUP_CLAIM_LEASE_S": "15"}
    )
    assert settings.claim_lease_s == 15


@pytest.mark.parametrize(("call", "accepted"), [("14", True), ("14.5", False), ("60", False)])
def test_a_call_longer_than_the_callers_timeout_can_hold_is_refused(call: str, accepted: bool) -> None:
    # the caller's 30 s hold the claim's write and the outcome's (7 s each at their longest), the
    # moment before the wake (2 s) and the call: a longer call would never be claimed
    environment = {"WAKEUP_TABLE": "t", "WAKEUP_CALL_TIMEOUT_S": call, "WAKEUP_CLAIM_LEASE_S": "120"}
    if accepted:
        assert Settings.model_validate(environment).call_timeout_s == float(call)
    else:
        with pytest.raises(ValidationError, match="WAKEUP_CALL_TIMEOUT_S .* must be at most 14 s"):
            Settings.model_validate(environment)


def test_the_callers_timeout_is_the_templates() -> None:
    template = load_template(Path(__file__).parents[2] / "template.yaml")
    assert CALLER_TIMEOUT_S == template.resources["CallerFunction"]["Properties"]["Timeout"]


def test_load_settings_names_each_variable_and_rule_broken() -> None:
    with pytest.raises(SettingsError) as refused:
        load_settings({"WAKEUP_SQS_HORIZON_S": "901", "WAKEUP_CALL_TIMEOUT_S": "ten"})
    assert str(refused.value) == (
        "invalid settings: WAKEUP_TABLE: Field required; "
        "WAKEUP_SQS_HORIZON_S='901': Input should be less than or equal to 900; "
        "WAKEUP_CALL_TIMEOUT_S='ten': Input should be a valid number, unable to parse string as a number"
    )


def test_load_settings_states_a_broken_relation_with_both_values() -> None:
    with pytest.raises(SettingsError) as refused:
        load_settings({"WAKEUP_TABLE": "t", "WAKEUP_CALL_TIMEOUT_S": "10", "WAKEUP_CLAIM_LEASE_S": "5"})
    assert str(refused.value) == (
        "invalid settings: WAKEUP_CLAIM_LEASE_S (5) must be at least WAKEUP_CALL_TIMEOUT_S (10) plus 5 s:"
        " a claim's lease outlasts its call, the first attempt of the outcome's write, the requests"
        " before the call and a margin for the clocks"
    )
