"""The signing master key rotated without an outage: a new master comes in beside the old one;
each account moves to it through its own signing-secret rotation, both signatures sent through the
overlap (so its hosts keep verifying); the old master retires once no live account signs with it.
The end of an overlap is reached without waiting: a rotation whose overlap is already over."""

from collections.abc import Iterator
from dataclasses import replace
from datetime import timedelta
from types import ModuleType

import pytest
from moto_env import Deployed, Host, LambdaContext, private_handler, serving_host
from sample_events import sqs_batch
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from wakeup import factories
from wakeup.factories import signing_keys
from wakeup.logic.accounts import mint_account, revoke_account, rotate_signing_secret, signing_secret
from wakeup.model import Account
from wakeup.signing import MasterKeys, SigningKeys
from wakeup.times import now
from wakeup_admin import cli, master_keys

pytestmark = pytest.mark.usefixtures("metrics_namespace")


@pytest.fixture
def env(own_env: Deployed) -> Deployed:
    """A table and a master key secret of the test's own: retiring a master asks every account."""
    return own_env


@pytest.fixture
def wake_host() -> Iterator[Host]:
    with serving_host() as host:
        yield host


def admin_keys(env: Deployed) -> SigningKeys:
    """Keys as `wakeup-admin` reads them: afresh."""
    return signing_keys(env.settings.master_key_secret, env.clients.secretsmanager)


def verifies(secret: str, headers: dict[str, str]) -> bool:
    try:
        Webhook(secret).verify("", headers, json_parse=False)
    except WebhookVerificationError:
        return False
    return True


def called(env: Deployed, caller: ModuleType, host: Host, account: Account) -> dict[str, str]:
    """The headers of a call to a new instance of `account`, due now."""
    instance = env.store.register_instance(account.id, host.url, account.id + str(len(host.calls)), now()).instance
    caller.lambda_handler(sqs_batch(env.new_wake(instance.id, now() - timedelta(seconds=1))), LambdaContext())
    [call] = [call for call in host.calls if call.headers["Wakeup-Instance"] == instance.id]
    return dict(call.headers)


def test_an_account_moves_to_a_new_master_with_both_signing_through_the_overlap(env: Deployed, wake_host: Host) -> None:
    # given an account of master 1, and a warm caller that read the secret before master 2 existed
    account, _ = mint_account(env.store, "moving")
    old_secret = signing_secret(admin_keys(env), account)
    caller = private_handler("caller", env)
    assert verifies(old_secret, called(env, caller, wake_host, account))
    # when master 2 is added and the account's secret rotated (onto it) with an hour's overlap
    added = master_keys.add(env.clients.secretsmanager, env.settings.master_key_secret)
    rotated = rotate_signing_secret(env.store, admin_keys(env), account.id, timedelta(hours=1))
    # then the new secret derives from master 2, and the warm caller signs with both
    assert added.current == 2 and rotated is not None
    moved, new_secret = rotated
    assert (moved.signing.master, moved.signing.previous_master) == (2, 1)
    headers = called(env, caller, wake_host, moved)
    assert len(headers["webhook-signature"].split(" ")) == 2
    assert verifies(old_secret, headers) and verifies(new_secret, headers)
    # and master 1 cannot retire while the account's overlap lasts
    refusal = master_keys.retire(env.clients.secretsmanager, env.settings.master_key_secret, env.store, 1, now())
    assert refusal is not None and "1 live account still signs with version 1" in refusal


