"""Issue 38: no signing secret (`whsec_...`) nor the master key is ever in output, end to end.

One account lives through what an operator and its hosts do on the local stack: minted, its
signing secret rotated, its token rotated; instances registered, woken, called (one answering,
one failing), listed, read with their history, refused on bad input. Then everything that came
out is scanned: every line the stack's functions printed (logs, errors, EMF metrics), every HTTP
reply, every history item, and everything `wakeup-admin` printed, save the one line where it
shows a secret by design (mint's and rotate-signing-secret's stdout).
"""

from __future__ import annotations

import base64
import secrets
import time
from collections.abc import Iterator

import boto3
import pytest
import requests
from wakes_support import Instances, iso

from support.admin import account_id, admin
from support.api import Api
from support.host import Answer, WakeHost
from support.stack_process import StackProcess
from support.waiting import wait_until
from wakeup.signing import MasterKeys


class Output:
    """Everything that came out, and the secrets none of it may hold."""

    def __init__(self) -> None:
        self.texts: list[str] = []
        self.secrets: list[str] = []

    def reply(self, response: requests.Response) -> requests.Response:
        self.texts.append(response.text)
        return response

    def admin(self, stack: StackProcess, *args: str, shows_a_secret: bool = False) -> str:
        done = admin(stack, *args)
        assert done.returncode == 0, done.stderr
        self.texts.append(done.stderr)
        if shows_a_secret:
            shown = [line for line in done.stdout.splitlines() if line.startswith("whsec_")]
            assert len(shown) == 1
            self.secrets.extend(shown)
            self.texts.append("\n".join(line for line in done.stdout.splitlines() if line not in shown))
        else:
            self.texts.append(done.stdout)
        return done.stdout

    def forbidden(self) -> list[str]:
        """Each secret, its key's base64 and the key's hex, as text to look for."""
        found = []
        for secret in self.secrets:
            found.append(secret)
            if secret.startswith("whsec_"):
                key = base64.b64decode(secret.removeprefix("whsec_"))
                found += [secret.removeprefix("whsec_"), key.hex()]
        return found


@pytest.fixture
def output() -> Output:
    return Output()


@pytest.fixture
def failing_host() -> Iterator[WakeHost]:
    host = WakeHost()
    host.default = Answer(status=503)
    yield host
    host.close()


def master_keys(stack: StackProcess) -> list[str]:
    client = boto3.client("secretsmanager", endpoint_url=stack.endpoint_url, region_name=stack.region)
    text = client.get_secret_value(SecretId=stack.master_key_secret)["SecretString"]
    return [text, *MasterKeys.parse(text).versions.values()]


def test_no_signing_secret_nor_the_master_key_is_in_any_output(
    stack: StackProcess, host: WakeHost, failing_host: WakeHost, output: Output
) -> None:
    log_start = len(stack.log_text())
    label = f"secrets-{secrets.token_hex(4)}"
    output.secrets += master_keys(stack)
    # the operator mints the account, rotates its signing secret and its token
    token = output.admin(stack, "accounts", "mint", "--label", label, shows_a_secret=True).splitlines()[0]
    account = account_id(stack, label)
    output.admin(stack, "accounts", "rotate-signing-secret", account, "--overlap", "1h", shows_a_secret=True)
    token = output.admin(stack, "accounts", "rotate-token", account, "--overlap", "1h").strip()
    assert len(output.secrets) >= 3  # the master, the first secret and the rotated one
    # its platform registers two instances, one of a host that fails, and wakes both now
    api = Api(stack.url, token)
    instances = Instances(api)
    answering, answering_token = instances.new(host.url)
    failing, failing_token = instances.new(failing_host.url)
    for instance_token in (answering_token, failing_token):
        output.reply(api.wake(instance_token, iso(time.time())))
    instances.wait_for(answering, lambda body: body["calledAt"] is not None, "called")
    instances.wait_for(failing, lambda body: body["attempts"] >= 1, "failed once")
    # and reads what it can, bad input and a wrong token among it
    for instance_id in (answering, failing):
        output.reply(api.instance(instance_id))
        # The caller records the outcome first, and the history item after it.
        path = f"/wakeup/instances/{instance_id}/attempts"
        history = wait_until(
            lambda path=path: (reply := api.get(path)).json()["attempts"] and reply,
            timeout=20,
            message="a call in the history",
        )
        output.reply(history)
    output.reply(api.get("/wakeup/instances"))
    output.reply(api.post("/wakeup/instances", data=b"{not json"))
    output.reply(api.with_token("swa_" + "x" * 43).get("/wakeup/instances"))
    output.reply(api.wake(answering_token, "not a time"))
    # and the operator looks at it all
    for args in (["accounts", "list"], ["instances", "list", "--account", account], ["wakes", "failing"]):
        output.admin(stack, *args)
    for instance_id in (answering, failing):
        output.admin(stack, "instances", "show", instance_id)
    output.admin(stack, "master-key", "list")
    instances.remove_all()
    api.close()

    logged = stack.log_text()[log_start:]
    assert '"message":"wake called"' in logged and '"message":"wake call failed"' in logged
    assert "CloudWatchMetrics" in logged  # the metrics were printed with the logs
    everything = "\n".join([logged, *output.texts])
    assert "whsec_" not in everything
    for secret in output.forbidden():
        assert secret not in everything
