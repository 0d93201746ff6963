"""What ``FakeWakeupService`` offers a test beyond the HTTP contract: the wakes due at a time, and
hosts' answers recorded as the service records them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from wakeup_client import ErrorCode, InstanceClient, WakeupClient, WakeupError, mint_instance_token
from wakeup_client.testing import DueWake, FakeWakeupService

AT = datetime(2030, 6, 1, 12, 0, tzinfo=UTC)
# The fake's clock in these tests: a day before AT, whatever today is (a past `at` would be stored
# as now, as the service stores it).
NOW = AT - timedelta(days=1)


@pytest.fixture
def fake() -> FakeWakeupService:
    return FakeWakeupService(clock=lambda: NOW)


@pytest.fixture
def account(fake: FakeWakeupService) -> WakeupClient:
    return WakeupClient(fake.url, fake.account_token, session=fake.session())


def registered(account: WakeupClient, url: str = "http://127.0.0.1:9/h") -> tuple[str, str]:
    """A new instance's id and token."""
    token = mint_instance_token()
    return account.register(url, token).id, token


def wake(fake: FakeWakeupService, token: str, at: datetime) -> None:
    InstanceClient(fake.url, token, session=fake.session()).wake_at(at)


def test_a_wake_is_due_from_its_time_on(fake: FakeWakeupService, account: WakeupClient) -> None:
    instance_id, token = registered(account)
    wake(fake, token, AT)

    assert fake.due(AT - timedelta(milliseconds=1)) == []
    assert fake.due(AT) == [DueWake(instance_id, "http://127.0.0.1:9/h", AT, attempt=1)]
    assert fake.next_due() == AT


def test_an_instance_without_a_wake_is_never_due(fake: FakeWakeupService, account: WakeupClient) -> None:
    registered(account)

    assert fake.due(AT + timedelta(days=365)) == []


def test_wakes_are_listed_earliest_first(fake: FakeWakeupService, account: WakeupClient) -> None:
    late_id, late_token = registered(account)
    early_id, early_token = registered(account)
    wake(fake, late_token, AT + timedelta(seconds=5))
    wake(fake, early_token, AT)

    assert [w.instance_id for w in fake.due(AT + timedelta(minutes=1))] == [early_id, late_id]


def test_a_2xx_answer_records_the_call_and_the_wake_is_no_longer_due(
    fake: FakeWakeupService, account: WakeupClient
) -> None:
    instance_id, token = registered(account)
    wake(fake, token, AT)
    (due,) = fake.due(AT)

    assert fake.record_answer(due, 204, when=AT + timedelta(milliseconds=300)) is True

    instance = account.get(instance_id)
    assert instance is not None
    assert (instance.called_at, instance.attempts, instance.last_error) == (AT + timedelta(milliseconds=300), 0, None)
    assert fake.due(AT + timedelta(days=1)) == []


def test_failed_calls_are_counted_and_retried_with_backoff(fake: FakeWakeupService, account: WakeupClient) -> None:
    instance_id, token = registered(account)
    wake(fake, token, AT)
    now = AT

    gaps = []
    for attempt in range(1, 13):
        (due,) = fake.due(now)
        assert due.attempt == attempt
        fake.record_answer(due, 503, when=now)
        next_due = fake.next_due()
        assert next_due is not None
        gaps.append((next_due - now).total_seconds())
        now = next_due

    assert gaps == [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 900, 900]
    instance = account.get(instance_id)
    assert instance is not None
    assert (instance.called_at, instance.attempts, instance.last_error) == (None, 12, "HTTP 503")


def test_an_answer_that_never_came_records_its_error(fake: FakeWakeupService, account: WakeupClient) -> None:
    instance_id, token = registered(account)
    wake(fake, token, AT)

    fake.record_answer(fake.due(AT)[0], error="timed out after 10 s", when=AT)

    instance = account.get(instance_id)
    assert instance is not None and (instance.attempts, instance.last_error) == (1, "timed out after 10 s")


def test_success_after_failures_clears_them(fake: FakeWakeupService, account: WakeupClient) -> None:
    instance_id, token = registered(account)
    wake(fake, token, AT)
    fake.record_answer(fake.due(AT)[0], 500, when=AT)

    fake.record_answer(fake.due(AT + timedelta(seconds=1))[0], 200, when=AT + timedelta(seconds=1))

    instance = account.get(instance_id)
    assert instance is not None
    assert (instance.called_at, instance.attempts, instance.last_error) == (AT + timedelta(seconds=1), 0, None)


