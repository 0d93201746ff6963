"""The resource operations (read, plan, create, update, delete, register a wake), against the fake
and the local stack alike."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from wakeup_client import ErrorCode, InMemorySecretStore, WakeupError, WakeupResource, mint_instance_token

LATER = datetime.now(UTC).replace(microsecond=0) + timedelta(days=30)


@pytest.fixture
def secrets() -> InMemorySecretStore:
    return InMemorySecretStore()


@pytest.fixture
def resource(service: Any, secrets: InMemorySecretStore) -> WakeupResource:
    return WakeupResource(service.account(), secrets)


def test_planning_a_url_with_no_instance_is_a_create(resource: WakeupResource) -> None:
    plan = resource.plan(None, "HTTP://127.0.0.1:80/Host/")

    assert (plan.action, plan.current, plan.url, plan.planned) == ("create", None, "http://127.0.0.1/Host", None)


def test_create_mints_and_stores_an_instance_token_then_registers_it(
    resource: WakeupResource, secrets: InMemorySecretStore, host_url: Callable[[], str]
) -> None:
    url = host_url()

    created = resource.create(url)

    token = secrets.get("WAKEUP_TOKEN")
    assert token is not None and re.fullmatch(r"swi_[A-Za-z0-9_-]{43}", token)
    assert (created.url, created.at, created.attempts) == (url, None, 0)
    assert resource.read(created.id) == created


def test_create_registers_the_token_already_stored(
    resource: WakeupResource, secrets: InMemorySecretStore, service: Any, host_url: Callable[[], str]
) -> None:
    token = mint_instance_token()
    secrets.put("WAKEUP_TOKEN", token)

    created = resource.create(host_url())
    service.host(token).wake_at(LATER)

    assert secrets.get("WAKEUP_TOKEN") == token
    assert resource.read(created.id) == created.model_copy(update={"at": LATER})


def test_creating_again_after_a_lost_reply_keeps_the_wake(
    resource: WakeupResource, host_url: Callable[[], str]
) -> None:
    url = host_url()
    first = resource.create(url)
    resource.register_wake(LATER)

    again = resource.create(url)

    assert again.id == first.id
    assert again.at == LATER


def test_planning_the_same_url_is_nothing_to_do(resource: WakeupResource, host_url: Callable[[], str]) -> None:
    url = host_url()
    created = resource.create(url)

    plan = resource.plan(created.id, url + "/")

    assert (plan.action, plan.current, plan.planned) == ("none", created, created)


def test_planning_a_new_url_is_an_update_that_forgets_the_wake(
    resource: WakeupResource, host_url: Callable[[], str]
) -> None:
    created = resource.create(host_url())
    resource.register_wake(LATER)
    new_url = host_url()

    plan = resource.plan(created.id, new_url)

    assert plan.action == "update"
    assert plan.current is not None and plan.current.at == LATER
    assert plan.planned is not None
    assert (plan.planned.id, plan.planned.url, plan.planned.at) == (created.id, new_url, None)


def test_update_moves_the_instance_and_forgets_its_wake(resource: WakeupResource, host_url: Callable[[], str]) -> None:
    created = resource.create(host_url())
    resource.register_wake(LATER)
    new_url = host_url()
    plan = resource.plan(created.id, new_url)

    updated = resource.update(created.id, new_url, expect=plan)

    assert updated == plan.planned
    assert resource.read(created.id) == plan.planned


def test_update_refuses_when_the_plan_no_longer_holds(resource: WakeupResource, host_url: Callable[[], str]) -> None:
    created = resource.create(host_url())
    new_url = host_url()
    plan = resource.plan(created.id, new_url)
    resource.update(created.id, new_url)  # someone applied it meanwhile

    with pytest.raises(WakeupError) as changed:
        resource.update(created.id, new_url, expect=plan)

    assert (changed.value.code, changed.value.retryable) == (ErrorCode.PLAN_CHANGED, False)
    assert "update" in changed.value.message and "none" in changed.value.message


def test_update_with_nothing_to_do_returns_the_instance_as_it_is(
    resource: WakeupResource, host_url: Callable[[], str]
) -> None:
    url = host_url()
    created = resource.create(url)
    resource.register_wake(LATER)

    kept = resource.update(created.id, url)

    assert kept.at == LATER


def test_update_of_a_deleted_instance_makes_it_again(resource: WakeupResource, host_url: Callable[[], str]) -> None:
    url = host_url()
    created = resource.create(url)
    resource.delete(created.id)

    again = resource.update(created.id, url)

    assert again.id != created.id
    assert resource.read(again.id) == again


def test_planning_no_url_deletes_an_instance_and_does_nothing_without_one(
    resource: WakeupResource, host_url: Callable[[], str]
) -> None:
    created = resource.create(host_url())

    assert resource.plan(created.id, None).action == "delete"
    resource.delete(created.id)
    assert resource.read(created.id) is None
    assert resource.plan(created.id, None).action == "none"
    resource.delete(created.id)  # already gone: fine


def test_register_wake_sends_the_stored_token(resource: WakeupResource, host_url: Callable[[], str]) -> None:
    created = resource.create(host_url())

    registered = resource.register_wake(LATER)

    instance = resource.read(created.id)
    assert registered == LATER
    assert instance is not None and instance.at == LATER


def test_register_wake_without_a_stored_token_is_refused(resource: WakeupResource) -> None:
    with pytest.raises(WakeupError) as refused:
        resource.register_wake(LATER)

    assert (refused.value.code, refused.value.retryable) == (ErrorCode.NO_INSTANCE_TOKEN, False)
    assert "WAKEUP_TOKEN" in refused.value.message and "create" in refused.value.message
