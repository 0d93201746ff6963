"""LocalStack as a whole: what it offers, and what it leaves behind when it stops."""

import os
import socket
import textwrap
from pathlib import Path

import pytest
import requests
from localstack_helpers import FIXTURE_TEMPLATE, StartStack, fake_minter

from wakeup_awsfacts.template import TemplateError
from wakeup_local.stack import LocalStack


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_it_serves_on_the_port_given_and_mints_a_first_account(start_stack: StartStack) -> None:
    port = free_port()
    stack = start_stack(port=port, first_account_label="first")
    assert stack.url == f"http://127.0.0.1:{port}"
    assert stack.account_token == "swa_test_first"
    assert stack.mint_account("another") == "swa_test_another"
    assert stack.env_lines() == [
        f"WAKEUP_URL=http://127.0.0.1:{port}",
        "WAKEUP_ACCOUNT_TOKEN=swa_test_first",
        f"AWS_ENDPOINT_URL={stack.endpoint_url}",
        "AWS_DEFAULT_REGION=us-east-1",
        f"WAKEUP_TABLE={stack.table_name}",
        f"WAKEUP_MASTER_KEY_SECRET={stack.master_key_secret}",
    ]
    assert stack.table_name == stack.resources.tables["Table"]


def test_the_functions_reach_moto_with_dummy_credentials_whatever_the_shell_holds(
    monkeypatch: pytest.MonkeyPatch, start_stack: StartStack
) -> None:
    monkeypatch.setenv("AWS_PROFILE", "a-real-profile")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAREALKEY")
    before = dict(os.environ)
    stack = start_stack()
    environment = requests.get(f"{stack.url}/env", timeout=30).json()["environment"]
    assert environment["AWS_ENDPOINT_URL"] == stack.endpoint_url
    assert environment["AWS_ACCESS_KEY_ID"] == "testing"
    assert "AWS_PROFILE" not in environment
    # and this process's own environment is left as it was
    assert dict(os.environ) == before


def test_stopping_puts_the_environment_back_frees_the_port_and_ends_moto(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_PROFILE", "kept")
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    before = dict(os.environ)
    port = free_port()
    with LocalStack(FIXTURE_TEMPLATE, port=port, account_minter=fake_minter, env={"WAKEUP_X": "1"}) as stack:
        assert requests.get(f"{stack.url}/items/1", timeout=5).status_code == 201
    assert dict(os.environ) == before
    # nothing listens on the port any more. (Not shown by binding it again: the port came from the
    # ephemeral range, and another test's outgoing connection may take it as its own end meanwhile.)
    with socket.socket() as again, pytest.raises(ConnectionRefusedError):
        again.connect(("127.0.0.1", port))
    # moto's process, and the stack's AWS state with it, is gone
    with pytest.raises(requests.exceptions.ConnectionError):
        requests.get(stack.endpoint_url, timeout=5)


def test_a_stack_that_cannot_start_stops_what_it_started(tmp_path: Path) -> None:
    template = tmp_path / "template.yaml"
    template.write_text(
        textwrap.dedent(
            """
            Resources:
              Table:
                Type: AWS::DynamoDB::Table
                Properties:
                  BillingMode: PAY_PER_REQUEST
                  AttributeDefinitions: [{AttributeName: pk, AttributeType: S}]
                  KeySchema: [{AttributeName: pk, KeyType: HASH}]
              Broken:
                Type: AWS::Serverless::Function
                Properties: {CodeUri: missing/, Handler: app.handler}
            """
        )
    )
    before = dict(os.environ)
    port = free_port()
    with pytest.raises(TemplateError, match="does not exist"):
        LocalStack(template, port=port, account_minter=fake_minter).start()
    assert dict(os.environ) == before
    # nothing listens on the port any more. (Not shown by binding it again: the port came from the
    # ephemeral range, and another test's outgoing connection may take it as its own end meanwhile.)
    with socket.socket() as again, pytest.raises(ConnectionRefusedError):
        again.connect(("127.0.0.1", port))


def test_a_port_in_use_fails_before_anything_starts() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        with pytest.raises(OSError):
            LocalStack(FIXTURE_TEMPLATE, port=taken.getsockname()[1], account_minter=fake_minter).start()


@pytest.mark.parametrize(
    ("shell", "expected"),
    [
        ({}, "127.0.0.0/8,::1/128"),  # the template refuses loopback; here every host is on loopback
        ({"WAKEUP_CALL_ALLOWED_CIDRS": "10.0.0.0/8"}, "10.0.0.0/8"),  # what the person says wins
    ],
)
def test_the_functions_may_call_loopback_unless_told_otherwise(
    monkeypatch: pytest.MonkeyPatch, shell: dict[str, str], expected: str
) -> None:
    monkeypatch.delenv("WAKEUP_CALL_ALLOWED_CIDRS", raising=False)
    for key, value in shell.items():
        monkeypatch.setenv(key, value)
    with LocalStack(FIXTURE_TEMPLATE, account_minter=fake_minter) as stack:
        assert {function.spec.environment["WAKEUP_CALL_ALLOWED_CIDRS"] for function in stack.functions} == {expected}
