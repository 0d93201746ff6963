"""Stopping a child process: one that serves until its stdin closes (a test's stack), or any told to stop."""

import subprocess
from typing import Protocol


class Waitable(Protocol):
    """What stopping needs of a process: `subprocess.Popen`'s `wait` and `kill`, or a lent one's."""

    def wait(self, timeout: float | None = None) -> int: ...

    def kill(self) -> None: ...


def stop_child(process: subprocess.Popen[str], timeout_s: float) -> None:
    """Closes the child's stdin, its signal to stop, and waits for it; kills it past `timeout_s`."""
    if process.stdin is not None:
        try:
            process.stdin.close()
        except BrokenPipeError:
            pass  # it had exited already
    wait_or_kill(process, timeout_s)
    if process.stdout is not None:
        process.stdout.close()


def wait_or_kill(process: Waitable, timeout_s: float) -> None:
    """Waits for a child told to stop; kills it past `timeout_s`."""
    try:
        process.wait(timeout_s)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
