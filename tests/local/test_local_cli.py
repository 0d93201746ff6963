"""`wakeup-local` as `make run` starts it: seven lines on stdout, serving, a clean stop on a signal."""

import os
import queue
import re
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import boto3
import pytest
import requests
from localstack_helpers import ROOT

from bench.processes import command, family
from support.stack_process import copy_fork_server
from wakeup_local.shared_fork_servers import lend_to

WAKEUP_LOCAL = Path(sys.executable).with_name("wakeup-local")
START_TIMEOUT_S = 60


def environment() -> dict[str, str]:
    """This process's environment without any wakeup setting (a developer's shell may hold some)."""
    return {key: value for key, value in os.environ.items() if not key.startswith("WAKEUP_")}


def lines_of(stream: IO[str]) -> "queue.Queue[str | None]":
    """The stream's lines as they come (None at its end), read by a thread so a test can wait with a deadline."""
    lines: queue.Queue[str | None] = queue.Queue()

    def read() -> None:
        for line in stream:
            lines.put(line)
        lines.put(None)

    threading.Thread(target=read, daemon=True).start()
    return lines


def descendants_of(pid: int) -> dict[int, str]:
    """The processes below `pid` (its fork servers' too), with their command lines."""
    return {descendant: command(descendant) for descendant in family(pid)[1:]}


@pytest.fixture
def wakeup_local(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[str], "queue.Queue[str | None]", Path]]:
    stderr_path = tmp_path / "stderr.log"
    with stderr_path.open("w") as stderr:
        process = subprocess.Popen(
            [str(WAKEUP_LOCAL), "--port", "0"],
            cwd=ROOT,
            env=environment(),
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
            start_new_session=True,  # a process group of its own, as a terminal gives `make run`
        )
        assert process.stdout is not None
        try:
            yield process, lines_of(process.stdout), stderr_path
        finally:
            if process.poll() is None:
                process.kill()
            process.wait()
            process.stdout.close()


@pytest.mark.parametrize(
    ("stop_signal", "to_group"),
    [
        (signal.SIGTERM, False),  # `kill`
        (signal.SIGINT, True),  # Ctrl-C, to every process of the group
        (signal.SIGTERM, True),  # a supervisor (systemd, `timeout`) stopping the whole group
    ],
)
def test_it_prints_seven_lines_serves_and_stops_cleanly_on_a_signal(
    wakeup_local: tuple[subprocess.Popen[str], "queue.Queue[str | None]", Path],
    stop_signal: signal.Signals,
    to_group: bool,
) -> None:
    process, lines, stderr_path = wakeup_local
    printed = []
    for _ in range(7):
        line = lines.get(timeout=START_TIMEOUT_S)
        assert line is not None, f"wakeup-local ended early:\n{stderr_path.read_text()}"
        printed.append(line.rstrip("\n"))
    names = [line.partition("=")[0] for line in printed]
    assert names == [
        "WAKEUP_URL",
        "WAKEUP_ACCOUNT_TOKEN",
        "AWS_ENDPOINT_URL",
        "AWS_DEFAULT_REGION",
        "WAKEUP_TABLE",
        "WAKEUP_MASTER_KEY_SECRET",
        "WAKEUP_SIGNING_SECRET",
    ]
    values = dict(line.partition("=")[::2] for line in printed)
    assert re.fullmatch(r"http://127\.0\.0\.1:\d+", values["WAKEUP_URL"])
    assert re.fullmatch(r"swa_[A-Za-z0-9_-]{43}", values["WAKEUP_ACCOUNT_TOKEN"])
    assert re.fullmatch(r"http://127\.0\.0\.1:\d+", values["AWS_ENDPOINT_URL"])
    assert values["AWS_DEFAULT_REGION"] == "us-east-1"
    assert values["WAKEUP_MASTER_KEY_SECRET"].startswith("arn:aws:secretsmanager:us-east-1:")
    assert re.fullmatch(r"whsec_[A-Za-z0-9+/]{43}=", values["WAKEUP_SIGNING_SECRET"])

    # the token works at once, and the table is where the lines say
    reply = requests.get(
        f"{values['WAKEUP_URL']}/wakeup/instances",
        headers={"Authorization": f"Bearer {values['WAKEUP_ACCOUNT_TOKEN']}"},
        timeout=10,
    )
    assert reply.status_code == 200, reply.text
    dynamodb = boto3.client("dynamodb", endpoint_url=values["AWS_ENDPOINT_URL"], region_name="us-east-1")
    assert dynamodb.describe_table(TableName=values["WAKEUP_TABLE"])["Table"]["TableStatus"] == "ACTIVE"

    # its processes: moto, and the execution environment that served the request
    children = descendants_of(process.pid)
    assert any("awslambdaric" in command for command in children.values()), children
    if to_group:
        os.killpg(process.pid, stop_signal)
    else:
        process.send_signal(stop_signal)
    assert process.wait(timeout=20) == 0
    # and none of them outlives it
    assert not [pid for pid in children if Path(f"/proc/{pid}").exists()]
    # Nothing but the seven lines ever reached stdout: the handlers' logs went to stderr.
    assert lines.get(timeout=5) is None
    log = stderr_path.read_text()
    assert "GET /wakeup/instances -> 200" in log
    assert "Traceback" not in log
    # Lambda's own lines about its invocation are left out, as template.yaml's SystemLogLevel (WARN)
    # has them left out (test_local_environments.py has them where a function's LoggingConfig logs them).
    assert "wakeup-local-InstancesFunction-" in log
    assert not [
        line
        for line in log.splitlines()
        if line.startswith(("[InstancesFunction] START ", "[InstancesFunction] REPORT "))
    ]


