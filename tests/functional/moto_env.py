"""What the functional tests share: the template's resources in a moto server on loopback, a
handler module of their own, a scriptable host, and the metrics printed.

The local stack's own moto (`MotoProcess`: a process of its own, with `moto_fixes` applied) rather
than `mock_aws` or a plain `ThreadedMotoServer`: a plain moto evaluates two conditional writes to
one item at once and can let both succeed, which DynamoDB never does, so a test about a race (two
copies of a trigger claiming one wake, say) would fail or pass by chance. Each test gets its own
table, queues and schedule group (unique names), or its module does, removed afterwards.
"""

import importlib.util
import json
import os
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import ModuleType
from typing import Any

from wakeup import factories
from wakeup.factories import signing_keys
from wakeup.logic.rates import AccountThrottle
from wakeup.model import Trigger
from wakeup.settings import Settings
from wakeup.signing import SigningKeys
from wakeup.table import DynamoStore
from wakeup.times import now
from wakeup.triggers import Triggers
from wakeup_awsfacts.template import Resolver, Template, load_template
from wakeup_local.aws.clients import AwsClients, make_clients
from wakeup_local.aws.moto_process import MotoProcess
from wakeup_local.aws.resources import StackResources, create_resources, delete_resources

ROOT = Path(__file__).resolve().parents[2]
REGION = "us-east-1"


@contextmanager
def moto_endpoint() -> Iterator[str]:
    """The local stack's moto, whose DynamoDB writes are atomic as DynamoDB's are."""
    moto = MotoProcess()
    moto.start()
    try:
        yield moto.endpoint_url
    finally:
        moto.stop()
        clients = _clients.pop(moto.endpoint_url, None)
        if clients is not None:
            clients.close()


class RecordingTriggers(Triggers):
    """The real triggers, which also remember what they were asked to send and schedule."""

    def __init__(self, settings: Settings, clients: AwsClients) -> None:
        super().__init__(settings, clients.sqs, clients.scheduler)
        self.sent: list[tuple[Trigger, float]] = []
        self.scheduled: list[tuple[Trigger, datetime]] = []

    def send(self, trigger: Trigger, delay_s: float) -> None:
        self.sent.append((trigger, delay_s))
        super().send(trigger, delay_s)

    def schedule(self, trigger: Trigger, fire_at: datetime, *, replacing: bool = False) -> bool:
        self.scheduled.append((trigger, fire_at))
        return super().schedule(trigger, fire_at, replacing=replacing)


@dataclass
class Deployed:
    """One test's resources, made from template.yaml, and the service's objects over them."""

    settings: Settings
    clients: AwsClients
    store: DynamoStore
    triggers: RecordingTriggers
    signing: SigningKeys

    def queued(self, wait_s: float = 0) -> list[Trigger]:
        """The triggers in the caller queue visible now (or within `wait_s`), removed from it."""
        found = self.clients.sqs.receive_message(
            QueueUrl=self.settings.queue_url, MaxNumberOfMessages=10, WaitTimeSeconds=int(wait_s)
        )
        triggers = []
        for message in found.get("Messages", []):
            triggers.append(Trigger(**json.loads(message["Body"])))
            self.clients.sqs.delete_message(QueueUrl=self.settings.queue_url, ReceiptHandle=message["ReceiptHandle"])
        return triggers

    def delayed_count(self) -> int:
        attributes = self.clients.sqs.get_queue_attributes(
            QueueUrl=self.settings.queue_url, AttributeNames=["ApproximateNumberOfMessagesDelayed"]
        )["Attributes"]
        return int(attributes["ApproximateNumberOfMessagesDelayed"])

    def schedule_input(self, instance_id: str) -> Trigger | None:
        """The trigger the instance's schedule carries, None when it has none."""
        try:
            schedule = self.clients.scheduler.get_schedule(
                Name=f"wake-{instance_id}", GroupName=self.settings.schedule_group
            )
        except self.clients.scheduler.exceptions.ResourceNotFoundException:
            return None
        return Trigger(**json.loads(schedule["Target"]["Input"]))

    def new_instance(self, url: str) -> str:
        account = self.store.create_account("test", uuid.uuid4().hex, now())
        return self.store.register_instance(account.id, url, uuid.uuid4().hex, now()).instance.id

    def new_wake(self, instance_id: str, at: datetime) -> Trigger:
        """A registration written to the table (and not armed: the tests arm what they mean to)."""
        reg = uuid.uuid4().hex
        assert self.store.register_wake(instance_id, at, reg) is not None
        return Trigger(instance_id, reg, 0)


