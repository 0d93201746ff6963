"""``verify_wake`` on the wakes the fake signs as the service does: what a host's ``/wake``
handler accepts and what it refuses."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from standardwebhooks.webhooks import Webhook

from wakeup_client import InstanceClient, WakeupClient, WakeVerificationError, mint_instance_token, verify_wake
from wakeup_client.testing import DueWake, FakeWakeupService


@pytest.fixture
def fake() -> FakeWakeupService:
    return FakeWakeupService()


@pytest.fixture
def account(fake: FakeWakeupService) -> WakeupClient:
    return WakeupClient(fake.url, fake.account_token, session=fake.session())


def due_wake(fake: FakeWakeupService, account: WakeupClient) -> DueWake:
    """A wake of a new instance due now by the fake's clock, as the fake would call it now."""
    token = mint_instance_token()
    instance_id = account.register("http://127.0.0.1:9/h", token).id
    InstanceClient(fake.url, token, session=fake.session()).wake_at(datetime(2020, 1, 1, tzinfo=UTC))  # now
    [wake] = [w for w in fake.due() if w.instance_id == instance_id]
    return wake


def test_a_wake_the_fake_signs_is_verified_for_its_instance(fake: FakeWakeupService, account: WakeupClient) -> None:
    wake = due_wake(fake, account)

    verified = verify_wake(wake.headers, fake.signing_secret(), wake.instance_id)

    assert verified.instance_id == wake.instance_id
    assert verified.id == wake.headers["webhook-id"]
    assert abs((verified.timestamp - datetime.now(UTC)).total_seconds()) < 5


def test_header_names_are_matched_whatever_their_case(fake: FakeWakeupService, account: WakeupClient) -> None:
    wake = due_wake(fake, account)
    shouting = {name.upper(): value for name, value in wake.headers.items()}
    assert verify_wake(shouting, fake.signing_secret(), wake.instance_id).instance_id == wake.instance_id


def test_a_wake_signed_with_another_secret_is_refused(fake: FakeWakeupService, account: WakeupClient) -> None:
    wake = due_wake(fake, account)
    another = fake.signing_secret(fake.mint_account("another"))
    with pytest.raises(WakeVerificationError):
        verify_wake(wake.headers, another, wake.instance_id)


@pytest.mark.parametrize("header", ["webhook-id", "webhook-timestamp", "webhook-signature"])
def test_a_wake_with_an_altered_header_is_refused(fake: FakeWakeupService, account: WakeupClient, header: str) -> None:
    wake = due_wake(fake, account)
    altered = dict(wake.headers)
    if header == "webhook-timestamp":
        altered[header] = str(int(altered[header]) - 1)
    elif header == "webhook-id":
        # its last character changed (to "1", or to "2" where it is a "1" already)
        altered[header] = altered[header][:-1] + ("2" if altered[header].endswith("1") else "1")
    else:
        altered[header] = "v1," + "A" * 43 + "="
    with pytest.raises(WakeVerificationError):
        verify_wake(altered, fake.signing_secret(), wake.instance_id)


@pytest.mark.parametrize("missing", ["webhook-id", "webhook-timestamp", "webhook-signature"])
def test_a_wake_without_a_header_is_refused(fake: FakeWakeupService, account: WakeupClient, missing: str) -> None:
    wake = due_wake(fake, account)
    with pytest.raises(WakeVerificationError):
        verify_wake({k: v for k, v in wake.headers.items() if k != missing}, fake.signing_secret(), wake.instance_id)


def test_a_malformed_signature_header_is_refused_not_crashed_on(fake: FakeWakeupService, account: WakeupClient) -> None:
    wake = due_wake(fake, account)
    with pytest.raises(WakeVerificationError):
        verify_wake({**wake.headers, "webhook-signature": "garbage"}, fake.signing_secret(), wake.instance_id)


def test_a_wake_signed_for_another_instance_is_refused(fake: FakeWakeupService, account: WakeupClient) -> None:
    # the same account, so the same secret: only the id tells the instances apart
    mine, theirs = due_wake(fake, account), due_wake(fake, account)
    with pytest.raises(WakeVerificationError, match="another instance"):
        verify_wake(theirs.headers, fake.signing_secret(), mine.instance_id)


def test_a_wake_signed_longer_ago_than_the_tolerance_is_refused() -> None:
    # signed ten minutes ago by the fake's clock: a replay of a recorded call
    fake = FakeWakeupService(clock=lambda: datetime.now(UTC) - timedelta(minutes=10))
    wake = due_wake(fake, WakeupClient(fake.url, fake.account_token, session=fake.session()))
    with pytest.raises(WakeVerificationError, match="too old"):
        verify_wake(wake.headers, fake.signing_secret(), wake.instance_id)


def test_during_a_rotation_the_old_and_the_new_secret_both_verify(
    fake: FakeWakeupService, account: WakeupClient
) -> None:
    old = fake.signing_secret()
    new = fake.rotate_signing_secret(overlap=timedelta(hours=1))
    wake = due_wake(fake, account)
    assert new != old
    assert verify_wake(wake.headers, old, wake.instance_id).instance_id == wake.instance_id
    assert verify_wake(wake.headers, new, wake.instance_id).instance_id == wake.instance_id


def test_after_a_rotations_overlap_only_the_new_secret_verifies(fake: FakeWakeupService, account: WakeupClient) -> None:
    old = fake.signing_secret()
    new = fake.rotate_signing_secret(overlap=timedelta(0))
    wake = due_wake(fake, account)
    assert verify_wake(wake.headers, new, wake.instance_id).instance_id == wake.instance_id
    with pytest.raises(WakeVerificationError):
        verify_wake(wake.headers, old, wake.instance_id)


def test_an_id_from_a_release_that_numbered_attempts_names_its_registration(
    fake: FakeWakeupService, account: WakeupClient
) -> None:
    wake = due_wake(fake, account)
    numbered = wake.headers["webhook-id"] + "_2"
    now = datetime.now(UTC)
    headers = {
        "webhook-id": numbered,
        "webhook-timestamp": str(int(now.timestamp())),
        "webhook-signature": Webhook(fake.signing_secret()).sign(numbered, now, ""),
    }
    verified = verify_wake(headers, fake.signing_secret(), wake.instance_id)
    assert (verified.id, verified.registration) == (numbered, wake.headers["webhook-id"].rpartition("_")[2])
