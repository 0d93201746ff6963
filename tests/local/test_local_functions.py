"""The template's functions as specs: environment, memory, timeout, names; context and lookup."""

import random
import re

import pytest
import requests
from localstack_helpers import FIXTURE_TEMPLATE, ROOT

from wakeup_awsfacts.template import Resolver, load_template
from wakeup_local.lambda_.functions import FunctionSpec, function_specs
from wakeup_local.stack import LocalStack, check_wakeup_settings, late_schedules_warning


def specs_by_id(process_env: dict[str, str]) -> tuple[Resolver, dict[str, FunctionSpec]]:
    template = load_template(FIXTURE_TEMPLATE)
    resolver = Resolver(template, "fstack", endpoint_url="http://127.0.0.1:1", rng=random.Random(3))
    return resolver, {spec.logical_id: spec for spec in function_specs(template, resolver, process_env)}


def test_the_environment_is_globals_merged_with_the_functions_own_and_resolved() -> None:
    resolver, specs = specs_by_id({})
    api = specs["ApiFunction"].environment
    assert api["STAGE"] == "test"
    assert api["API_ONLY"] == "yes"
    assert api["WAKEUP_TABLE"] == resolver.physical_name("Table")
    assert api["WAKEUP_QUEUE_URL"] == f"http://127.0.0.1:1/123456789012/{resolver.physical_name('Queue')}"
    assert api["WAKEUP_TARGET_ARN"] == "arn:aws:lambda:us-east-1:123456789012:function:fstack-target"
    assert "API_ONLY" not in specs["QueueFunction"].environment


def test_wakeup_settings_from_the_process_environment_win_but_not_over_the_stacks_own_resources() -> None:
    resolver, specs = specs_by_id(
        {"WAKEUP_TEST_SETTING_S": "3", "WAKEUP_EXTRA_S": "7", "WAKEUP_TABLE": "another-stacks-table", "OTHER": "x"}
    )
    environment = specs["QueueFunction"].environment
    assert environment["WAKEUP_TEST_SETTING_S"] == "3"
    assert environment["WAKEUP_EXTRA_S"] == "7"
    assert environment["WAKEUP_TABLE"] == resolver.physical_name("Table")
    assert "OTHER" not in environment


def test_the_lines_the_stack_prints_never_reach_a_function_from_a_shell_that_still_has_them() -> None:
    # given the shell that starts the stack again still exports what the last one printed
    printed = {
        "WAKEUP_URL": "http://127.0.0.1:3000",
        "WAKEUP_ACCOUNT_TOKEN": "swa_" + "a" * 43,
        "WAKEUP_TOKEN": "swi_" + "b" * 43,
        "WAKEUP_SIGNING_SECRET": "whsec_" + "c" * 32,
    }
    # when / then: no function's environment holds a person's credentials
    _, specs = specs_by_id({**printed, "WAKEUP_EXTRA_S": "7"})
    for spec in specs.values():
        assert not printed.keys() & spec.environment.keys(), spec.logical_id
        assert spec.environment["WAKEUP_EXTRA_S"] == "7"


def test_a_function_takes_the_globals_memory_and_timeout_and_the_name_it_is_given() -> None:
    _, specs = specs_by_id({})
    assert (specs["ApiFunction"].memory_mb, specs["ApiFunction"].timeout_s) == (256, 10.0)
    assert specs["TargetFunction"].name == "fstack-target"
    assert re.fullmatch(r"fstack-ApiFunction-[A-Z0-9]{12}", specs["ApiFunction"].name)
    assert specs["ApiFunction"].code_dir == FIXTURE_TEMPLATE.parent / "handlers"


def test_a_function_whose_condition_is_false_is_left_out() -> None:
    _, specs = specs_by_id({})
    assert "ProdOnlyFunction" not in specs


def test_the_environment_is_set_before_the_handler_module_is_imported(module_stack: LocalStack) -> None:
    reply = requests.get(f"{module_stack.url}/items/x", timeout=10).json()
    assert reply["environment_at_import"] == {"STAGE": "test", "API_ONLY": "yes"}


