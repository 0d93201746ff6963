"""What each function prints, run on its sample event as Lambda runs it: JSON logs with the ids that
tie them to a request, EMF metrics in the `Wakeup` namespace with the function's `service`
dimension, and never a token or a token's hash (issue 5), a signing secret or the master key (issue 38).

Each run is a cold start in a Python process of its own, with the function's environment as
`template.yaml` defines it (Globals and its own variables, resolved against resources made from the
template in a moto server on loopback). A process of its own because Powertools reads the service
name and the namespace when it is imported: only then does a run print what that function prints
on AWS. Its stdout and stderr are what CloudWatch Logs would receive.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto_env import REGION, ROOT, Host, serving_host, template_resources
from sample_events import PUT_WAKE, REGISTER_INSTANCE, api_event, load_event, sqs_batch

from wakeup.addresses import LOOPBACK_CIDRS
from wakeup.logic.accounts import mint_account
from wakeup.model import Trigger
from wakeup.signing import MasterKeys, derive_key, secret_text
from wakeup.table import DynamoStore
from wakeup.times import format_time, now
from wakeup.tokens import TokenKind, hash_token, mint
from wakeup_awsfacts.template import Resolver, load_template
from wakeup_local.lambda_.functions import FunctionSpec, function_specs

NAMESPACE = "Wakeup"
RUN_TIMEOUT_S = 60

# Run in the function's own process: import the handler as Lambda does and invoke it once.
_CHILD = """
import importlib, json, sys

spec = json.load(sys.stdin)
sys.path[:0] = spec["paths"]
module_name, _, function_name = spec["handler"].rpartition(".")
handler = getattr(importlib.import_module(module_name), function_name)


class Context:
    function_name = spec["function_name"]
    function_version = "$LATEST"
    invoked_function_arn = spec["function_arn"]
    memory_limit_in_mb = spec["memory_mb"]
    aws_request_id = spec["request_id"]
    log_group_name = "/aws/lambda/" + spec["function_name"]
    log_stream_name = "functional"

    def get_remaining_time_in_millis(self):
        return spec["timeout_ms"]  # the function's timeout from the template: a fresh invocation


result = handler(spec["event"], Context())
sys.stdout.flush()
with open(spec["result_path"], "w") as out:
    json.dump(result, out)
"""


@dataclass
class Stack:
    """Resources made from the template, and the functions as the template defines them."""

    endpoint: str
    functions: dict[str, FunctionSpec]
    store: DynamoStore


@dataclass
class Run:
    """One invocation of a function in a process of its own, and what it printed."""

    function: FunctionSpec
    event: dict[str, Any]
    request_id: str
    result: Any
    stdout: str
    stderr: str
    # Every token the run's table or event holds: none of them, nor their hashes, may be printed.
    tokens: list[str] = field(default_factory=list)
    # The master key and every account's signing secret when it ran: none may be printed.
    secrets: list[str] = field(default_factory=list)

    @property
    def service(self) -> str:
        return self.function.environment["POWERTOOLS_SERVICE_NAME"]

    @property
    def records(self) -> list[dict[str, Any]]:
        """Every line printed on stdout, each a JSON object."""
        records = []
        for line in self.stdout.splitlines():
            record = json.loads(line)  # a line that is not JSON fails the test here
            assert isinstance(record, dict), line
            records.append(record)
        return records

    @property
    def logs(self) -> list[dict[str, Any]]:
        return [record for record in self.records if "_aws" not in record]

    @property
    def metric_blobs(self) -> list[dict[str, Any]]:
        return [record for record in self.records if "_aws" in record]

    def metric(self, name: str) -> list[float]:
        """Every value printed for the metric `name`."""
        values: list[float] = []
        for blob in self.metric_blobs:
            for directive in blob["_aws"]["CloudWatchMetrics"]:
                if any(metric["Name"] == name for metric in directive["Metrics"]):
                    value = blob[name]
                    values.extend(value if isinstance(value, list) else [value])
        return values

    def unit(self, name: str) -> str:
        units = {
            metric["Unit"]
            for blob in self.metric_blobs
            for directive in blob["_aws"]["CloudWatchMetrics"]
            for metric in directive["Metrics"]
            if metric["Name"] == name
        }
        assert len(units) == 1, units
        return units.pop()

    def log(self, message: str) -> dict[str, Any]:
        found = [record for record in self.logs if record.get("message") == message]
        assert found, f"no log {message!r} in {[record.get('message') for record in self.logs]}"
        return found[0]


def deploy(endpoint: str, cleanup: ExitStack) -> Stack:
    """The template's resources under a stack name of their own, removed by `cleanup`."""
    made = cleanup.enter_context(template_resources(endpoint, "obs"))
    # The hosts run on loopback, which the local stack allows back as here (the template refuses it).
    allowed = {"WAKEUP_CALL_ALLOWED_CIDRS": LOOPBACK_CIDRS}
    functions = {spec.logical_id: spec for spec in function_specs(made.template, made.resolver, process_env=allowed)}
    return Stack(endpoint, functions, DynamoStore(made.created.tables["Table"], made.clients.dynamodb))


