"""Issue 12 end to end: a host that verifies the service's signatures with the `standardwebhooks`
library (through `wakeup_client.verify_wake`, which a host calls in its `/wake` handler)."""

from __future__ import annotations

import base64
import secrets
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
import requests
import standardwebhooks.webhooks
from standardwebhooks.webhooks import Webhook
from wakes_support import Instances, iso

from support.admin import account_id, admin
from support.api import Api
from support.host import Answer, Call, WakeHost
from support.stack_process import StackProcess
from wakeup_client import WakeVerificationError, verify_wake

REFUSED = 401


class VerifyingHost:
    """Instances at `/<name>/wake` of one loopback host, each answering 200 to a wake verified for
    it with the host's current secret and 401 to anything else (the outcomes are recorded)."""

    def __init__(self, host: WakeHost, secret: str) -> None:
        self.host = host
        self.secret = secret
        self.instance_ids: dict[str, str] = {}  # path prefix -> instance id
        self.refusals: list[str] = []
        host.respond = self._answer

    def _answer(self, path: str, headers: dict[str, str]) -> Answer:
        instance_id = self.instance_ids.get(path.removesuffix("/wake"), "")
        try:
            verify_wake(headers, self.secret, instance_id)
        except WakeVerificationError as exc:
            self.refusals.append(str(exc))
            return Answer(status=REFUSED)
        return Answer(status=200)

    def replay(self, name: str, headers: dict[str, str]) -> int:
        """Sends `headers` (a recorded call's, maybe altered) to the instance `name`'s /wake."""
        wanted = {k: v for k, v in headers.items() if k.startswith("webhook-")}
        return requests.get(f"{self.host.url}/{name}/wake", headers=wanted, timeout=5).status_code


@pytest.fixture
def account(stack: StackProcess) -> tuple[Api, str]:
    """A fresh account's API client, and its label for wakeup-admin."""
    label = f"signed-{secrets.token_hex(4)}"
    token = stack.mint_account(label)
    return Api(stack.url, token), label


@pytest.fixture
def instances(account: tuple[Api, str]) -> Iterator[Instances]:
    made = Instances(account[0])
    yield made
    made.remove_all()
    account[0].close()


def woken(instances: Instances, verifying: VerifyingHost, name: str) -> tuple[str, Call]:
    """Registers the instance `name` at the host, wakes it now, and returns its id and the call
    it answered 2xx (the service records it as called)."""
    instance_id, token = instances.new(verifying.host.url_for(name))
    verifying.instance_ids[f"/{name}"] = instance_id
    instances.wake(token, iso(time.time()))
    instances.wait_for(instance_id, lambda body: body["calledAt"] is not None, f"{name} called")
    [call] = [c for c in verifying.host.calls_to(f"/{name}/wake") if c.answer.status == 200]
    return instance_id, call


