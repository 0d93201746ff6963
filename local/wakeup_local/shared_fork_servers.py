"""Fork servers lent by the process that starts local stacks in processes of their own (the tests').

A stack's process starts fork servers of its own, one of motos (aws/moto_process.py) and one of
execution environments (lambda_/environment_process.py), and their imports are most of a stack's
start. A process that starts many stacks, each in a process of its own (a test worker), lends its
own instead: it passes each stack's process one end of a socket (`lend_to`), whose descriptor
`FORK_SERVERS_FD_ENV` names. On it the stack's process asks for a fork server (`borrow`): the
lender's forks a copy of itself, which serves that stack alone on a socket of its own, as the
stack's own fork server would (its motos, its environments, its log), and which ends when that
socket closes: when the stack stops, or its process dies. Without the variable (`wakeup-local`,
`make run`), or when the lender refuses, a stack starts fork servers of its own.
"""

from __future__ import annotations

import json
import logging
import os
import select
import signal
import socket
import subprocess
import threading
from collections.abc import Callable
from typing import Any

log = logging.getLogger(__name__)

FORK_SERVERS_FD_ENV = "WAKEUP_LOCAL_FORK_SERVERS_FD"
REQUEST_BYTES = 1 << 16
STDERR_FD = 2

# What a lender makes of a request (`{"kind": "moto"}` or `{"kind": "environments", "startup": ...}`)
# and the borrower's stderr: a socket to a copy of its fork server and the copy's pid, or None.
MakeCopy = Callable[[dict[str, Any], int], "tuple[socket.socket, int] | None"]


class LentProcess:
    """A fork server's copy: not this process's child, so a pidfd tells when it has ended and kills
    it; what `wait_or_kill` needs of a process."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        try:
            self._pidfd = os.pidfd_open(pid)
        except ProcessLookupError:
            self._pidfd = -1  # it has ended already

    def poll(self) -> int | None:
        if self._pidfd >= 0 and not select.select([self._pidfd], [], [], 0)[0]:
            return None
        return 0  # ended; how is its parent's to know

    def wait(self, timeout: float | None = None) -> int:
        if self._pidfd >= 0 and not select.select([self._pidfd], [], [], timeout)[0]:
            raise subprocess.TimeoutExpired(f"fork server {self.pid}", timeout or 0.0)
        self._close()
        return 0

    def kill(self) -> None:
        if self._pidfd >= 0:
            try:
                signal.pidfd_send_signal(self._pidfd, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def _close(self) -> None:
        if self._pidfd >= 0:
            os.close(self._pidfd)
            self._pidfd = -1


_lender: socket.socket | None = None
_lender_lock = threading.Lock()


def borrow(request: dict[str, Any]) -> tuple[socket.socket, LentProcess] | None:
    """A copy of the lender's fork server for `request`, writing to this process's stderr, or None
    when no fork server is lent to this process (or the lender refused, or has gone)."""
    global _lender
    with _lender_lock:
        if _lender is None:
            # Taken out of the environment, so that no process this one starts takes the number for
            # a descriptor of its own.
            named = os.environ.pop(FORK_SERVERS_FD_ENV, "")
            if not named.isdigit():
                return None
            try:
                lender = socket.socket(fileno=int(named))
            except OSError:
                return None  # no socket by that number
            if lender.family != socket.AF_UNIX or lender.type != socket.SOCK_SEQPACKET:
                lender.detach()
                return None
            _lender = lender
        try:
            socket.send_fds(_lender, [json.dumps(request).encode()], [STDERR_FD])
            answer, fds, _, _ = socket.recv_fds(_lender, 64, 1)
        except OSError:
            return None
    if not answer.startswith(b"pid=") or len(fds) != 1:
        for fd in fds:
            os.close(fd)
        return None
    return socket.socket(fileno=fds[0]), LentProcess(int(answer.removeprefix(b"pid=")))


def lend_to(make_copy: MakeCopy) -> tuple[int, dict[str, str]]:
    """A socket on which a stack's process borrows this process's fork servers (made by
    `make_copy`): the descriptor to pass the process (then closed here), and its variable. A thread
    answers the process's requests until it closes its end."""
    lender, borrower = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    threading.Thread(target=_lend, args=(lender, make_copy), name="fork-server-lender", daemon=True).start()
    fd = borrower.detach()
    return fd, {FORK_SERVERS_FD_ENV: str(fd)}


def _lend(lender: socket.socket, make_copy: MakeCopy) -> None:
    with lender:
        while True:
            try:
                message, fds, _, _ = socket.recv_fds(lender, REQUEST_BYTES, 1)
            except OSError:
                return
            if not message:
                return  # the stack's process closed its end, or ended
            copy = None
            try:
                if len(fds) == 1:
                    copy = make_copy(json.loads(message), fds[0])
            except Exception:  # whatever failed, the stack's process starts a fork server of its own
                log.warning("no fork server lent for %s", message[:200], exc_info=True)
            finally:
                for fd in fds:
                    os.close(fd)
            try:
                if copy is None:
                    lender.sendall(b"refused")
                else:
                    with copy[0]:
                        socket.send_fds(lender, [f"pid={copy[1]}".encode()], [copy[0].fileno()])
            except OSError:
                return
