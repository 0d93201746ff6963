"""The service's signatures, checked by the `standardwebhooks` library a host would use."""

from datetime import UTC, datetime, timedelta

import pytest
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from wakeup.signing import SigningVersions, WakeId, derive_key, secret_text, signed_headers

MASTER = "m" * 64
ACCOUNT = "0b1c2d3e-0000-4000-8000-000000000001"
WAKE = WakeId("5f0c1d2e-0000-4000-8000-000000000002", "ab" * 16)
# derive_key(MASTER, ACCOUNT, 1), computed apart from the code: a host keeps its secret across
# releases, so the derivation must never change. From a shell:
#   printf 'wakeup signing secret\0%s\01' "$ACCOUNT" | openssl dgst -sha256 -hmac "$MASTER"
KNOWN_KEY = bytes.fromhex("d6bc8e412d9b2dda725742e53c3e87ed4e164f079df4ca37390aa3d734db1041")


def verifies(key: bytes, headers: dict[str, str]) -> bool:
    try:
        Webhook(secret_text(key)).verify("", headers, json_parse=False)
    except WebhookVerificationError:
        return False
    return True


def test_the_headers_are_the_standard_ones_and_the_id_names_instance_and_registration() -> None:
    at = datetime.now(UTC)
    headers = signed_headers([derive_key(MASTER, ACCOUNT, 1)], WAKE, at)
    assert headers["webhook-id"] == f"wake_{WAKE.instance_id}_{WAKE.reg}"
    assert headers["webhook-timestamp"] == str(int(at.timestamp()))
    assert headers["webhook-signature"].startswith("v1,")


def test_a_library_verifies_the_signature_with_the_accounts_secret() -> None:
    key = derive_key(MASTER, ACCOUNT, 1)
    assert verifies(key, signed_headers([key], WAKE, datetime.now(UTC)))


def test_each_of_two_signing_keys_verifies_alone() -> None:
    old, new = derive_key(MASTER, ACCOUNT, 1), derive_key(MASTER, ACCOUNT, 2)
    headers = signed_headers([new, old], WAKE, datetime.now(UTC))
    assert len(headers["webhook-signature"].split(" ")) == 2
    assert verifies(old, headers) and verifies(new, headers)
    assert not verifies(derive_key(MASTER, ACCOUNT, 3), headers)


@pytest.mark.parametrize(
    ("master", "account", "version"),
    [("n" * 64, ACCOUNT, 1), (MASTER, "0b1c2d3e-0000-4000-8000-000000000009", 1), (MASTER, ACCOUNT, 2)],
)
def test_a_key_depends_on_master_account_and_version(master: str, account: str, version: int) -> None:
    assert derive_key(MASTER, ACCOUNT, 1) == KNOWN_KEY
    assert derive_key(master, account, version) != KNOWN_KEY


def test_the_secret_is_whsec_and_base64_of_32_bytes() -> None:
    secret = secret_text(derive_key(MASTER, ACCOUNT, 1))
    assert secret.startswith("whsec_") and len(secret) == len("whsec_") + 44


def test_the_previous_version_signs_only_until_its_overlap_ends() -> None:
    until = datetime(2030, 1, 1, tzinfo=UTC)
    versions = SigningVersions(current=2, previous=1, previous_until=until)
    assert versions.signing_at(until - timedelta(milliseconds=1)) == [2, 1]
    assert versions.signing_at(until) == [2]
    assert SigningVersions(current=1).signing_at(until) == [1]
