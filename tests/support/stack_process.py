"""The local stack in a child process, for the tests.

A process of its own because a stack's handlers keep state per process (cached settings and
clients, `os.environ`, moto's in-memory backends): the session's stack, stacks with other settings,
and functional tests with their own moto and environment must not see each other. The object offers
what `LocalStack` offers a test: `url`, `account_token`, `endpoint_url`, `region`, `table_name`,
`mint_account(label)`, `run_sweeper()`, `env_lines()`, and `master_key_secret` and
`signing_secret(token)` for signed wakes; and its processes: `pid`, `moto_pid` and
`environment_pids(logical_id)`.

The stack's process borrows this process's fork servers of motos and environments
(wakeup_local.shared_fork_servers): each stack gets copies of its own, forked from this process's
and ended with the stack, rather than fork servers it starts and whose imports it waits for.
"""

from __future__ import annotations

import json
import os
import queue
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import IO, Any

from wakeup_local.aws import moto_process
from wakeup_local.child_process import stop_child
from wakeup_local.lambda_ import environment_process
from wakeup_local.shared_fork_servers import lend_to

CHILD = Path(__file__).with_name("stack_child.py")
START_TIMEOUT_S = 60.0
COMMAND_TIMEOUT_S = 120.0
STOP_TIMEOUT_S = 30.0

# The session stack's settings: calls time out and leases end in seconds, schedules fire on time,
# and an environment stays warm five minutes unused, as Lambda's stay for minutes (the local stack's
# default is one: a process of 60 MB each on a person's machine). A worker's tests reach its session
# stack in bursts minutes apart; each environment started again costs a cold start's CPU, which the
# tests beside it wait for.
STACK_SETTINGS = {
    "WAKEUP_CALL_TIMEOUT_S": "2",
    "WAKEUP_CLAIM_LEASE_S": "7",
    "WAKEUP_LOCAL_EXACT_SCHEDULES": "1",
    "WAKEUP_LOCAL_IDLE_S": "300",
}


class StackProcessError(RuntimeError):
    """Raised when the child stack fails to start or to carry out a command."""


class StackProcess:
    def __init__(
        self,
        template: Path,
        env: Mapping[str, str],
        log_path: Path,
        *,
        port: int = 0,
        cwd: Path | None = None,
    ) -> None:
        self.template = template
        self.env = dict(env)
        self.log_path = log_path
        self.port = port
        self.cwd = cwd or template.parent
        self._process: subprocess.Popen[str] | None = None
        self._log: IO[str] | None = None
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._lock = threading.Lock()
        self._info: dict[str, Any] = {}

    # --- what a test uses --------------------------------------------------------------------------

    @property
    def url(self) -> str:
        return str(self._info["url"])

    @property
    def account_token(self) -> str:
        return str(self._info["account_token"])

    @property
    def endpoint_url(self) -> str:
        return str(self._info["endpoint_url"])

    @property
    def region(self) -> str:
        return str(self._info["region"])

    @property
    def table_name(self) -> str:
        return str(self._info["table_name"])

    @property
    def pid(self) -> int:
        return int(self._info["pid"])

    @property
    def moto_pid(self) -> int:
        return int(self._info["moto_pid"])

    def environment_pids(self, logical_id: str) -> list[int]:
        """The live execution environments of the function with this logical id."""
        return [int(pid) for pid in self._command({"op": "environments", "function": logical_id})]

    def env_lines(self) -> list[str]:
        return list(self._info["env_lines"])

    @property
    def master_key_secret(self) -> str:
        return str(self._info["master_key_secret"])

    def mint_account(self, label: str) -> str:
        return str(self._command({"op": "mint", "label": label}))

    def signing_secret(self, account_token: str) -> str:
        """The `whsec_` secret that signs the wakes of the account with this token, now."""
        return str(self._command({"op": "signing_secret", "token": account_token}))

    def run_sweeper(self) -> list[Any]:
        """Runs the stack's scheduled functions (the sweeper and the planner) now, in the stack, and
        returns their results."""
        return list(self._command({"op": "sweep"}))

    def log_text(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace") if self.log_path.exists() else ""

    # --- starting and stopping ---------------------------------------------------------------------

    def start(self) -> StackProcess:
        env = {key: value for key, value in os.environ.items() if not key.startswith("WAKEUP_")}
        env.update(self.env)
        env["PYTHONUNBUFFERED"] = "1"
        lent, lending = lend_to(copy_fork_server)
        env.update(lending)
        self._log = self.log_path.open("w", encoding="utf-8")
        try:
            self._process = subprocess.Popen(
                [sys.executable, str(CHILD), "--template", str(self.template), "--port", str(self.port)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=self._log,
                env=env,
                cwd=self.cwd,
                text=True,
                encoding="utf-8",
                pass_fds=(lent,),
            )
        finally:
            os.close(lent)
        threading.Thread(target=self._read_replies, args=(self._process.stdout,), daemon=True).start()
        try:
            self._info = self._reply(START_TIMEOUT_S, "start")
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Closes the child's stdin (it stops its stack and exits), then waits for it."""
        process, self._process = self._process, None
        if process is not None:
            stop_child(process, STOP_TIMEOUT_S)
        if self._log is not None:
            self._log.close()
            self._log = None

    def _read_replies(self, stdout: IO[str] | None) -> None:
        assert stdout is not None
        for line in stdout:
            self._lines.put(line)
        self._lines.put(None)

    def _reply(self, timeout: float, what: str) -> Any:
        try:
            line = self._lines.get(timeout=timeout)
        except queue.Empty:
            raise StackProcessError(f"the local stack did not {what} within {timeout} s; see {self.log_path}") from None
        if line is None:
            raise StackProcessError(f"the local stack exited during {what}; its log:\n{self.log_text()[-5000:]}")
        reply = json.loads(line)
        if "error" in reply:
            raise StackProcessError(f"the local stack failed to {what}:\n{reply['error']}")
        return reply

    def _command(self, command: dict[str, Any]) -> Any:
        with self._lock:
            if self._process is None or self._process.stdin is None:
                raise StackProcessError("the local stack is not running")
            self._process.stdin.write(json.dumps(command) + "\n")
            self._process.stdin.flush()
            return self._reply(COMMAND_TIMEOUT_S, command["op"])["value"]


def copy_fork_server(request: dict[str, Any], stderr_fd: int) -> tuple[socket.socket, int] | None:
    """A copy of this process's fork server that a stack's process asks for (moto's, or the
    environments' for the variables their imports read), writing to the stack's stderr."""
    if request["kind"] == "moto":
        return moto_process.copy_fork_server(stderr_fd)
    if request["kind"] == "environments":
        startup = tuple((str(name), str(value)) for name, value in request["startup"])
        return environment_process.copy_fork_server(startup, stderr_fd)
    return None


# The `make_stack` fixture: starts a stack with the session stack's settings updated by its keywords.
MakeStack = Callable[..., StackProcess]