def test_once_no_account_signs_with_the_old_master_it_retires(env: Deployed, wake_host: Host) -> None:
    # given two accounts of master 1, one revoked, and master 2 added
    account, _ = mint_account(env.store, "moved")
    gone, _ = mint_account(env.store, "revoked")
    revoke_account(env.store, gone.id)
    client, secret_id = env.clients.secretsmanager, env.settings.master_key_secret
    plain = client.get_secret_value(SecretId=secret_id)["SecretString"]
    master_keys.add(client, secret_id)
    assert master_keys.usage(env.store, now()) == {1: 1}
    # when the account's secret is rotated onto master 2 and the overlap is over
    rotated = rotate_signing_secret(env.store, admin_keys(env), account.id, timedelta(seconds=-1))
    assert rotated is not None
    moved, new_secret = rotated
    assert master_keys.usage(env.store, now()) == {2: 1}
    refused_current = master_keys.retire(client, secret_id, env.store, 2, now())
    retired = master_keys.retire(client, secret_id, env.store, 1, now())
    # then master 2 (current) stays, master 1 is gone from the secret, and no staged value holds it
    assert refused_current is not None and "current" in refused_current
    assert retired is None
    assert master_keys.read(client, secret_id).versions.keys() == {2}
    staged = [v for v in client.list_secret_version_ids(SecretId=secret_id)["Versions"] if v.get("VersionStages")]
    for version in staged:
        assert plain not in client.get_secret_value(SecretId=secret_id, VersionId=version["VersionId"])["SecretString"]
    # and a cold caller signs with the new secret alone
    headers = called(env, private_handler("caller", replace(env, signing=admin_keys(env))), wake_host, moved)
    assert headers["webhook-signature"].count(",") == 1 and verifies(new_secret, headers)


def test_a_new_account_derives_from_the_current_master(env: Deployed) -> None:
    master_keys.add(env.clients.secretsmanager, env.settings.master_key_secret)
    keys = admin_keys(env)

    account, _ = mint_account(env.store, "new", keys.current_master())

    assert account.signing.master == 2
    assert env.store.signing_versions(account.id) == account.signing
    assert signing_secret(keys, account) == keys.secret(account.id, 1, 2) != keys.secret(account.id, 1, 1)


def test_an_account_naming_a_master_the_secret_lacks_is_not_called_unsigned(env: Deployed, wake_host: Host) -> None:
    # A master retired too early (or a wrong secret): the call fails as unavailable, never unsigned.
    account, _ = mint_account(env.store, "orphan", master=7)
    caller = private_handler("caller", env)

    instance = env.store.register_instance(account.id, wake_host.url, account.id, now()).instance
    caller.lambda_handler(sqs_batch(env.new_wake(instance.id, now() - timedelta(seconds=1))), LambdaContext())

    assert wake_host.calls == []
    found = env.store.get_instance(instance.id)
    assert found is not None and found.attempts == 1


def test_the_secret_s_forms_read_back_as_written() -> None:
    plain = MasterKeys.parse("A" * 64)
    assert (plain.current, dict(plain.versions)) == (1, {1: "A" * 64})
    two = plain.adding("B" * 64)
    assert MasterKeys.parse(two.text()) == two and two.current == 2
    assert MasterKeys.parse(two.without(1).text()).versions == {2: "B" * 64}


def test_wakeup_admin_adds_lists_and_retires_master_versions(
    env: Deployed, endpoint: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL", endpoint)
    factories.reset()
    account, _ = mint_account(env.store, "listed")

    def admin(*args: str) -> tuple[int, str, str]:
        table = ["--table", env.settings.table, "--master-key-secret", env.settings.master_key_secret]
        code = cli.main([*table, *args])
        out, err = capsys.readouterr()
        return code, out, err

    assert admin("master-key", "add")[0] == 0
    code, listed, _ = admin("master-key", "list")
    assert code == 0 and [line.split() for line in listed.splitlines()[1:]] == [["1", "-", "1"], ["2", "current", "0"]]
    code, _, refused = admin("master-key", "retire", "1")
    assert code == 1 and "1 live account still signs with version 1" in refused
    assert admin("accounts", "rotate-signing-secret", account.id, "--overlap", "0")[0] == 0
    assert admin("master-key", "retire", "1")[:2] == (0, "master key version 1 retired\n")
    # Nothing it printed holds a master key.
    masters = master_keys.read(env.clients.secretsmanager, env.settings.master_key_secret).versions.values()
    assert not any(key in listed for key in masters)
