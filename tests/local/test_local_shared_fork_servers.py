"""Fork servers lent to a stack's process (wakeup_local.shared_fork_servers, as support.stack_process
lends a test worker's): the stack's motos and environments are forked from copies of the lender's
fork servers, which write to the stack's stderr, and nothing of them outlives the stack, nor the
lender."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.processes import children_by_parent, command
from support.stack_process import copy_fork_server
from support.waiting import wait_until
from wakeup_local.shared_fork_servers import lend_to

ROOT = Path(__file__).resolve().parents[2]

# A stack's process in little: a moto and an execution environment, then it waits for its stdin to close.
BORROWER = """
import io, sys
from pathlib import Path
from wakeup_local.aws.moto_process import MotoProcess
from wakeup_local.lambda_.environment import EnvironmentSettings, ExecutionEnvironment
from wakeup_local.lambda_.lambda_logs import FunctionLog
moto = MotoProcess()
moto.start()
environment = ExecutionEnvironment(
    EnvironmentSettings("Probe", "arn:aws:lambda:us-east-1:123456789012:function:probe", "probe.handler",
                        Path(sys.argv[1]), 128, 30.0, {"LANG": "en_US.UTF-8", "TZ": ":UTC"}),
    FunctionLog(io.StringIO()),
)
environment.start()
print(moto.pid, environment.pid, flush=True)
sys.stdin.read()
"""

# A test worker in little: lends its fork servers to a borrower, says the borrower's processes, waits.
LENDER = """
import os, subprocess, sys
sys.path[:0] = [sys.argv[3], sys.argv[3] + "/tests"]
from support.stack_process import copy_fork_server
from wakeup_local.shared_fork_servers import lend_to
lent, variables = lend_to(copy_fork_server)
borrower = subprocess.Popen([sys.executable, "-c", sys.argv[1], sys.argv[2]], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, env={**os.environ, **variables}, pass_fds=(lent,), text=True)
os.close(lent)
print(borrower.pid, borrower.stdout.readline().strip(), flush=True)
sys.stdin.read()
"""


def parent(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[1])


def alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie, ended but not yet reaped, does not)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] != "Z"
    except OSError:
        return False


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    (tmp_path / "probe.py").write_text("def handler(event, context):\n    return {}\n")
    return tmp_path


@pytest.fixture
def borrower(folder: Path, tmp_path: Path) -> Iterator[tuple[subprocess.Popen[str], int, int, Path]]:
    """A process lent this process's fork servers: it, its moto's pid, its environment's, its stderr."""
    stderr_path = tmp_path / "stderr.log"
    lent, variables = lend_to(copy_fork_server)
    with stderr_path.open("w") as stderr:
        process = subprocess.Popen(
            [sys.executable, "-c", BORROWER, str(folder)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
            env={**os.environ, **variables},
            pass_fds=(lent,),
            text=True,
        )
    os.close(lent)
    assert process.stdout is not None
    try:
        moto, environment = (int(pid) for pid in process.stdout.readline().split())
        yield process, moto, environment, stderr_path
    finally:
        if process.poll() is None:
            process.kill()
        process.wait()
        process.stdout.close()
        assert process.stdin is not None
        process.stdin.close()


def test_a_borrowers_moto_and_environment_are_forked_by_copies_of_the_lenders_fork_servers(
    borrower: tuple[subprocess.Popen[str], int, int, Path],
) -> None:
    process, moto, environment, stderr_path = borrower
    moto_copy, environment_copy = parent(moto), parent(environment)
    # each copy is forked by a fork server of this process, not started by the borrower
    for copy, program in ((moto_copy, "wakeup_local.aws.moto_child"), (environment_copy, "environment_forker.py")):
        assert program in command(copy)
        assert parent(parent(copy)) == os.getpid() and program in command(parent(copy))
    assert process.pid not in (moto_copy, environment_copy, parent(moto_copy), parent(environment_copy))
    assert not children_by_parent().get(process.pid)
    # and writes where the borrower's own fork servers would have: its stderr, the stack's log
    assert os.readlink(f"/proc/{moto_copy}/fd/2") == str(stderr_path)
    assert os.readlink(f"/proc/{environment_copy}/fd/2") == str(stderr_path)


def test_a_killed_borrower_takes_its_moto_environment_and_copies_down_and_the_lenders_servers_go_on(
    borrower: tuple[subprocess.Popen[str], int, int, Path],
) -> None:
    # given a borrower killed
    process, moto, environment, _ = borrower
    copies = [parent(moto), parent(environment)]
    servers = [parent(copy) for copy in copies]
    process.send_signal(signal.SIGKILL)
    # then its moto, its environment and the copies end (their sockets closed, its Runtime API gone)
    wait_until(
        lambda: not any(alive(pid) for pid in (moto, environment, *copies)), timeout=30, message="the borrowed ending"
    )
    # and the lender's fork servers serve on
    assert all(alive(server) for server in servers)


def test_nothing_lent_outlives_the_lender(folder: Path) -> None:
    # given a lender (a test worker) whose borrower (a stack's process) has a moto and an environment
    with subprocess.Popen(
        [sys.executable, "-c", LENDER, BORROWER, str(folder), str(ROOT)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    ) as lender:
        assert lender.stdout is not None
        borrower, moto, environment = (int(pid) for pid in lender.stdout.readline().split())
        copies = [parent(moto), parent(environment)]
        servers = [parent(copy) for copy in copies]
        assert [parent(server) for server in servers] == [lender.pid, lender.pid]
        assert "wakeup_local.aws.moto_child" in command(servers[0])
        assert "environment_forker.py" in command(servers[1])
        # when the lender is killed
        lender.send_signal(signal.SIGKILL)
    # then nothing it lent is left: its fork servers, their copies, the borrower's moto and environment
    # (the borrower, a stack's process, ends as its stdin closes)
    wait_until(
        lambda: not any(alive(pid) for pid in (borrower, moto, environment, *copies, *servers)),
        timeout=30,
        message="everything lent ending",
    )
