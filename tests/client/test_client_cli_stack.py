"""A ``wakeup`` CLI session on the local stack, as a person would type it: register a real host with
a minted token, ask for a wake in 2 s, see the host called and ``show`` say so, then delete."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

from support.api import Api
from support.waiting import wait_until

# The console script installed beside this interpreter, so its entry point is what runs.
WAKEUP = shutil.which("wakeup-client", path=str(Path(sys.executable).parent))


def run(env: dict[str, str], *argv: str) -> subprocess.CompletedProcess[str]:
    command = [WAKEUP] if WAKEUP else [sys.executable, "-m", "wakeup_client.cli"]
    return subprocess.run([*command, *argv], env=env, capture_output=True, text=True, timeout=60, check=False)


def test_a_cli_session_registers_wakes_shows_and_deletes(stack: Any, host: Any) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("WAKEUP_")}
    env |= {"WAKEUP_URL": stack.url, "WAKEUP_ACCOUNT_TOKEN": stack.mint_account(f"cli-{uuid.uuid4().hex[:8]}")}

    registered = run(env, "instances", "register", host.url, "--mint", "--json")
    assert registered.returncode == 0, registered.stderr
    found = json.loads(registered.stdout)
    assert found["created"] is True
    env["WAKEUP_TOKEN"] = found["token"]

    # (far enough ahead that a cold start on a loaded machine does not bring the time past: the
    # service stores a time already past as now, and the `at` shown would not be the one asked)
    woken = run(env, "wake", "--in", "10s", "--json")
    assert woken.returncode == 0, woken.stderr
    at = json.loads(woken.stdout)["at"]

    assert len(host.wait_for_calls(1, timeout=30)) >= 1
    # The service records the call once the host has answered: awaited through the API (a run of
    # the CLI a poll would cost a process each), then shown once.
    api = Api(stack.url, env["WAKEUP_ACCOUNT_TOKEN"])
    wait_until(lambda: api.instance(found["id"]).json()["calledAt"] is not None, timeout=15, interval=0.1)
    api.close()
    shown = run(env, "instances", "show", found["id"], "--json")
    assert shown.returncode == 0, shown.stderr
    instance = json.loads(shown.stdout)
    assert instance["at"] == at
    assert instance["calledAt"] is not None and instance["calledAt"] >= at
    assert (instance["attempts"], instance["lastError"]) == (0, None)
    for_a_person = run(env, "instances", "show", found["id"])
    assert f"called at {instance['calledAt']}" in for_a_person.stdout

    deleted = run(env, "instances", "delete", found["id"])
    assert deleted.returncode == 0 and "deleted" in deleted.stdout
    gone = run(env, "instances", "show", found["id"])
    assert gone.returncode == 1
    assert gone.stderr.startswith("wakeup-client: error: ") and gone.stderr.count("\n") == 1
