"""`wakeup-admin` against the local stack, as an operator runs it: its entry function in this process
(`support.admin`), and the installed script where a process of its own matters (its pipes, its
credentials)."""

import json
import os
import subprocess
import uuid
from datetime import timedelta
from typing import Any

import requests

from support.admin import ADMIN, admin, admin_env, admin_process, run_admin
from support.admin import account_id as id_of_account
from support.host import WakeHost
from support.waiting import wait_until
from wakeup.times import now, parse_stored
from wakeup.tokens import TokenKind, mint


def test_mint_prints_a_working_token_then_its_signing_secret_and_list_shows_the_account(stack: Any) -> None:
    minted = admin(stack, "accounts", "mint", "--label", "acme-platform")
    assert minted.returncode == 0, minted.stderr
    token, secret = minted.stdout.splitlines()
    assert token.startswith("swa_") and secret.startswith("whsec_")
    assert stack.signing_secret(token) == secret
    reply = requests.get(f"{stack.url}/wakeup/instances", headers={"Authorization": f"Bearer {token}"}, timeout=10)
    assert reply.status_code == 200
    listed = admin(stack, "accounts", "list")
    assert listed.returncode == 0 and "acme-platform" in listed.stdout
    assert token not in listed.stdout and secret not in listed.stdout


def test_mint_without_the_master_key_secret_is_refused_before_minting(stack: Any) -> None:
    env = {**os.environ, "AWS_ENDPOINT_URL": stack.endpoint_url, "AWS_DEFAULT_REGION": stack.region}
    env.pop("WAKEUP_MASTER_KEY_SECRET", None)
    result = run_admin(env, "--table", stack.table_name, "accounts", "mint", "--label", "no-master")
    assert result.returncode == 2 and "WAKEUP_MASTER_KEY_SECRET" in result.stderr
    assert "no-master" not in admin(stack, "accounts", "list").stdout


def test_rotating_the_signing_secret_prints_a_new_one_once(stack: Any) -> None:
    # given
    token, old = admin(stack, "accounts", "mint", "--label", "rotating").stdout.splitlines()
    # when
    rotated = admin(stack, "accounts", "rotate-signing-secret", id_of_account(stack, "rotating"), "--overlap", "2h")
    # then
    assert rotated.returncode == 0, rotated.stderr
    new = rotated.stdout.splitlines()[0]
    assert new.startswith("whsec_") and new != old
    assert stack.signing_secret(token) == new
    assert "signs beside it until" in rotated.stderr


def _status(stack: Any, token: str) -> int:
    reply = requests.get(f"{stack.url}/wakeup/instances", headers={"Authorization": f"Bearer {token}"}, timeout=10)
    return reply.status_code


def test_rotating_the_token_prints_a_new_one_and_the_old_one_works_for_the_overlap(stack: Any) -> None:
    # given
    label = f"token-rotating-{uuid.uuid4().hex[:8]}"
    old = admin(stack, "accounts", "mint", "--label", label).stdout.splitlines()[0]
    # when
    rotated = admin(stack, "accounts", "rotate-token", id_of_account(stack, label), "--overlap", "2h")
    # then
    assert rotated.returncode == 0, rotated.stderr
    [new] = rotated.stdout.splitlines()
    assert new.startswith("swa_") and new != old
    assert "works beside it until" in rotated.stderr and new not in rotated.stderr
    assert _status(stack, new) == 200 and _status(stack, old) == 200


def test_rotating_the_token_with_no_overlap_refuses_the_old_one_at_once(stack: Any) -> None:
    label = f"token-now-{uuid.uuid4().hex[:8]}"
    old = admin(stack, "accounts", "mint", "--label", label).stdout.splitlines()[0]

    rotated = admin(stack, "accounts", "rotate-token", id_of_account(stack, label), "--overlap", "0")

    assert rotated.returncode == 0, rotated.stderr
    assert _status(stack, rotated.stdout.strip()) == 200 and _status(stack, old) == 401


def test_rotating_an_unknown_or_revoked_account_fails_clearly(stack: Any) -> None:
    unknown = admin(stack, "accounts", "rotate-signing-secret", "0b7e1f0e-6f43-4c5e-9d55-3b1f6d3c2a10")
    assert unknown.returncode == 1 and "no live account" in unknown.stderr
    admin(stack, "accounts", "mint", "--label", "rotate-revoked")
    revoked_id = id_of_account(stack, "rotate-revoked")
    assert admin(stack, "accounts", "revoke", revoked_id).returncode == 0
    refused = admin(stack, "accounts", "rotate-signing-secret", revoked_id)
    assert refused.returncode == 1 and "no live account" in refused.stderr


