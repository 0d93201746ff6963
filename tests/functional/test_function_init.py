"""A function whose settings break a rule fails its init (the import of its handler, as Lambda
runs it) with the reason, rather than answering 500 to each request."""

import os
import subprocess
import sys

import pytest
from moto_env import ROOT

from wakeup.factories import NO_MASTER_KEY

FUNCTIONS = ["instances", "wake", "caller", "sweeper", "planner"]
MASTER_KEY_SECRET = "arn:aws:secretsmanager:us-east-1:123456789012:secret:SigningMasterKey-AbCdEf"


def init(function: str, settings: dict[str, str], then: str = "") -> subprocess.CompletedProcess[str]:
    """Imports the handler in a fresh process, as Lambda's init does, with only `settings` of ours
    (then runs `then`)."""
    env = {key: value for key, value in os.environ.items() if not key.startswith(("WAKEUP_", "POWERTOOLS_"))}
    env.update(settings, PYTHONPATH=str(ROOT / "functions" / function))
    if function == "caller":  # the caller does not start without a master key (tested below)
        env.setdefault("WAKEUP_MASTER_KEY_SECRET", MASTER_KEY_SECRET)
    code = f"import {function}_handler\n{then}"
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("function", FUNCTIONS)
def test_invalid_settings_fail_the_init_with_the_reason(function: str) -> None:
    result = init(function, {"WAKEUP_TABLE": "t", "WAKEUP_SQS_HORIZON_S": "90"})
    assert result.returncode != 0
    assert (
        "SettingsError: invalid settings: WAKEUP_SCHEDULE_LEAD_S (90) must be less than WAKEUP_SQS_HORIZON_S (90)"
    ) in result.stderr


@pytest.mark.parametrize("function", FUNCTIONS)
def test_valid_settings_pass_the_init(function: str) -> None:
    result = init(function, {"WAKEUP_TABLE": "t", "WAKEUP_SQS_HORIZON_S": "91"})
    assert result.returncode == 0, result.stderr


def test_a_caller_without_a_master_key_fails_its_init_with_the_reason() -> None:
    result = init("caller", {"WAKEUP_TABLE": "t", "WAKEUP_MASTER_KEY_SECRET": ""})
    assert result.returncode != 0
    assert f"SettingsError: {NO_MASTER_KEY}" in result.stderr


def test_invalid_planner_settings_fail_the_planners_init_with_the_reason() -> None:
    result = init("planner", {"WAKEUP_TABLE": "t", "WAKEUP_CALLER_BATCH_SIZE": "11"})
    assert result.returncode != 0
    assert "WAKEUP_CALLER_BATCH_SIZE" in result.stderr and "less than or equal to 10" in result.stderr


# What the init has imported, and the tracer the handlers' decorator comes from.
TRACING = (
    "import sys; from wakeup.observability import tracer;"
    " print(type(tracer).__name__, 'aws_xray_sdk.core' in sys.modules)"
)


@pytest.mark.parametrize("function", FUNCTIONS)
def test_with_tracing_off_the_init_leaves_the_tracer_and_the_x_ray_sdk_out(function: str) -> None:
    result = init(function, {"WAKEUP_TABLE": "t", "POWERTOOLS_TRACE_DISABLED": "true"}, then=TRACING)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["Untraced", "False"]


def test_with_tracing_on_the_handlers_are_traced_by_powertools() -> None:
    on = {"WAKEUP_TABLE": "t", "POWERTOOLS_TRACE_DISABLED": "false", "LAMBDA_TASK_ROOT": str(ROOT / "functions")}
    result = init("caller", on, then=TRACING)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["Tracer", "True"]


def test_outside_lambda_the_tracer_and_the_x_ray_sdk_are_left_out_as_powertools_disables_them() -> None:
    # given tracing not turned off, but no Lambda (the operator's CLI, a test) or SAM's emulator
    for outside in ({}, {"LAMBDA_TASK_ROOT": str(ROOT / "functions"), "AWS_SAM_LOCAL": "true"}):
        result = init("caller", {"WAKEUP_TABLE": "t", "POWERTOOLS_TRACE_DISABLED": "false", **outside}, then=TRACING)
        assert result.returncode == 0, result.stderr
        assert result.stdout.split() == ["Untraced", "False"]