def test_an_answer_for_a_replaced_wake_is_not_recorded(fake: FakeWakeupService, account: WakeupClient) -> None:
    instance_id, token = registered(account)
    wake(fake, token, AT)
    (old,) = fake.due(AT)
    wake(fake, token, AT + timedelta(hours=1))

    assert fake.record_answer(old, 200, when=AT) is False

    instance = account.get(instance_id)
    assert instance is not None and (instance.at, instance.called_at) == (AT + timedelta(hours=1), None)


def test_an_answer_for_a_moved_instance_is_not_recorded(fake: FakeWakeupService, account: WakeupClient) -> None:
    instance_id, token = registered(account)
    wake(fake, token, AT)
    (due,) = fake.due(AT)
    account.register("http://127.0.0.1:9/moved", token)

    assert fake.record_answer(due, 503, when=AT) is False
    instance = account.get(instance_id)
    assert instance is not None and (instance.attempts, instance.last_error) == (0, None)


def test_an_answer_for_a_deleted_instance_is_not_recorded(fake: FakeWakeupService, account: WakeupClient) -> None:
    instance_id, token = registered(account)
    wake(fake, token, AT)
    (due,) = fake.due(AT)
    account.delete(instance_id)

    assert fake.record_answer(due, 200, when=AT) is False


def test_record_answer_needs_a_status_or_an_error(fake: FakeWakeupService, account: WakeupClient) -> None:
    _, token = registered(account)
    wake(fake, token, AT)
    (due,) = fake.due(AT)

    with pytest.raises(ValueError):
        fake.record_answer(due)
    with pytest.raises(ValueError):
        fake.record_answer(due, 200, error="both")


def test_the_fakes_clock_is_the_default_time() -> None:
    now = [AT]
    fake = FakeWakeupService(clock=lambda: now[0])
    account = WakeupClient(fake.url, fake.account_token, session=fake.session())
    instance_id, token = registered(account)
    wake(fake, token, AT + timedelta(seconds=10))

    assert fake.due() == []
    now[0] = AT + timedelta(seconds=10)
    assert fake.record_answer(fake.due()[0], 200) is True
    instance = account.get(instance_id)
    assert instance is not None and instance.called_at == AT + timedelta(seconds=10)


def test_a_revoked_accounts_tokens_are_refused(fake: FakeWakeupService, account: WakeupClient) -> None:
    _, token = registered(account)

    fake.revoke_account(fake.account_token)

    for call in (lambda: list(account.list()), lambda: wake(fake, token, AT)):
        with pytest.raises(WakeupError) as refused:
            call()
        assert (refused.value.status, refused.value.code) == (401, ErrorCode.UNAUTHORIZED)


def test_the_fakes_session_answers_only_for_its_own_url(fake: FakeWakeupService) -> None:
    # Another URL goes through requests' own transport: here a port nothing listens on.
    client = WakeupClient("http://127.0.0.1:9", fake.account_token, session=fake.session(), timeout=2)

    with pytest.raises(WakeupError) as failed:
        client.get("0b8e5f6c-2d7a-4f1e-9c3b-5a6d7e8f9a0b")

    assert failed.value.code == ErrorCode.CONNECTION_FAILED


def test_the_answered_calls_are_the_instances_history_newest_first(
    fake: FakeWakeupService, account: WakeupClient
) -> None:
    instance_id, token = registered(account)
    wake(fake, token, AT)
    [first] = fake.due(AT)
    assert fake.record_answer(first, 503, when=AT)
    [second] = fake.due(AT + timedelta(seconds=1))
    assert fake.record_answer(second, 200, when=AT + timedelta(seconds=1))

    calls = list(account.attempts(instance_id, page_size=1))

    assert [(c.attempt, c.status, c.error) for c in calls] == [(2, 200, None), (1, 503, "HTTP 503")]
    assert calls[1].lateness_ms == 0 and calls[0].lateness_ms is None
    assert calls[1].webhook_id == first.headers["webhook-id"]
    # one wake, one Standard Webhooks message: every attempt carries the same id
    assert second.headers["webhook-id"] == first.headers["webhook-id"] == calls[0].webhook_id
