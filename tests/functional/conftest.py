"""Fixtures the functional tests share.

- `endpoint` (session): the local stack's moto, in a process of its own, on loopback; each module
  and test makes resources of its own (unique names) in it.
- `resources` (module): the template's table, queues and schedule group in it, one set for the
  module, for tests that each work with accounts and instances of their own.
- `env`: those resources in the environment the function reads them from (as on AWS), read afresh.
- `module_env`: those resources with a recorder of the test's own triggers, for the tests of the
  service's objects that each work with accounts and instances of their own and read no queue.
- `own_queue_env`: the same with a caller queue of the test's own, for tests that read what was
  queued (the caller's).
- `own_env`: a table, queues and schedule group of the test's own, for tests whose wakes, queue or
  overdue items must not reach another's (a module names it its `env`).
- `host`: a scriptable host on loopback; `proxy` and `lossy_store`: a DynamoDB proxy that loses the
  replies a test asks it to, and the store through it.
- `metrics_namespace`: the namespace the template gives the functions' metrics.
"""

import uuid
from collections.abc import Iterator
from dataclasses import replace

import pytest
from lost_reply import LostReplyProxy
from moto_env import Deployed, Host, RecordingTriggers, deployed, moto_endpoint, serving_host

from wakeup import factories
from wakeup.observability import metrics
from wakeup.table import DynamoStore


@pytest.fixture(scope="session")
def endpoint() -> Iterator[str]:
    with moto_endpoint() as url:
        yield url


@pytest.fixture(scope="module")
def resources(endpoint: str) -> Iterator[Deployed]:
    with deployed(endpoint) as made:
        yield made


@pytest.fixture
def module_env(resources: Deployed) -> Deployed:
    return replace(resources, triggers=RecordingTriggers(resources.settings, resources.clients))


@pytest.fixture
def own_queue_env(resources: Deployed) -> Iterator[Deployed]:
    sqs = resources.clients.sqs
    url = sqs.create_queue(QueueName=f"caller-{uuid.uuid4().hex[:16]}")["QueueUrl"]
    settings = resources.settings.model_copy(update={"queue_url": url})
    yield replace(resources, settings=settings, triggers=RecordingTriggers(settings, resources.clients))
    sqs.delete_queue(QueueUrl=url)


@pytest.fixture
def env(endpoint: str, resources: Deployed, monkeypatch: pytest.MonkeyPatch) -> Iterator[Deployed]:
    monkeypatch.setenv("AWS_ENDPOINT_URL", endpoint)
    for name, value in resources.settings.model_dump(by_alias=True).items():
        monkeypatch.setenv(name, str(value))
    factories.reset()  # settings and clients are cached per cold start
    yield resources
    factories.reset()


@pytest.fixture
def metrics_namespace(monkeypatch: pytest.MonkeyPatch) -> None:
    # Powertools reads the namespace when `wakeup.observability` is first imported; the template
    # sets it for the functions.
    monkeypatch.setattr(metrics, "namespace", metrics.namespace or "Wakeup")


@pytest.fixture
def own_env(endpoint: str) -> Iterator[Deployed]:
    with deployed(endpoint) as made:
        yield made


@pytest.fixture
def host() -> Iterator[Host]:
    with serving_host() as started:
        yield started


@pytest.fixture
def proxy(endpoint: str) -> Iterator[LostReplyProxy]:
    with LostReplyProxy(endpoint) as started:
        yield started


@pytest.fixture
def lossy_store(env: Deployed, proxy: LostReplyProxy) -> DynamoStore:
    return DynamoStore(env.settings.table, client=proxy.dynamodb())