def account_row(stack: Any, label: str) -> list[str]:
    """The columns of `accounts list` for the one account labelled `label`: id, label, created, revoked
    (then its count of instances, its limit and its rate)."""
    [row] = [line.split() for line in admin(stack, "accounts", "list").stdout.splitlines() if label in line.split()]
    assert len(row) == 7
    return row[:4]


def test_a_revoked_accounts_token_and_its_instances_tokens_are_401(stack: Any) -> None:
    # given an account with an instance that registered a wake
    label = f"to-revoke-{uuid.uuid4().hex[:8]}"
    token = admin(stack, "accounts", "mint", "--label", label).stdout.splitlines()[0]
    auth = {"Authorization": f"Bearer {token}"}
    instance_token = mint(TokenKind.INSTANCE)
    posted = requests.post(
        f"{stack.url}/wakeup/instances",
        json={"url": "http://h.test", "token": instance_token},
        headers=auth,
        timeout=10,
    )
    instance_id = posted.json()["id"]
    account_id, _, _, not_yet_revoked = account_row(stack, label)
    assert not_yet_revoked == "-"
    # when the operator revokes it
    before = now()
    revoked = admin(stack, "accounts", "revoke", account_id)
    assert revoked.returncode == 0, revoked.stderr
    # then both kinds of token are refused
    assert requests.get(f"{stack.url}/wakeup/instances", headers=auth, timeout=10).status_code == 401
    wake = requests.put(
        f"{stack.url}/wakeup/wake",
        json={"at": "2099-01-01T00:00:00Z"},
        headers={"Authorization": f"Bearer {instance_token}"},
        timeout=10,
    )
    assert wake.status_code == 401
    # and the operator still sees the instance, and the account marked with the time it was revoked
    assert instance_id in admin(stack, "instances", "list", "--account", account_id).stdout
    listed_id, _, _, revoked_at = account_row(stack, label)
    assert listed_id == account_id
    assert before - timedelta(seconds=1) <= parse_stored(revoked_at) <= now()


def test_instances_show_prints_the_instance(stack: Any) -> None:
    token = admin(stack, "accounts", "mint", "--label", "show").stdout.splitlines()[0]
    posted = requests.post(
        f"{stack.url}/wakeup/instances",
        json={"url": "http://shown.test", "token": mint(TokenKind.INSTANCE)},
        headers={"Authorization": f"Bearer {token}"},
        timeout=10,
    )
    shown = admin(stack, "instances", "show", posted.json()["id"])
    assert shown.returncode == 0 and "http://shown.test" in shown.stdout


def test_instances_show_prints_the_instances_calls_newest_first(stack: Any, host: WakeHost) -> None:
    # given an instance whose host failed once, then answered
    host.script(503)
    token = admin(stack, "accounts", "mint", "--label", "show-history").stdout.splitlines()[0]
    auth = {"Authorization": f"Bearer {token}"}
    instance_token = mint(TokenKind.INSTANCE)
    posted = requests.post(
        f"{stack.url}/wakeup/instances", json={"url": host.url, "token": instance_token}, headers=auth, timeout=10
    )
    instance_id = posted.json()["id"]
    woken = requests.put(
        f"{stack.url}/wakeup/wake",
        json={"at": "2020-01-01T00:00:00Z"},
        headers={"Authorization": f"Bearer {instance_token}"},
        timeout=10,
    )
    assert woken.status_code == 204

    def called() -> bool:
        reply = requests.get(f"{stack.url}/wakeup/instances/{instance_id}", headers=auth, timeout=10)
        return reply.json()["calledAt"] is not None

    wait_until(called, timeout=20, message="the wake called")
    # when the operator shows it
    shown = admin(stack, "instances", "show", instance_id)
    # then its history is there, newest first
    assert shown.returncode == 0, shown.stderr
    history = json.loads(shown.stdout)["history"]
    assert [(call["attempt"], call["status"], call["error"]) for call in history] == [
        (2, 200, None),
        (1, 503, "HTTP 503"),
    ]


def test_a_missing_table_is_a_usage_error(stack: Any) -> None:
    env = {k: v for k, v in os.environ.items() if k != "WAKEUP_TABLE"}
    result = run_admin(env, "accounts", "list")
    assert result.returncode == 2 and "WAKEUP_TABLE" in result.stderr