def test_a_verifying_host_accepts_real_wakes_and_refuses_forged_altered_replayed_and_misdirected_ones(
    stack: StackProcess,
    account: tuple[Api, str],
    instances: Instances,
    host: WakeHost,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    verifying = VerifyingHost(host, stack.signing_secret(account[0].token or ""))
    # real wakes are accepted (calledAt set only on a 2xx)
    _, call_a = woken(instances, verifying, "a")
    _, call_b = woken(instances, verifying, "b")
    assert verifying.refusals == []
    assert verifying.replay("a", call_a.headers) == 200  # the same call again, within the tolerance

    # forged: signed with a secret that is not the account's
    forged_secret = "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode()
    now = datetime.now(UTC)
    forged = {
        **call_a.headers,
        "webhook-timestamp": str(int(now.timestamp())),
        "webhook-signature": Webhook(forged_secret).sign(call_a.headers["webhook-id"], now, ""),
    }
    assert verifying.replay("a", forged) == REFUSED
    # altered: a real call's timestamp moved, or its id naming another registration
    assert verifying.replay("a", {**call_a.headers, "webhook-timestamp": str(int(now.timestamp()) + 1)}) == REFUSED
    other_registration = call_a.headers["webhook-id"].rpartition("_")[0] + "_" + "0" * 32
    assert verifying.replay("a", {**call_a.headers, "webhook-id": other_registration}) == REFUSED
    # signed for another instance of the same account (the same secret)
    assert verifying.replay("a", call_b.headers) == REFUSED
    assert "another instance" in verifying.refusals[-1]

    # a replay once the library's tolerance (five minutes) has passed: its clock moved on
    class Later(datetime):
        @classmethod
        def now(cls, tz: object = None) -> Later:  # type: ignore[override]
            moved = datetime.now(UTC) + timedelta(minutes=6)
            return cls.fromtimestamp(moved.timestamp(), UTC)

    monkeypatch.setattr(standardwebhooks.webhooks, "datetime", Later)
    assert verifying.replay("a", call_a.headers) == REFUSED
    assert "too old" in verifying.refusals[-1]


def test_a_verifying_host_keeps_accepting_wakes_across_a_secret_rotation(
    stack: StackProcess, account: tuple[Api, str], instances: Instances, host: WakeHost
) -> None:
    api, label = account
    old_secret = stack.signing_secret(api.token or "")
    verifying = VerifyingHost(host, old_secret)
    woken(instances, verifying, "before")
    # when the operator rotates the secret, the hosts still holding the old one accept wakes
    rotated = admin(stack, "accounts", "rotate-signing-secret", account_id(stack, label), "--overlap", "1h")
    assert rotated.returncode == 0, rotated.stderr
    new_secret = rotated.stdout.strip()
    _, during = woken(instances, verifying, "during")
    # and so do the hosts that have moved to the new one
    verifying.secret = new_secret
    woken(instances, verifying, "moved")
    assert verifying.refusals == []
    assert verify_wake(during.headers, new_secret, verifying.instance_ids["/during"]).id == during.headers["webhook-id"]
    # once the overlap is over (a rotation with none left), only the newest secret verifies
    ended = admin(stack, "accounts", "rotate-signing-secret", account_id(stack, label), "--overlap", "0")
    newest = ended.stdout.strip()
    verifying.secret = newest
    _, after = woken(instances, verifying, "after")
    for stale in (old_secret, new_secret):
        with pytest.raises(WakeVerificationError):
            verify_wake(after.headers, stale, verifying.instance_ids["/after"])


def test_every_attempt_of_a_wake_carries_one_webhook_id_so_a_host_drops_a_repeat_by_it(
    stack: StackProcess, account: tuple[Api, str], instances: Instances, host: WakeHost
) -> None:
    # given a verifying host whose first answer to the wake fails, then succeeds
    verifying = VerifyingHost(host, stack.signing_secret(account[0].token or ""))
    instance_id, token = instances.new(host.url_for("retried"))
    verifying.instance_ids["/retried"] = instance_id
    host.script(503, path="/retried/wake")
    # when the wake is called, fails, and is called again after its backoff
    instances.wake(token, iso(time.time()))
    first, second = host.wait_for_calls(2, timeout=20, path="/retried/wake")
    # then both calls are one Standard Webhooks message: the same id, each signed and verified
    assert first.answer.status == 503 and second.answer.status == 200
    assert first.headers["webhook-id"] == second.headers["webhook-id"]
    served = verify_wake(second.headers, verifying.secret, instance_id)
    assert served.id == first.headers["webhook-id"] and served.instance_id == instance_id
    # and a host that remembers the id it served knows the same call again for a repeat
    repeat = verify_wake(second.headers, verifying.secret, instance_id)
    assert repeat.id == served.id
    # a new registration is a new message: a new id
    instances.wake(token, iso(time.time()))
    third = host.wait_for_calls(3, timeout=20, path="/retried/wake")[2]
    assert third.headers["webhook-id"] != served.id
    assert verify_wake(third.headers, verifying.secret, instance_id).registration != served.registration
