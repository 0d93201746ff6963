"""moto's server in a process of its own, on loopback.

A process rather than a thread of the local stack's: moto answers every AWS call of the handlers,
and in the same process it would share one interpreter lock with them: with many wakes due at
once, the last ones would be called later (docs/benchmark.md, "The local stack"). Its state is its own too, so nothing
else in the stack's process (a test's own moto, say) can see or reset it.

Each moto is forked from a fork server, one per stack's process, started with its first moto: the
fork server has imported moto's server (moto_child.py), most of a new moto's start, and the
suite starts dozens of motos from its workers. A process lent a fork server (shared_fork_servers.py,
the tests' stacks) uses a copy of it instead. A forked moto starts with the modules
imported and none of moto's state made, as a new process would. The fork server is one thread, so
forking it is safe, and it ends when the stack's process closes its socket or dies.

A moto answers its port on a socket of its own once it serves, and stops when that socket closes:
when the stack stops, or when the stack's process dies in whatever way.
"""

from __future__ import annotations

import atexit
import os
import select
import signal
import socket
import subprocess
import sys
import threading

from wakeup_local.child_process import wait_or_kill
from wakeup_local.shared_fork_servers import LentProcess, borrow

LOOPBACK = "127.0.0.1"
START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 10.0
STDERR_FD = 2
COPY = b"copy"  # the request for a copy of the fork server


class MotoProcessError(RuntimeError):
    """Raised when moto's process does not start."""


class MotoProcess:
    """`mapping_update_s`: how long an event source mapping stays `Updating` after an update (moto_fixes)."""

    def __init__(self, mapping_update_s: float = 0.0) -> None:
        self._control: socket.socket | None = None
        self._ended = -1
        self.pid = 0
        self.port = 0
        self.mapping_update_s = mapping_update_s

    @property
    def endpoint_url(self) -> str:
        return f"http://{LOOPBACK}:{self.port}"

    def start(self) -> None:
        self._control, child_end = socket.socketpair()
        try:
            self.pid = _fork_server().fork(child_end, self.mapping_update_s)
        finally:
            child_end.close()
        # Not this process's child, so not one it can wait for: a pidfd says when it has ended.
        self._ended = os.pidfd_open(self.pid)
        self._control.settimeout(START_TIMEOUT_S)
        try:
            with self._control.makefile("rb") as answers:
                answer = answers.readline()
        except TimeoutError:
            self.stop()
            raise MotoProcessError(f"moto's server did not start within {START_TIMEOUT_S:.0f} s") from None
        if not answer.startswith(b"port="):
            self.stop()
            raise MotoProcessError("moto's server exited at start; see the log above")
        self.port = int(answer.removeprefix(b"port="))

    def stop(self) -> None:
        """Closes moto's socket, its signal to stop, and returns once its process has ended (killed
        past `STOP_TIMEOUT_S`)."""
        control, self._control = self._control, None
        ended, self._ended = self._ended, -1
        if control is not None:
            control.close()
        if ended < 0:
            return
        try:
            if not select.select([ended], [], [], STOP_TIMEOUT_S)[0]:
                signal.pidfd_send_signal(ended, signal.SIGKILL)
                select.select([ended], [], [])
        finally:
            os.close(ended)


class _ForkServer:
    """`python -m wakeup_local.aws.moto_child`: asked over a socket, forks a moto and answers its
    pid. This process's own, or a copy of the one lent to it (shared_fork_servers.py)."""

    def __init__(self, requests: socket.socket, process: subprocess.Popen[bytes] | LentProcess) -> None:
        self._socket = requests
        self._process = process
        self._lock = threading.Lock()
        self._answers = self._socket.makefile("rb")
        atexit.register(self.stop)

    @classmethod
    def start(cls) -> _ForkServer:
        requests, server_end = socket.socketpair()
        # moto needs no AWS settings of the shell's (a profile that does not exist here would fail it).
        environment = {key: value for key, value in os.environ.items() if not key.startswith("AWS_")}
        # Its socket is its stdin. Its stdout is the stack's stderr, as its stderr is: whatever moto
        # says lands in the stack's log, never in a stdout that a parent reads commands' answers from.
        process = subprocess.Popen(
            [sys.executable, "-m", "wakeup_local.aws.moto_child"],
            stdin=server_end.fileno(),
            stdout=STDERR_FD,
            env=environment,
            start_new_session=True,
        )
        server_end.close()
        return cls(requests, process)

    def fork(self, control: socket.socket, mapping_update_s: float) -> int:
        return self._ask(repr(mapping_update_s).encode(), [control.fileno()])

    def copy(self, stderr_fd: int) -> tuple[socket.socket, int]:
        """A copy of this fork server, serving the socket returned, writing to `stderr_fd`."""
        requests, copy_end = socket.socketpair()
        try:
            return requests, self._ask(COPY, [copy_end.fileno(), stderr_fd])
        except BaseException:
            requests.close()
            raise
        finally:
            copy_end.close()

    def _ask(self, request: bytes, fds: list[int]) -> int:
        with self._lock:
            socket.send_fds(self._socket, [request], fds)
            answer = self._answers.readline()
        if not answer.startswith(b"pid="):
            raise MotoProcessError(f"moto's fork server exited (exit code {self._process.poll()}); see the log above")
        return int(answer.removeprefix(b"pid="))

    @property
    def running(self) -> bool:
        return self._process.poll() is None

    def stop(self) -> None:
        """Closes its socket, which ends it (the motos it forked end with their own sockets)."""
        self._answers.close()
        self._socket.close()
        wait_or_kill(self._process, STOP_TIMEOUT_S)


_server: _ForkServer | None = None
_server_lock = threading.Lock()


def _fork_server() -> _ForkServer:
    """This process's fork server: a copy of the one lent to it, or else its own."""
    global _server
    with _server_lock:
        if _server is None or not _server.running:
            borrowed = borrow({"kind": "moto"})
            _server = _ForkServer(*borrowed) if borrowed is not None else _ForkServer.start()
        return _server


def copy_fork_server(stderr_fd: int) -> tuple[socket.socket, int]:
    """A copy of this process's fork server, for a stack's process it lends it to."""
    return _fork_server().copy(stderr_fd)