def test_a_reader_that_goes_away_ends_the_listing_without_a_traceback(stack: Any) -> None:
    admin(stack, "accounts", "mint", "--label", f"piped-{uuid.uuid4().hex[:8]}")
    env = admin_env(stack)
    # given a reader that closes the pipe before the listing is written (`... | head -0`)
    with subprocess.Popen(
        [ADMIN, "accounts", "list"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    ) as lister:
        assert lister.stdout is not None and lister.stderr is not None
        lister.stdout.close()
        errors = lister.stderr.read().decode()
        code = lister.wait(timeout=60)
    # then it stops with an error status, and says nothing
    assert (code, errors) == (1, "")


def test_revoking_an_unknown_account_fails_clearly(stack: Any) -> None:
    result = admin(stack, "accounts", "revoke", "0b7e1f0e-6f43-4c5e-9d55-3b1f6d3c2a10")
    assert result.returncode == 1 and "no account" in result.stderr


def test_the_local_stack_needs_no_aws_credentials(stack: Any) -> None:
    # given only the lines make run prints, and no AWS credentials anywhere
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(
        AWS_ENDPOINT_URL=stack.endpoint_url,
        AWS_DEFAULT_REGION=stack.region,
        WAKEUP_TABLE=stack.table_name,
        AWS_SHARED_CREDENTIALS_FILE="/nonexistent",
        AWS_CONFIG_FILE="/nonexistent",
    )
    # when the operator lists the accounts (the installed script: credentials are looked for afresh)
    result = admin_process(env, "accounts", "list")
    # then the local stack answers
    assert result.returncode == 0, result.stderr
    assert "ID" in result.stdout.splitlines()[0]


def test_revoking_an_account_again_says_it_was_revoked_already(stack: Any) -> None:
    admin(stack, "accounts", "mint", "--label", "revoked-twice")
    account_id = id_of_account(stack, "revoked-twice")
    first = admin(stack, "accounts", "revoke", account_id)
    assert first.returncode == 0 and first.stdout.startswith("revoked account")

    again = admin(stack, "accounts", "revoke", account_id)

    assert again.returncode == 0, again.stderr
    assert f"account {account_id} (revoked-twice) was revoked already, at " in again.stdout


def test_a_limit_below_what_an_account_holds_says_it_keeps_them(stack: Any) -> None:
    token = admin(stack, "accounts", "mint", "--label", "over-limit").stdout.splitlines()[0]
    for _ in range(2):
        posted = requests.post(
            f"{stack.url}/wakeup/instances",
            json={"url": "http://h.test", "token": mint(TokenKind.INSTANCE)},
            headers={"Authorization": f"Bearer {token}"},
            timeout=10,
        )
        assert posted.status_code == 201, posted.text

    limited = admin(stack, "accounts", "limit", id_of_account(stack, "over-limit"), "--max-instances", "1")

    assert limited.returncode == 0, limited.stderr
    assert "may hold 1 instance; it holds 2, more: it keeps them, and registers no new one" in limited.stdout


def test_minting_an_account_with_an_empty_label_is_a_usage_error(stack: Any) -> None:
    result = admin(stack, "accounts", "mint", "--label", " ")

    assert (result.returncode, result.stdout) == (2, "")
    assert "--label must say whose account it is" in result.stderr


def test_listing_the_instances_of_an_unknown_account_fails_clearly(stack: Any) -> None:
    for unknown in ("0b7e1f0e-6f43-4c5e-9d55-3b1f6d3c2a10", "not-an-id"):
        result = admin(stack, "instances", "list", "--account", unknown)
        assert (result.returncode, result.stdout) == (1, "")
        assert f"no account {unknown}" in result.stderr


def test_the_operator_sets_an_accounts_rate_and_drops_it_again(stack: Any) -> None:
    label = f"paced-{uuid.uuid4().hex[:8]}"
    admin(stack, "accounts", "mint", "--label", label)
    account = id_of_account(stack, label)

    paced = admin(stack, "accounts", "rate", account, "--per-second", "7")
    listed = [line for line in admin(stack, "accounts", "list").stdout.splitlines() if f"  {label}  " in line]
    dropped = admin(stack, "accounts", "rate", account, "--default")

    assert paced.returncode == 0, paced.stderr
    assert "may send 7 requests a second on the account routes, counted over 10 s windows" in paced.stdout
    assert listed[0].split()[-1] == "7/s"
    assert dropped.returncode == 0, dropped.stderr
    assert "the service's default rate (WAKEUP_ACCOUNT_REQUESTS_PER_S)" in dropped.stdout


def test_a_rate_out_of_range_or_for_no_account_is_refused(stack: Any) -> None:
    for rate in ("0", "501", "ten"):
        result = admin(stack, "accounts", "rate", "0b7e1f0e-6f43-4c5e-9d55-3b1f6d3c2a10", "--per-second", rate)
        assert (result.returncode, result.stdout) == (2, "")
        assert "a whole number from 1 to 500" in result.stderr
    missing = admin(stack, "accounts", "rate", "0b7e1f0e-6f43-4c5e-9d55-3b1f6d3c2a10", "--per-second", "5")
    assert (missing.returncode, missing.stdout) == (1, "")
    assert "no account 0b7e1f0e-6f43-4c5e-9d55-3b1f6d3c2a10" in missing.stderr
