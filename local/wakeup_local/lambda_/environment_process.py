"""An execution environment's process: `python -m awslambdaric <handler>` in the function's folder,
with exactly the environment's variables, its output into the environment's pipe, in a session of
its own.

Most are forked from a fork server (environment_forker.py) that has imported the packages the
functions' layer brings: importing boto3, pydantic and Powertools is most of a cold start's CPU,
and the suite starts hundreds of environments, a burst tens (docs/benchmark.md, "The local stack").
The function's own init (its handler's module, its settings, its clients) still runs in each
environment, as Lambda runs it: the fork server imports none of it. What a cold start here does not
repeat is the import of those packages, so a local Init Duration is shorter than a new process's
(bench/cold_start.py measures new ones).

An environment is started as a new process instead when its folders hold a module that the fork
server imported (a layer built with its own boto3, say: the function must import that one).
There is one fork server per value of the variables its imports read (`STARTUP_VARIABLES`), and it
is started with those only, so that what it imported is what a new process would have. A process
lent fork servers (shared_fork_servers.py, the tests' stacks) uses a copy of the lender's for the
same variables instead.
"""

from __future__ import annotations

import atexit
import json
import os
import select
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path
from typing import Protocol

from wakeup_local.child_process import wait_or_kill
from wakeup_local.shared_fork_servers import LentProcess, borrow

FORKER = Path(__file__).with_name("environment_forker.py")
# Lambda's runtime interface client, which the Python runtime runs (pinned in pyproject.toml).
RUNTIME_CLIENT = "awslambdaric"
STOP_TIMEOUT_S = 10.0
# What a fork server's imports depend on, so what it is started with and keyed by:
# - what the interpreter reads as it starts: the PYTHON variables (but PYTHONPATH, which each
#   environment sets) and sysconfig's _PYTHON ones, the locale's, and TZ (read as `time` is imported);
# - what the dynamic linker, the C library and OpenSSL read as the process starts or as `ssl` is
#   imported (LD_LIBRARY_PATH, which Lambda sets for layers' libraries; MALLOC_ARENA_MAX ...);
# - what the preloaded packages read as they are imported: HOME (the user's site folder), Powertools'
#   debug switches and its idea of the runtime, pydantic's plugins
#   (tests/local/test_local_environment_process.py measures them).
STARTUP_VARIABLES = frozenset(
    {
        "HOME",
        "LANG",
        "TZ",
        "AWS_EXECUTION_ENV",
        "AWS_LAMBDA_INITIALIZATION_TYPE",
        "POWERTOOLS_DEBUG",
        "POWERTOOLS_DEV",
        "POWERTOOLS_TRACE_MIDDLEWARES",
        "PYDANTIC_DISABLE_PLUGINS",
    }
)
STARTUP_PREFIXES = ("PYTHON", "_PYTHON", "LC_", "LD_", "MALLOC_", "GLIBC_", "OPENSSL_", "SSL_")


class RuntimeProcess(Protocol):
    """What an environment needs of its process: `subprocess.Popen`'s, or a forked one's."""

    @property
    def pid(self) -> int: ...

    def poll(self) -> int | None: ...

    def wait(self, timeout: float | None = None) -> int: ...

    def kill(self) -> None: ...


def startup_variables(variables: dict[str, str]) -> tuple[tuple[str, str], ...]:
    """The environment's variables that its fork server must have been started with."""
    return tuple(
        sorted(
            (name, value)
            for name, value in variables.items()
            if name in STARTUP_VARIABLES or (name.startswith(STARTUP_PREFIXES) and name != "PYTHONPATH")
        )
    )


def start_runtime(handler: str, folder: Path, variables: dict[str, str], output_fd: int) -> RuntimeProcess:
    """The environment's process, forked where a fork server can (see above), else a new one."""
    server = _fork_server(startup_variables(variables))
    forked = server.fork(handler, folder, variables, output_fd) if server is not None else None
    if forked is not None:
        return forked
    return new_process(handler, folder, variables, output_fd)


def new_process(handler: str, folder: Path, variables: dict[str, str], output_fd: int) -> subprocess.Popen[bytes]:
    """`python -m awslambdaric <handler>`, a new process, as Lambda's Python runtime starts it."""
    return subprocess.Popen(
        [sys.executable, "-m", RUNTIME_CLIENT, handler],
        cwd=folder,
        env=variables,
        stdin=subprocess.DEVNULL,
        stdout=output_fd,
        stderr=output_fd,
        start_new_session=True,
    )