@dataclass
class TemplateResources:
    """The resources `template.yaml` defines, made in a moto server under a stack name of their own."""

    template: Template
    resolver: Resolver
    clients: AwsClients
    created: StackResources


_clients: dict[str, AwsClients] = {}


def clients_of(endpoint_url: str) -> AwsClients:
    """One set of clients per moto (`moto_endpoint`), shared by its tests until it stops: making one
    took about 0.1 s of CPU, and the functional tests deploy some 170 times. boto3's clients are
    thread-safe, but a handler or stub registered on one is there for every test after: a test
    that hooks these removes its hook, or makes clients of its own."""
    if endpoint_url not in _clients:
        _clients[endpoint_url] = make_clients(endpoint_url, REGION)
    return _clients[endpoint_url]


@contextmanager
def template_resources(endpoint_url: str, name_prefix: str) -> Iterator[TemplateResources]:
    """The template's tables, queues and schedule groups (unique names), removed afterwards."""
    clients = clients_of(endpoint_url)
    template = load_template(ROOT / "template.yaml")
    stack_name = f"{name_prefix}-{uuid.uuid4().hex[:8]}"
    resolver = Resolver(template, stack_name=stack_name, region=REGION, endpoint_url=endpoint_url)
    created = create_resources(template, resolver, clients)
    try:
        yield TemplateResources(template, resolver, clients, created)
    finally:
        delete_resources(created, clients)


@contextmanager
def deployed(endpoint_url: str, **settings: str) -> Iterator[Deployed]:
    with template_resources(endpoint_url, "fn") as made:
        resources, clients = made.created, made.clients
        values = {
            "WAKEUP_TABLE": resources.tables["Table"],
            "WAKEUP_QUEUE_URL": resources.queues["CallerQueue"].url,
            "WAKEUP_SCHEDULE_GROUP": resources.schedule_groups["ScheduleGroup"],
            "WAKEUP_CALLER_ARN": f"arn:aws:lambda:{REGION}:123456789012:function:{made.resolver.stack_name}-caller",
            "WAKEUP_SCHEDULER_ROLE_ARN": "arn:aws:iam::123456789012:role/scheduler",
            "WAKEUP_MASTER_KEY_SECRET": resources.secrets["SigningMasterKey"],
            "WAKEUP_CALL_TIMEOUT_S": "2",
            "WAKEUP_CLAIM_LEASE_S": "7",
            # The tests' hosts run on loopback, as the local stack's do.
            "WAKEUP_CALL_ALLOWED_CIDRS": "127.0.0.0/8",
            **settings,
        }
        config = Settings.model_validate(values)
        yield Deployed(
            config,
            clients,
            DynamoStore(config.table, clients.dynamodb),
            RecordingTriggers(config, clients),
            signing_keys(config.master_key_secret, clients.secretsmanager),
        )