def run(stack: Stack, logical_id: str, event: dict[str, Any], tokens: list[str], tmp: Path) -> Run:
    """Invokes the function once, cold, in a process whose environment is the template's."""
    function = stack.functions[logical_id]
    request_id = str(uuid.uuid4())
    result_path = tmp / f"{logical_id}-{request_id}.json"
    spec = {
        "paths": [str(path) for path in (*function.layer_dirs, function.code_dir)],
        "handler": function.handler,
        "function_name": function.name,
        "function_arn": function.arn,
        "memory_mb": function.memory_mb,
        "timeout_ms": round(function.timeout_s * 1000),
        "request_id": request_id,
        "event": event,
        "result_path": str(result_path),
    }
    environment = {
        "PATH": os.environ.get("PATH", ""),
        "LANG": "C.UTF-8",
        # moto on loopback, with credentials that reach nothing else, and no AWS config read
        "AWS_CONFIG_FILE": str(tmp / "no-aws-config"),
        "AWS_SHARED_CREDENTIALS_FILE": str(tmp / "no-aws-credentials"),
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": REGION,
        "AWS_REGION": REGION,
        "AWS_ENDPOINT_URL": stack.endpoint,
        **function.environment,
    }
    done = subprocess.run(
        [sys.executable, "-c", _CHILD],
        input=json.dumps(spec),
        env=environment,
        cwd=tmp,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(result_path.read_text())
    return Run(function, event, request_id, result, done.stdout, done.stderr, tokens, signing_secrets(stack))


def signing_secrets(stack: Stack) -> list[str]:
    """The master key's text, each master version in it, and every account's signing secret."""
    secret_id = stack.functions["CallerFunction"].environment["WAKEUP_MASTER_KEY_SECRET"]
    client = boto3.client("secretsmanager", endpoint_url=stack.endpoint, region_name=REGION)
    text = client.get_secret_value(SecretId=secret_id)["SecretString"]
    masters = MasterKeys.parse(text)
    found = [text, *masters.versions.values()]
    for account in stack.store.list_accounts():
        for master in masters.versions:
            found.append(secret_text(derive_key(masters.versions[master], account.id, account.signing.current)))
    return found


def registered_instance(
    stack: Stack, url: str, at_offset: timedelta | None = None, master: int = 1
) -> tuple[Trigger | None, list[str]]:
    """An instance registered with minted tokens (and a wake `at_offset` from now, written to the
    table but not armed), of an account of master version `master`; its trigger and the tokens."""
    _, account_token = mint_account(stack.store, "observability", master)
    account = stack.store.owner_of(hash_token(account_token))
    assert account is not None
    instance_token = mint(TokenKind.INSTANCE)
    instance = stack.store.register_instance(account.account_id, url, hash_token(instance_token), now()).instance
    trigger = None
    if at_offset is not None:
        reg = uuid.uuid4().hex
        assert stack.store.register_wake(instance.id, now() + at_offset, reg) is not None
        trigger = Trigger(instance.id, reg, 0)
    return trigger, [account_token, instance_token]


# -- the runs -------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def cleanup() -> Iterator[ExitStack]:
    with ExitStack() as stack:
        yield stack


@pytest.fixture(scope="module")
def stack(endpoint: str, cleanup: ExitStack) -> Stack:
    return deploy(endpoint, cleanup)


@pytest.fixture(scope="module")
def tmp(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("observability")


@pytest.fixture(scope="module")
def answering_host() -> Iterator[Host]:
    with serving_host() as host:
        yield host


@pytest.fixture(scope="module")
def failing_host() -> Iterator[Host]:
    with serving_host(statuses=[503] * 10) as host:
        yield host


@pytest.fixture(scope="module")
def instances_run(stack: Stack, tmp: Path) -> Run:
    _, account_token = mint_account(stack.store, "observability")
    instance_token = mint(TokenKind.INSTANCE)
    body = {"url": "https://host.example.com/app", "token": instance_token}
    event = api_event(REGISTER_INSTANCE, token=account_token, body=body)
    done = run(stack, "InstancesFunction", event, [account_token, instance_token], tmp)
    assert done.result["statusCode"] == 201, done.result
    return done


@pytest.fixture(scope="module")
def wake_run(stack: Stack, tmp: Path) -> Run:
    _, tokens = registered_instance(stack, "https://host.example.com/app")
    event = api_event(PUT_WAKE, token=tokens[1], body={"at": format_time(now() + timedelta(days=1))})
    done = run(stack, "WakeFunction", event, tokens, tmp)
    assert done.result["statusCode"] == 204, done.result
    return done


@pytest.fixture(scope="module")
def caller_called_run(stack: Stack, tmp: Path, answering_host: Host) -> Run:
    trigger, tokens = registered_instance(stack, answering_host.url + "/private/path", timedelta(0))
    assert trigger is not None
    done = run(stack, "CallerFunction", sqs_batch(trigger), tokens, tmp)
    assert done.result == {"batchItemFailures": []}
    assert [call.headers["Wakeup-Instance"] for call in answering_host.calls] == [trigger.instance_id]
    return done


@pytest.fixture(scope="module")
def caller_failed_run(stack: Stack, tmp: Path, failing_host: Host) -> Run:
    trigger, tokens = registered_instance(stack, failing_host.url, timedelta(0))
    assert trigger is not None
    done = run(stack, "CallerFunction", sqs_batch(trigger), tokens, tmp)
    # The failure is recorded and its retry armed: the message itself is done with.
    assert done.result == {"batchItemFailures": []}
    assert len(failing_host.calls) == 1
    return done


@pytest.fixture(scope="module")
def caller_unsigned_run(stack: Stack, tmp: Path, answering_host: Host) -> Run:
    # An account whose master version the secret lacks: the call cannot be signed, so it is not
    # made, and the failure is logged and recorded with the master key in the caller's memory.
    trigger, tokens = registered_instance(stack, answering_host.url + "/unsigned", timedelta(0), master=9)
    assert trigger is not None
    done = run(stack, "CallerFunction", sqs_batch(trigger), tokens, tmp)
    assert [call for call in answering_host.calls if call.path.startswith("/unsigned")] == []
    return done


@pytest.fixture(scope="module")
def caller_stale_run(stack: Stack, tmp: Path) -> Run:
    # A schedule that fired with an older registration's trigger: the instance (with its tokens in
    # the table) has registered a newer wake since, which the run reads and arms again.
    current, tokens = registered_instance(stack, "https://host.example.com/app", timedelta(days=1))
    assert current is not None
    event = load_event("scheduler_caller")
    event["instance_id"] = current.instance_id
    assert event["reg"] != current.reg  # the sample's registration, not the current one
    done = run(stack, "CallerFunction", event, tokens, tmp)
    assert done.result == {"result": "stale"}
    return done


@pytest.fixture(scope="module")
def sweeper_run(endpoint: str, cleanup: ExitStack, tmp: Path) -> Run:
    # A table of its own: the other runs' wakes must not be overdue here.
    own = deploy(endpoint, cleanup)
    _, tokens = registered_instance(own, "https://host.example.com/app", -timedelta(minutes=2))
    done = run(own, "SweeperFunction", load_event("sweeper_tick"), tokens, tmp)
    assert done.result == {"overdue": 1, "rearmed": 1, "failed": 0}
    return done


RUNS = [
    "instances_run",
    "wake_run",
    "caller_called_run",
    "caller_failed_run",
    "caller_unsigned_run",
    "caller_stale_run",
    "sweeper_run",
]
API_RUNS = ["instances_run", "wake_run"]


def the(request: pytest.FixtureRequest, name: str) -> Run:
    found: Run = request.getfixturevalue(name)
    return found


# -- metrics --------------------------------------------------------------------------------------


def test_a_wake_called_counts_it_and_its_lateness(caller_called_run: Run) -> None:
    assert sum(caller_called_run.metric("WakesCalled")) == 1
    assert sum(caller_called_run.metric("CallsFailed")) == 0
    [lateness] = caller_called_run.metric("WakeLateness")
    assert 0 <= lateness < 30_000
    assert caller_called_run.unit("WakeLateness") == "Milliseconds"
    assert caller_called_run.unit("WakesCalled") == "Count"
    assert caller_called_run.metric("RetriesScheduled") == []


def test_a_failed_call_counts_it_and_its_retry(caller_failed_run: Run) -> None:
    assert sum(caller_failed_run.metric("CallsFailed")) == 1
    assert sum(caller_failed_run.metric("RetriesScheduled")) == 1
    assert sum(caller_failed_run.metric("WakesCalled")) == 0
    # The first attempt's lateness is counted whatever its outcome.
    assert len(caller_failed_run.metric("WakeLateness")) == 1


def test_a_stale_trigger_counts_it_and_no_call(caller_stale_run: Run) -> None:
    assert sum(caller_stale_run.metric("StaleTriggersDropped")) == 1
    assert sum(caller_stale_run.metric("WakesCalled")) == 0
    assert sum(caller_stale_run.metric("CallsFailed")) == 0
    assert caller_stale_run.metric("WakeLateness") == []


def test_the_sweeper_counts_the_overdue_wakes_it_rearmed(sweeper_run: Run) -> None:
    assert sum(sweeper_run.metric("OverdueWakesRearmed")) == 1
    assert sweeper_run.unit("OverdueWakesRearmed") == "Count"


@pytest.mark.parametrize("name", ["caller_called_run", "caller_failed_run", "caller_stale_run", "sweeper_run"])
def test_metrics_are_in_the_namespace_with_the_functions_service_dimension(
    request: pytest.FixtureRequest, name: str
) -> None:
    run_ = the(request, name)
    assert run_.metric_blobs, "no metrics printed"
    for blob in run_.metric_blobs:
        for directive in blob["_aws"]["CloudWatchMetrics"]:
            assert directive["Namespace"] == NAMESPACE
            assert directive["Dimensions"] == [["service"]]
        assert blob["service"] == run_.service


def test_each_function_has_its_own_service_name() -> None:
    # The dimension checks above mean something only if the template names each function apart.
    template = load_template(ROOT / "template.yaml")
    resolver = Resolver(template, stack_name="names", region=REGION, endpoint_url="http://127.0.0.1:9")
    names = {
        spec.logical_id: spec.environment["POWERTOOLS_SERVICE_NAME"] for spec in function_specs(template, resolver, {})
    }
    assert names == {
        "InstancesFunction": "instances",
        "WakeFunction": "wake",
        "CallerFunction": "caller",
        "SweeperFunction": "sweeper",
        "PlannerFunction": "planner",
    }


# -- logs -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", RUNS)
def test_every_line_printed_is_a_json_log_of_the_function_and_its_invocation(
    request: pytest.FixtureRequest, name: str
) -> None:
    run_ = the(request, name)
    assert run_.logs, "nothing logged"
    for log in run_.logs:
        assert {"level", "message", "timestamp", "location"} <= set(log)
        assert log["service"] == run_.service
        assert log["function_name"] == run_.function.name
        assert log["function_request_id"] == run_.request_id
    # stderr reaches CloudWatch Logs as plain text lines: nothing may go there.
    assert run_.stderr == ""


@pytest.mark.parametrize("name", API_RUNS)
def test_api_logs_carry_the_api_request_id_as_correlation_id(request: pytest.FixtureRequest, name: str) -> None:
    run_ = the(request, name)
    request_id = run_.event["requestContext"]["requestId"]
    assert all(log["correlation_id"] == request_id for log in run_.logs)


def test_the_api_logs_name_the_account_and_instance(instances_run: Run, wake_run: Run) -> None:
    registered = instances_run.log("instance registered")
    assert registered["account_id"] and registered["instance_id"] == json.loads(instances_run.result["body"])["id"]
    assert wake_run.log("wake registered")["instance_id"]


def test_a_call_is_logged_with_the_host_and_not_the_path(caller_called_run: Run, answering_host: Host) -> None:
    called = caller_called_run.log("wake called")
    assert called["host"] == answering_host.url.removeprefix("http://")
    assert called["status"] == 200
    assert "/private/path" not in caller_called_run.stdout


def test_a_failed_call_is_logged_as_a_warning_with_its_error(caller_failed_run: Run) -> None:
    failed = caller_failed_run.log("wake call failed")
    assert failed["level"] == "WARNING"
    assert failed["error"] == "HTTP 503"
    assert failed["attempts"] == 1


def test_the_sweeper_logs_each_wake_it_rearmed(sweeper_run: Run) -> None:
    rearmed = sweeper_run.log("overdue wake re-armed")
    assert rearmed["level"] == "WARNING" and rearmed["instance_id"]
    assert sweeper_run.log("sweep done")["rearmed"] == 1


# -- secrets --------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", RUNS)
def test_no_token_nor_its_hash_is_printed(request: pytest.FixtureRequest, name: str) -> None:
    run_ = the(request, name)
    printed = run_.stdout + run_.stderr + json.dumps(run_.result)
    assert len(run_.tokens) == 2, "the run must handle an account's and an instance's token"
    for token in run_.tokens:
        # The token's random part, so a token printed without its prefix is caught as well.
        assert token[4:] not in printed
        assert hash_token(token) not in printed
        assert hash_token(token).upper() not in printed


@pytest.mark.parametrize("name", RUNS)
def test_no_signing_secret_nor_the_master_key_is_printed(request: pytest.FixtureRequest, name: str) -> None:
    run_ = the(request, name)
    printed = run_.stdout + run_.stderr + json.dumps(run_.result)
    assert len(run_.secrets) >= 3, "the run must know the master key and the accounts' secrets"
    assert "whsec_" not in printed
    for secret in run_.secrets:
        assert secret.removeprefix("whsec_") not in printed


def test_no_history_item_holds_a_signing_secret_nor_the_master_key(
    stack: Stack, caller_called_run: Run, caller_failed_run: Run, caller_unsigned_run: Run
) -> None:
    items = stack.store.client.scan(TableName=stack.store.table)["Items"]
    calls = [item for item in items if item["pk"]["S"].startswith("ATTEMPT#")]
    # a call answered and one failed (one that could not be signed is no call: its instance item
    # records the failure, and is scanned too)
    assert len(calls) >= 2
    stored = json.dumps(items)
    assert "whsec_" not in stored
    for secret in caller_unsigned_run.secrets:
        assert secret.removeprefix("whsec_") not in stored


def test_the_api_runs_handled_real_tokens(instances_run: Run, wake_run: Run) -> None:
    # The check above means something only if the events carried the tokens it looks for.
    assert instances_run.tokens[0] in instances_run.event["headers"]["authorization"]
    assert instances_run.tokens[1] in instances_run.event["body"]
    assert wake_run.tokens[1] in wake_run.event["headers"]["authorization"]