def test_the_handler_gets_lambdas_context(module_stack: LocalStack) -> None:
    first = requests.get(f"{module_stack.url}/items/x", timeout=10).json()["context"]
    second = requests.get(f"{module_stack.url}/items/x", timeout=10).json()["context"]
    function = module_stack.functions.by_logical_id("ApiFunction")
    assert first["function_name"] == function.name
    assert first["invoked_function_arn"] == f"arn:aws:lambda:us-east-1:123456789012:function:{function.name}"
    assert first["memory_limit_in_mb"] == "256"  # as Lambda's Python runtime gives it: a string
    assert 9000 < first["remaining_ms"] <= 10000
    assert first["aws_request_id"] != second["aws_request_id"]


def test_functions_are_found_by_name_arn_and_qualified_arn(module_stack: LocalStack) -> None:
    target = module_stack.functions.by_logical_id("TargetFunction")
    assert target.name == f"{module_stack.stack_name}-target"
    assert module_stack.functions.find(target.name) is target
    assert module_stack.functions.find(target.arn) is target
    assert module_stack.functions.find(f"{target.arn}:$LATEST") is target
    assert module_stack.functions.find("arn:aws:sqs:us-east-1:123456789012:queue") is None
    assert module_stack.functions.find("nobody") is None


def test_a_function_takes_its_reserved_concurrency_and_log_group() -> None:
    _, specs = specs_by_id({})
    assert specs["GatedFunction"].reserved_concurrency == 2
    assert specs["ApiFunction"].reserved_concurrency is None
    assert specs["ApiFunction"].runtime == "python3.13"


def test_the_callers_reservation_in_template_yaml_is_none_until_a_parameter_sets_it() -> None:
    # `!If [..., !Ref AWS::NoValue]` at the defaults: the caller takes the stack's own bound.
    template = load_template(ROOT / "template.yaml")
    for overrides, expected in (({}, None), ({"CallerReservedConcurrency": "4"}, 4)):
        resolver = Resolver(template, "wstack", parameter_overrides=overrides, rng=random.Random(3))
        specs = {spec.logical_id: spec for spec in function_specs(template, resolver, {})}
        assert specs["CallerFunction"].reserved_concurrency == expected


def test_every_function_leaves_tracing_off_unless_the_tracing_parameter_is_active() -> None:
    # PassThrough (the default) records only what an upstream sampled, and nothing upstream does:
    # the handlers then leave Powertools' Tracer out (wakeup.observability).
    template = load_template(ROOT / "template.yaml")
    for overrides, expected in (({}, "true"), ({"Tracing": "Active"}, "false")):
        resolver = Resolver(template, "tstack", parameter_overrides=overrides, rng=random.Random(3))
        specs = function_specs(template, resolver, {})
        assert {spec.environment["POWERTOOLS_TRACE_DISABLED"] for spec in specs} == {expected}


def template_specs(process_env: dict[str, str]) -> list[FunctionSpec]:
    template = load_template(ROOT / "template.yaml")
    resolver = Resolver(template, "wstack", endpoint_url="http://127.0.0.1:1", rng=random.Random(3))
    return function_specs(template, resolver, process_env)


@pytest.mark.parametrize(
    ("lead_s", "late_s"),
    [("2", "58"), ("59", "1")],
)
def test_a_schedule_lead_under_schedulers_minute_warns_that_its_wakes_may_be_late(lead_s: str, late_s: str) -> None:
    specs = template_specs({"WAKEUP_SQS_HORIZON_S": "300", "WAKEUP_SCHEDULE_LEAD_S": lead_s})
    warning = late_schedules_warning(check_wakeup_settings(specs), exact=False)
    assert warning is not None
    assert f"WAKEUP_SCHEDULE_LEAD_S={lead_s} " in warning
    assert f"up to {late_s} s late" in warning
    assert "WAKEUP_LOCAL_EXACT_SCHEDULES=1" in warning


@pytest.mark.parametrize(
    ("settings", "exact"),
    [
        ({}, False),  # template.yaml's lead, 90 s
        ({"WAKEUP_SCHEDULE_LEAD_S": "60"}, False),
        ({"WAKEUP_SQS_HORIZON_S": "5", "WAKEUP_SCHEDULE_LEAD_S": "2"}, True),  # fired on time
    ],
)
def test_a_lead_of_a_minute_or_more_or_exact_schedules_warn_of_nothing(settings: dict[str, str], exact: bool) -> None:
    assert late_schedules_warning(check_wakeup_settings(template_specs(settings)), exact=exact) is None