def test_a_port_in_use_is_refused_with_a_hint(tmp_path: Path) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = subprocess.run(
            [str(WAKEUP_LOCAL), "--port", str(port)],
            cwd=ROOT,
            env=environment(),
            capture_output=True,
            text=True,
            timeout=START_TIMEOUT_S,
        )
    assert result.returncode != 0
    assert result.stdout == ""
    assert f"cannot start on port {port}" in result.stderr and "--port" in result.stderr


def test_a_missing_template_is_refused_clearly(tmp_path: Path) -> None:
    result = subprocess.run(
        [str(WAKEUP_LOCAL), "--port", "0", "--template", str(tmp_path / "none.yaml")],
        env=environment(),
        capture_output=True,
        text=True,
        timeout=START_TIMEOUT_S,
    )
    assert result.returncode == 2
    assert "cannot read the template" in result.stderr


@pytest.mark.parametrize(
    ("settings", "reason"),
    [
        # The default lead (90 s) is not below this horizon: every request would answer 500.
        ({"WAKEUP_SQS_HORIZON_S": "90"}, "WAKEUP_SCHEDULE_LEAD_S (90) must be less than WAKEUP_SQS_HORIZON_S (90)"),
        ({"WAKEUP_SQS_HORIZON_S": "901"}, "WAKEUP_SQS_HORIZON_S='901': Input should be less than or equal to 900"),
        ({"WAKEUP_CALL_TIMEOUT_S": "ten"}, "WAKEUP_CALL_TIMEOUT_S='ten': Input should be a valid number"),
    ],
)
def test_a_setting_the_functions_would_refuse_stops_it_at_start_with_the_reason(
    settings: dict[str, str], reason: str
) -> None:
    # (Its moto is started before the settings are read: it is forked from a copy of this process's
    # fork server, as the tests' stacks' are, rather than from one of its own.)
    lent, lending = lend_to(copy_fork_server)
    try:
        result = subprocess.run(
            [str(WAKEUP_LOCAL), "--port", "0"],
            cwd=ROOT,
            env={**environment(), **settings, **lending},
            capture_output=True,
            text=True,
            timeout=START_TIMEOUT_S,
            pass_fds=(lent,),
        )
    finally:
        os.close(lent)
    assert result.returncode == 2
    assert result.stdout == ""  # never the lines of a stack that serves
    assert f"cannot start: invalid settings: {reason}" in result.stderr
    assert "Traceback" not in result.stderr
