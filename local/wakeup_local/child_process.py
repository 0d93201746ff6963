"""Stopping a child process that serves until its stdin closes (a test's stack)."""

import subprocess


def stop_child(process: subprocess.Popen[str], timeout_s: float) -> None:
    """Closes the child's stdin, its signal to stop, and waits for it; kills it past `timeout_s`."""
    if process.stdin is not None:
        try:
            process.stdin.close()
        except BrokenPipeError:
            pass  # it had exited already
    try:
        process.wait(timeout_s)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
    if process.stdout is not None:
        process.stdout.close()
