"""Execution environments as Lambda runs them: processes of their own, one invocation at a time,
their function's own variables, timeouts enforced, a reserved concurrency honoured, Lambda's
START/END/REPORT lines."""

import io
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import requests
from localstack_helpers import RECORDS_ENV, StartStack, handler_records, wait_until

from wakeup_local.lambda_.functions import SYSTEM_LOG_LEVEL_ENV, FunctionError, runtime_variables
from wakeup_local.lambda_.lambda_logs import Report
from wakeup_local.stack import LocalStack


def get(stack: LocalStack, path: str) -> dict[str, Any]:
    reply = requests.get(f"{stack.url}{path}", timeout=30)
    assert reply.status_code == 200, reply.text
    return reply.json()  # type: ignore[no-any-return]


def running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def reports(log: io.StringIO, logical_id: str) -> list[Report]:
    lines = [line for line in log.getvalue().splitlines() if line.startswith(f"[{logical_id}] REPORT ")]
    parsed = [Report.parse(line) for line in lines]
    assert None not in parsed, lines
    return [report for report in parsed if report is not None]


def test_two_functions_with_different_values_of_one_variable_each_see_their_own(module_stack: LocalStack) -> None:
    # given two functions of the same code whose COLOUR differs, called at the same time
    paths = ["/env", "/other-env"] * 16
    with ThreadPoolExecutor(8) as pool:
        replies = list(pool.map(lambda path: (path, get(module_stack, path)), paths))
    # then each reads its own value, at invocation time, in a process of its own
    for path, reply in replies:
        logical_id = "EnvFunction" if path == "/env" else "OtherEnvFunction"
        assert reply["colour"] == ("green" if path == "/env" else "blue")
        assert reply["function_name"] == module_stack.functions.by_logical_id(logical_id).name
    green = {reply["pid"] for path, reply in replies if path == "/env"}
    blue = {reply["pid"] for path, reply in replies if path != "/env"}
    assert not green & blue and os.getpid() not in green | blue


def test_an_environment_has_its_functions_variables_and_lambdas_and_nothing_of_the_stacks(
    module_stack: LocalStack,
) -> None:
    function = module_stack.functions.by_logical_id("EnvFunction")
    environment = get(module_stack, "/env")["environment"]
    expected = runtime_variables(function.spec, module_stack.region, module_stack.endpoint_url)
    assert {key: environment[key] for key in expected} == expected
    assert environment["AWS_LAMBDA_FUNCTION_NAME"] == function.name
    assert environment["AWS_LAMBDA_FUNCTION_MEMORY_SIZE"] == "256"
    assert environment["AWS_EXECUTION_ENV"] == "AWS_Lambda_python3.13"
    assert environment["LAMBDA_TASK_ROOT"] == str(function.spec.code_dir)
    assert environment["PYTHONPATH"].split(os.pathsep)[0] == str(function.spec.code_dir)
    assert environment["AWS_LAMBDA_RUNTIME_API"].startswith("127.0.0.1:")
    assert environment["AWS_LAMBDA_LOG_STREAM_NAME"]
    # added by the runtime client (the trace header) and Python (its locale coercion) only
    assert set(environment) - set(expected) - {"AWS_LAMBDA_RUNTIME_API", "AWS_LAMBDA_LOG_STREAM_NAME"} <= {
        "_X_AMZN_TRACE_ID",
        "LC_CTYPE",
    }
    assert "HOME" in os.environ and "HOME" not in environment


def test_a_handler_error_is_reported_as_lambda_reports_it(module_stack: LocalStack) -> None:
    function = module_stack.functions.by_logical_id("ApiFunction")
    with pytest.raises(FunctionError) as raised:
        function.invoke({"rawPath": "/crash"})
    assert raised.value.error_type == "RuntimeError"
    assert raised.value.payload["errorMessage"] == "secret-internal-detail in a stack trace"
    assert raised.value.payload["stackTrace"]


def test_a_handler_past_its_timeout_is_a_500_and_the_next_request_gets_a_fresh_environment(
    start_stack: StartStack,
) -> None:
    log = io.StringIO()
    stack = start_stack(function_log=log)
    warm = get(stack, "/env")  # EnvFunction's Timeout is 1 s
    # when
    started = time.monotonic()
    reply = requests.get(f"{stack.url}/sleep/5", timeout=30)
    elapsed = time.monotonic() - started
    # then API Gateway's 500, as soon as the timeout passed, and the environment is gone
    assert (reply.status_code, reply.json()) == (500, {"message": "Internal Server Error"})
    assert 1.0 <= elapsed < 4.0
    assert not running(warm["pid"])
    # Lambda's lines come through the environment's pipe, so after the reply
    wait_until(lambda: len(reports(log, "EnvFunction")) == 2, message="the timed-out invocation's REPORT")
    text = log.getvalue()
    assert "Task timed out after 1.00 seconds" in text
    timed_out = reports(log, "EnvFunction")[-1]
    assert timed_out.status == "timeout" and timed_out.duration_ms == 1000.0
    # and the next request is served by a new environment: another process, a cold start
    fresh = get(stack, "/env")
    assert fresh["pid"] != warm["pid"] and fresh["init_at"] > warm["init_at"]
    wait_until(lambda: len(reports(log, "EnvFunction")) == 3, message="the fresh invocation's REPORT")
    assert reports(log, "EnvFunction")[-1].init_duration_ms is not None