@contextmanager
def environment(values: dict[str, str]) -> Iterator[None]:
    """`os.environ` with `values` set while in the block, as it was afterwards."""
    saved = {key: os.environ.get(key) for key in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def imported_handler(function: str) -> ModuleType:
    """functions/<function>/<function>_handler.py imported once for the test session. A handler
    reads its settings at import (Lambda's init), so the import sees a table's name; the `env`
    fixture then points the factories at each test's own resources."""
    with environment(
        {"WAKEUP_TABLE": "imported-before-any-test", "WAKEUP_MASTER_KEY_SECRET": "imported-before-any-test"}
    ):
        module = importlib.import_module(f"{function}_handler")
    factories.reset()
    return module


def private_handler(function: str, env: Deployed) -> ModuleType:
    """functions/<function>/<function>_handler.py as a module of this test's own, its factories
    pointed at `env` (the local stack, if running in this process, keeps its own copy)."""
    path = ROOT / "functions" / function / f"{function}_handler.py"
    spec = importlib.util.spec_from_file_location(f"{function}_handler_under_test_{uuid.uuid4().hex}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    # Its init reads the settings from the environment, as on Lambda.
    with environment({k: str(v) for k, v in env.settings.model_dump(by_alias=True).items()}):
        spec.loader.exec_module(module)
    module.get_store = lambda: env.store  # type: ignore[attr-defined]
    module.get_triggers = lambda: env.triggers  # type: ignore[attr-defined]
    module.get_settings = lambda: env.settings  # type: ignore[attr-defined]
    if hasattr(module, "get_signing_keys"):
        module.get_signing_keys = lambda: env.signing
    if hasattr(module, "get_throttle"):
        throttle = AccountThrottle(env.store, env.settings.account_requests_per_s)
        module.get_throttle = lambda: throttle
    return module


@dataclass
class LambdaContext:
    function_name: str = "test-caller"
    memory_limit_in_mb: int = 512
    invoked_function_arn: str = "arn:aws:lambda:us-east-1:123456789012:function:test-caller"
    aws_request_id: str = field(default_factory=lambda: str(uuid.uuid4()))

    def get_remaining_time_in_millis(self) -> int:
        return 30_000


def emitted_metrics(stdout: str) -> dict[str, list[float]]:
    """Every metric value in the EMF lines printed, by name."""
    values: dict[str, list[float]] = {}
    for line in stdout.splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if not isinstance(record, dict) or "_aws" not in record:
            continue
        for directive in record["_aws"]["CloudWatchMetrics"]:
            for metric in directive["Metrics"]:
                value = record[metric["Name"]]
                values.setdefault(metric["Name"], []).extend(value if isinstance(value, list) else [value])
    return values


def counted(stdout: str, name: str) -> float:
    return sum(emitted_metrics(stdout).get(name, []))


@dataclass
class Call:
    path: str
    headers: dict[str, str]
    at: datetime
    monotonic: float


@dataclass
class Host:
    """A host on loopback answering `/wake` with the statuses given in turn (then 200), after
    `delay_s`, and recording each call. With `gather`, each call is held until that many are in
    flight at once (or `delay_s` passes); `most_in_flight` tells how many were at most. With
    `release`, each call is held until the test sets it (or `delay_s` passes)."""

    statuses: list[int] = field(default_factory=list)
    delay_s: float = 0
    gather: int = 0
    release: threading.Event | None = None
    calls: list[Call] = field(default_factory=list)
    url: str = ""
    most_in_flight: int = 0
    _in_flight: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _changed: threading.Condition = field(default_factory=threading.Condition)

    def hold(self) -> None:
        """One call's wait: `delay_s`, or until `gather` calls are in flight."""
        with self._changed:
            self._in_flight += 1
            self.most_in_flight = max(self.most_in_flight, self._in_flight)
            self._changed.notify_all()
            if self.gather:
                self._changed.wait_for(lambda: self.most_in_flight >= self.gather, timeout=self.delay_s)
        if self.release is not None:
            self.release.wait(self.delay_s)
        elif self.delay_s and not self.gather:
            time.sleep(self.delay_s)
        with self._changed:
            self._in_flight -= 1

    def next_status(self) -> int:
        with self._lock:
            return self.statuses.pop(0) if self.statuses else 200

    def wait_for_calls(self, count: int, timeout_s: float) -> list[Call]:
        deadline = time.monotonic() + timeout_s
        while len(self.calls) < count:
            if time.monotonic() > deadline:
                raise AssertionError(f"expected {count} calls within {timeout_s} s, got {len(self.calls)}")
            time.sleep(0.02)
        return list(self.calls)


@contextmanager
def serving_host(**options: Any) -> Iterator[Host]:
    host = Host(**options)

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            host.calls.append(Call(self.path, dict(self.headers.items()), now(), time.monotonic()))
            host.hold()
            self.send_response(host.next_status())
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    host.url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        yield host
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
