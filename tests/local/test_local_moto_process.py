"""moto's processes: forked from one fork server per stack's process, each with its own state, and
none outliving what started it."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import uuid
from pathlib import Path

import boto3
import pytest
from moto import backend_index

from support.waiting import wait_until
from wakeup_local.aws import moto_child
from wakeup_local.aws.moto_process import MotoProcess


def _parent(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[1])


def _alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie, ended but not yet reaped, does not)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] != "Z"
    except OSError:
        return False


def _tables(moto: MotoProcess) -> list[str]:
    client = boto3.client("dynamodb", endpoint_url=moto.endpoint_url, region_name="us-east-1")
    return list(client.list_tables()["TableNames"])


def _groups(moto: MotoProcess) -> list[str]:
    client = boto3.client("scheduler", endpoint_url=moto.endpoint_url, region_name="us-east-1")
    return [group["Name"] for group in client.list_schedule_groups()["ScheduleGroups"]]


def test_motos_are_forked_from_one_server_that_imported_moto_and_each_has_its_own_state() -> None:
    first, second = MotoProcess(), MotoProcess()
    first.start()
    second.start()
    try:
        # then both are children of one fork server, itself this process's child
        fork_server = _parent(first.pid)
        assert _parent(second.pid) == fork_server
        assert _parent(fork_server) == os.getpid()
        assert b"wakeup_local.aws.moto_child" in Path(f"/proc/{fork_server}/cmdline").read_bytes()
        # and what one is told the other does not know
        name = f"t-{uuid.uuid4().hex[:8]}"
        boto3.client("dynamodb", endpoint_url=first.endpoint_url, region_name="us-east-1").create_table(
            TableName=name,
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )
        assert (name in _tables(first), name in _tables(second)) == (True, False)
        # as a service whose app the fork server made before it forked them (moto_child.SERVICES)
        boto3.client("scheduler", endpoint_url=first.endpoint_url, region_name="us-east-1").create_schedule_group(
            Name=name
        )
        assert (name in _groups(first), name in _groups(second)) == (True, False)
    finally:
        first.stop()
        second.stop()


def test_stopping_a_moto_ends_its_process_and_frees_its_port() -> None:
    moto = MotoProcess()
    moto.start()
    pid, port = moto.pid, moto.port
    moto.stop()
    assert not _alive(pid)
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=5).close()


STARTER = """
import sys
from wakeup_local.aws.moto_process import MotoProcess
moto = MotoProcess()
moto.start()
print(moto.pid, flush=True)
sys.stdin.read()
"""


def test_a_moto_and_its_fork_server_end_when_the_process_that_started_them_is_killed() -> None:
    # given a process that started a moto, and is then killed
    with subprocess.Popen(
        [sys.executable, "-c", STARTER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    ) as starter:
        assert starter.stdout is not None
        moto = int(starter.stdout.readline())
        fork_server = _parent(moto)
        starter.send_signal(signal.SIGKILL)
    # then neither it started is left
    wait_until(lambda: not _alive(moto) and not _alive(fork_server), timeout=30, message="moto ending")


def test_the_services_whose_apps_the_fork_server_makes_are_named_as_motos_server_asks_for_them() -> None:
    # moto's server asks for a service's app by its backend's name ("awslambda", not "lambda"): an
    # app made under another name would never be used
    assert set(moto_child.SERVICES) <= {name for name, _ in backend_index.backend_url_patterns}


def test_the_fork_server_makes_every_services_app_and_reads_its_model_without_a_warning() -> None:
    # a name moto does not know, or a moto that changed, would be logged (and each moto left to
    # make them on its first request again)
    result = subprocess.run(
        [sys.executable, "-c", "from wakeup_local.aws import moto_child; moto_child.prepare_apps()"],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert "moto changed" not in result.stderr, result.stderr


# A moto serving on a socket pair, in a process of its own; then how many objects the collector's
# passes leave out (`gc.freeze`'s) and how many it still tracks.
_FROZEN_PROBE = """
import gc, socket, threading
from wakeup_local.aws import moto_child
control, ours = socket.socketpair()
threading.Thread(target=moto_child.serve, args=(control, 0.0), daemon=True).start()
assert ours.recv(64).startswith(b"port=")
print(gc.get_freeze_count(), len(gc.get_objects()), gc.get_threshold()[2])
"""


def test_a_moto_keeps_what_it_made_before_serving_out_of_the_collectors_passes_and_makes_fewer_full_ones() -> None:
    # given a moto that started serving (moto's modules, apps and backends made)
    result = subprocess.run(
        [sys.executable, "-c", _FROZEN_PROBE], capture_output=True, text=True, timeout=120, check=True
    )
    frozen, tracked, full_every = (int(count) for count in result.stdout.split())
    # then a full pass walks only what was made since, not those (some 70,000 objects here; the fork
    # server's, with every service's app made, some 200,000)
    assert frozen > 50_000
    assert tracked < frozen / 10
    # and full passes, over what came since (the tables' items), are made a tenth as often
    assert full_every == moto_child.FULL_COLLECTION_EVERY == 100