def test_the_reserved_concurrency_bounds_environments_and_throttles_synchronous_callers(
    start_stack: StartStack,
) -> None:
    stack = start_stack()
    function = stack.functions.by_logical_id("GatedFunction")  # ReservedConcurrentExecutions: 2
    gate = Path(stack.env[RECORDS_ENV]) / "open"
    with ThreadPoolExecutor(3) as pool:
        # given both environments busy (their handlers wait at the gate)
        held = [pool.submit(requests.get, f"{stack.url}/gated/{name}", timeout=30) for name in ("a", "b")]
        wait_until(lambda: len(handler_records(stack, "GatedFunction")) == 2, message="two invocations running")
        # when a third request comes over HTTP, Lambda throttles it and API Gateway answers 500
        throttled = requests.get(f"{stack.url}/gated/c", timeout=30)
        assert (throttled.status_code, throttled.json()) == (500, {"message": "Internal Server Error"})
        # and an event source's invocation waits for an environment to be free
        waiting = pool.submit(function.invoke, {"rawPath": "/gated/d"})
        assert function.pool.size == 2
        gate.touch()
        results = [future.result() for future in [*held, waiting]]
    assert [result.status_code for result in results[:2]] == [200, 200]
    started = handler_records(stack, "GatedFunction")
    assert [record["started"] for record in started][2:] == ["d"]
    assert len({record["pid"] for record in started}) == 2


def test_report_lines_follow_each_invocation_with_lambdas_fields(start_stack: StartStack) -> None:
    log = io.StringIO()
    stack = start_stack(function_log=log)
    for _ in range(3):
        get(stack, "/env")
    # the last REPORT comes through the environment's pipe, after the reply
    wait_until(lambda: len(reports(log, "EnvFunction")) == 3, message="three REPORT lines")
    lines = [line for line in log.getvalue().splitlines() if line.startswith("[EnvFunction] ")]
    platform = [line.split(" ", 2)[1] for line in lines if line.split(" ", 2)[1] in ("START", "END", "REPORT")]
    assert platform == ["START", "END", "REPORT"] * 3
    first, *warm = reports(log, "EnvFunction")
    assert first.init_duration_ms is not None and first.init_duration_ms > 0
    assert all(report.init_duration_ms is None for report in warm)
    for report in (first, *warm):
        assert report.memory_size_mb == 256
        assert 10 < report.max_memory_used_mb < 256
        assert report.status is None
        assert report.billed_duration_ms >= report.duration_ms + (report.init_duration_ms or 0)
    assert all(f"\tDuration: {report.duration_ms:.2f} ms\t" in log.getvalue() for report in warm)


def test_environments_start_on_demand_idle_out_and_end_with_the_stack(start_stack: StartStack) -> None:
    stack = start_stack(env={"WAKEUP_LOCAL_IDLE_S": "0.3"})
    function = stack.functions.by_logical_id("EnvFunction")
    assert all(function.pool.size == 0 for function in stack.functions)
    first = get(stack, "/env")["pid"]
    wait_until(lambda: function.pool.size == 0 and not running(first), message="the idle environment stopped")
    with ThreadPoolExecutor(4) as pool:
        pids = {reply["pid"] for reply in pool.map(lambda _: get(stack, "/other-env"), range(8))}
    stack.stop()
    assert not any(running(pid) for pid in pids)


def test_concurrent_clients_each_get_their_own_reply(module_stack: LocalStack) -> None:
    barrier = threading.Barrier(16)

    def client(number: int) -> list[str]:
        paths = []
        with requests.Session() as session:
            barrier.wait()
            for turn in range(10):
                reply = session.get(f"{module_stack.url}/items/{number}-{turn}", timeout=30)
                assert reply.status_code == 201, reply.text
                paths.append(reply.json()["event"]["rawPath"])
        return paths

    with ThreadPoolExecutor(16) as pool:
        seen = list(pool.map(client, range(16)))
    assert seen == [[f"/items/{number}-{turn}" for turn in range(10)] for number in range(16)]


def system_lines(log: str, logical_id: str) -> list[str]:
    words = [line.split(" ", 2)[1] for line in log.splitlines() if line.startswith(f"[{logical_id}] ")]
    return [word for word in words if word in ("START", "END", "REPORT")]


def test_a_function_whose_system_log_level_is_warn_has_no_start_end_or_report_lines(
    start_stack: StartStack, tmp_path: Path
) -> None:
    # given a function whose LoggingConfig is JSON, application logs at DEBUG, system logs at WARN
    log = tmp_path / "functions.log"
    with log.open("w") as out:
        stack = start_stack(function_log=out)
        quiet = get(stack, "/other-env")
        get(stack, "/env")
        stack.stop()  # every environment's output copied
    # then its runtime is told the format and level, as Lambda tells it
    assert (quiet["environment"]["AWS_LAMBDA_LOG_FORMAT"], quiet["environment"]["AWS_LAMBDA_LOG_LEVEL"]) == (
        "JSON",
        "DEBUG",
    )
    # and Lambda's INFO lines are left out of its log only, not of a function in the text format
    assert system_lines(log.read_text(), "OtherEnvFunction") == []
    assert system_lines(log.read_text(), "EnvFunction") == ["START", "END", "REPORT"]


def test_the_stack_can_log_every_functions_report_whatever_its_system_log_level(
    start_stack: StartStack, tmp_path: Path
) -> None:
    # given the stack told to log system lines at INFO (as make bench and the calibration run it)
    log = tmp_path / "functions.log"
    with log.open("w") as out:
        stack = start_stack(function_log=out, env={SYSTEM_LOG_LEVEL_ENV: "INFO"})
        get(stack, "/other-env")
        stack.stop()
    # then the quiet function's invocation has its START, END and REPORT
    assert system_lines(log.read_text(), "OtherEnvFunction") == ["START", "END", "REPORT"]
