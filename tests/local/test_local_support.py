"""The test support itself: the scriptable host, and the stacks the shared fixtures start."""

import socket
from datetime import UTC, datetime, timedelta

import boto3
import pytest
import requests

from support.api import Api
from support.host import Answer, WakeHost, closed_port_url, hang, redirect
from support.stack_process import MakeStack, StackProcess
from wakeup.times import format_time, now
from wakeup.tokens import TokenKind, mint

# --- the host ---------------------------------------------------------------------------------------


def test_the_host_answers_its_script_in_order_then_200(host: WakeHost) -> None:
    host.script(503, redirect("http://elsewhere.test/wake"), Answer(status=204))
    replies = [requests.get(f"{host.url}/wake", timeout=5, allow_redirects=False) for _ in range(4)]
    assert [reply.status_code for reply in replies] == [503, 302, 204, 200]
    assert replies[1].headers["Location"] == "http://elsewhere.test/wake"
    calls = host.wait_for_calls(4, timeout=1)
    assert [call.answer.status for call in calls] == [503, 302, 204, 200]
    assert calls[0].path == "/wake" and calls[0].headers["user-agent"].startswith("python-requests")
    assert calls[0].monotonic <= calls[1].monotonic


def test_a_script_for_one_path_leaves_the_others_alone(host: WakeHost) -> None:
    host.script(500, path="/a/wake")
    assert requests.get(f"{host.url_for('b')}/wake", timeout=5).status_code == 200
    assert requests.get(f"{host.url_for('a')}/wake", timeout=5).status_code == 500
    assert [call.path for call in host.calls_to("/a/wake")] == ["/a/wake"]


def test_a_hanging_answer_makes_the_caller_time_out(host: WakeHost) -> None:
    host.script(hang(5))
    with pytest.raises(requests.exceptions.ReadTimeout):
        requests.get(f"{host.url}/wake", timeout=0.3)
    assert len(host.calls) == 1


def test_waiting_for_calls_that_do_not_come_fails_clearly(host: WakeHost) -> None:
    with pytest.raises(AssertionError, match=r"expected 1 calls to /wake within 0.1 s, got 0"):
        host.wait_for_calls(1, timeout=0.1, path="/wake")
    requests.get(f"{host.url}/wake", timeout=5)
    requests.get(f"{host.url}/wake", timeout=5)
    with pytest.raises(AssertionError, match="expected at most 1 calls, got 2"):
        host.assert_no_calls_beyond(1, during=0.1)


def test_nothing_listens_on_a_closed_port_url() -> None:
    with closed_port_url() as url, pytest.raises(requests.exceptions.ConnectionError, match="Connection refused"):
        requests.get(url, timeout=5)


def test_a_closed_port_url_takes_no_other_socket_while_held() -> None:
    # A test server bound to port 0, or an outgoing connection's source port, cannot take it while
    # the call meant to be refused is on its way.
    with closed_port_url() as url, socket.socket() as other, pytest.raises(OSError, match="in use"):
        other.bind(("127.0.0.1", int(url.rpartition(":")[2])))


# --- the shared stacks -------------------------------------------------------------------------------


def test_the_session_stack_mints_accounts_whose_tokens_work(stack: StackProcess, api: Api) -> None:
    token = stack.mint_account("support-test")
    assert token.startswith("swa_") and token != stack.account_token
    assert api.with_token(token).get("/wakeup/instances").status_code == 200
    assert api.get("/wakeup/instances").status_code == 200
    assert [line.partition("=")[0] for line in stack.env_lines()] == [
        "WAKEUP_URL",
        "WAKEUP_ACCOUNT_TOKEN",
        "AWS_ENDPOINT_URL",
        "AWS_DEFAULT_REGION",
        "WAKEUP_TABLE",
        "WAKEUP_MASTER_KEY_SECRET",
        "WAKEUP_SIGNING_SECRET",
    ]


def test_run_sweeper_runs_the_stacks_sweeper_now(make_stack: MakeStack) -> None:
    # given a stack whose own sweep comes once a day, not once a minute (else it may take the wake
    # first: its re-armed trigger is then called and retried, and the sweep asked for here finds the
    # wake claimed), and a wake an hour ahead whose next check the table says is a minute overdue:
    # what a wake whose trigger was lost looks like to the sweeper
    stack = make_stack(WAKEUP_LOCAL_SWEEP_S=str(24 * 3600))
    api = Api(stack.url, stack.account_token)
    token = mint(TokenKind.INSTANCE)
    instance_id = api.register("http://127.0.0.1:9/sweep", token).json()["id"]
    assert api.wake(token, format_time(now() + timedelta(hours=1))).status_code == 204
    dynamodb = boto3.client("dynamodb", endpoint_url=stack.endpoint_url, region_name=stack.region)
    dynamodb.update_item(
        TableName=stack.table_name,
        Key={"pk": {"S": f"INSTANCE#{instance_id}"}},
        UpdateExpression="SET pending_due = :due",
        ExpressionAttributeValues={":due": {"S": format_time(now() - timedelta(minutes=1))}},
    )
    logged = len(stack.log_text())
    # when the sweeper is run now
    # (the stack's scheduled functions are the sweeper and the planner: the sweeper's result)
    [swept] = [result for result in stack.run_sweeper() if "overdue" in result]
    # then the stack's sweeper found it and armed it again
    assert swept["overdue"] >= 1 and swept["rearmed"] >= 1
    rearmed = [line for line in stack.log_text()[logged:].splitlines() if "overdue wake re-armed" in line]
    assert any(instance_id in line for line in rearmed)
    api.close()


def test_make_stack_passes_its_settings_to_the_functions(make_stack: MakeStack) -> None:
    # given a stack whose horizon is 5 s: a wake 60 s ahead goes through a schedule, not SQS
    started = make_stack(WAKEUP_SQS_HORIZON_S="5", WAKEUP_SCHEDULE_LEAD_S="2")
    api = Api(started.url, started.account_token)
    try:
        token = mint(TokenKind.INSTANCE)
        assert api.register("http://127.0.0.1:9/host", token).status_code == 201
        at = (datetime.now(UTC) + timedelta(seconds=60)).isoformat()
        assert api.wake(token, at).status_code == 204
    finally:
        api.close()
    scheduler = boto3.client("scheduler", endpoint_url=started.endpoint_url, region_name=started.region)
    groups = scheduler.list_schedule_groups()["ScheduleGroups"]
    names = [group["Name"] for group in groups if group["Name"] != "default"]
    schedules = [item for name in names for item in scheduler.list_schedules(GroupName=name)["Schedules"]]
    assert len(schedules) == 1