class ForkedProcess:
    """A process the fork server forked: not this process's child, so a pidfd (opened by the fork
    server as it forked) signals it, and the fork server says how it ended on a socket that a
    thread of this reads (`wait`, `poll`)."""

    def __init__(self, pid: int, pidfd: int, watcher: socket.socket) -> None:
        self.pid = pid
        self.returncode: int | None = None
        self._pidfd = pidfd
        self._lock = threading.Lock()
        self._ended = threading.Event()
        threading.Thread(target=self._watch, args=(watcher,), name="environment-exit", daemon=True).start()

    def poll(self) -> int | None:
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if not self._ended.wait(timeout):
            raise subprocess.TimeoutExpired(f"environment {self.pid}", timeout or 0.0)
        assert self.returncode is not None
        return self.returncode

    def kill(self) -> None:
        with self._lock:
            if self._pidfd >= 0:
                try:
                    signal.pidfd_send_signal(self._pidfd, signal.SIGKILL)
                except ProcessLookupError:
                    pass

    def _watch(self, watcher: socket.socket) -> None:
        with watcher, watcher.makefile("rb") as lines:
            line = lines.readline()
        if line.startswith(b"exit="):
            code = int(line.removeprefix(b"exit="))
        else:
            # Its fork server ended first (killed), and nothing reaps the process now to tell how it
            # ended: once it has, it counts as killed.
            ended = select.poll()
            ended.register(self._pidfd, select.POLLIN)
            ended.poll()
            code = -signal.SIGKILL
        with self._lock:
            os.close(self._pidfd)
            self._pidfd = -1
            self.returncode = code
        self._ended.set()


class _ForkServer:
    """`python environment_forker.py`, started with `startup` as its only variables: this process's
    own, or a copy of the one lent to it (shared_fork_servers.py)."""

    def __init__(self, requests: socket.socket, process: subprocess.Popen[bytes] | LentProcess) -> None:
        self._socket = requests
        self._process = process
        self._lock = threading.Lock()
        self.forked = 0
        atexit.register(self.stop)

    @classmethod
    def start(cls, startup: tuple[tuple[str, str], ...]) -> _ForkServer:
        requests, server_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        # Its socket is its stdin. Its stderr is the stack's, as moto's is; its stdout no terminal,
        # so that its environments' stdout is block-buffered, as a new process's into a pipe.
        process = subprocess.Popen(
            [sys.executable, str(FORKER), *(name for name, _ in startup)],
            stdin=server_end.fileno(),
            stdout=subprocess.DEVNULL,
            env=dict(startup),
            cwd="/",
            start_new_session=True,
        )
        server_end.close()
        return cls(requests, process)

    @property
    def running(self) -> bool:
        return self._process.poll() is None

    def fork(self, handler: str, folder: Path, variables: dict[str, str], output_fd: int) -> ForkedProcess | None:
        """The forked environment, or None when the fork server refused it (its folders shadow what
        the fork server imported) or has ended."""
        request = json.dumps({"handler": handler, "folder": str(folder), "variables": variables}).encode()
        watcher, watcher_end = socket.socketpair()
        try:
            forked = self._ask(request, [output_fd, watcher_end.fileno()])
        finally:
            watcher_end.close()
        if forked is None:
            watcher.close()
            return None
        self.forked += 1
        return ForkedProcess(*forked, watcher)

    def copy(self, stderr_fd: int) -> tuple[socket.socket, int] | None:
        """A copy of this fork server, serving the socket returned, writing to `stderr_fd`; None
        when this one has ended."""
        requests, copy_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            copied = self._ask(json.dumps({"copy": True}).encode(), [copy_end.fileno(), stderr_fd])
        finally:
            copy_end.close()
        if copied is None:
            requests.close()
            return None
        os.close(copied[1])  # its end is for this fork server to see; the borrower watches it itself
        return requests, copied[0]

    def _ask(self, request: bytes, fds: list[int]) -> tuple[int, int] | None:
        """The pid and a pidfd of what the fork server forked, or None."""
        with self._lock:
            try:
                socket.send_fds(self._socket, [request], fds)
                answer, pidfds, _, _ = socket.recv_fds(self._socket, 256, 1)
            except OSError:
                answer, pidfds = b"", []
        if not answer.startswith(b"pid=") or len(pidfds) != 1:
            for fd in pidfds:
                os.close(fd)
            return None
        return int(answer.removeprefix(b"pid=")), pidfds[0]

    def stop(self) -> None:
        """Closes its socket, which ends it (the environments it forked end when the stack's Runtime
        APIs do)."""
        self._socket.close()
        wait_or_kill(self._process, STOP_TIMEOUT_S)


_servers: dict[tuple[tuple[str, str], ...], _ForkServer | None] = {}
_servers_lock = threading.Lock()


def _fork_server(startup: tuple[tuple[str, str], ...]) -> _ForkServer | None:
    """The fork server for these variables (a copy of the one lent to this process, or else its
    own), started again if it ended after it had forked (killed), or None if it ended without
    forking any (it cannot start here: new processes instead)."""
    with _servers_lock:
        if startup in _servers and _servers[startup] is None:
            return None
        server = _servers.get(startup)
        if server is not None and not server.running:
            server.stop()
            if not server.forked:
                _servers[startup] = None
                return None
            server = None
        if server is None:
            borrowed = borrow({"kind": "environments", "startup": startup})
            server = _servers[startup] = _ForkServer(*borrowed) if borrowed is not None else _ForkServer.start(startup)
        return server


def copy_fork_server(startup: tuple[tuple[str, str], ...], stderr_fd: int) -> tuple[socket.socket, int] | None:
    """A copy of this process's fork server for these variables, for a stack's process it lends it
    to; None where no fork server can start."""
    server = _fork_server(startup)
    return server.copy(stderr_fd) if server is not None else None
