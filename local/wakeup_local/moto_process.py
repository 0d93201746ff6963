"""moto's server in a process of its own, on loopback.

A process rather than a thread of the local stack's: moto answers every AWS call of the handlers,
and in the same process it would share one interpreter lock with them. With a hundred wakes due at
once, moving moto out halves how late the last one is called. Its state is its own too, so nothing
else in the stack's process (a test's own moto, say) can see or reset it.

The child prints its port on stdout once it serves, and stops when its stdin closes: when the stack
stops, or when the stack's process dies in whatever way.
"""

from __future__ import annotations

import argparse
import logging
import os
import select
import subprocess
import sys
import time

from wakeup_local.child_process import stop_child

LOOPBACK = "127.0.0.1"
START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 10.0


class MotoProcessError(RuntimeError):
    """Raised when moto's process does not start."""


class MotoProcess:
    """`mapping_update_s`: how long an event source mapping stays `Updating` after an update (moto_fixes)."""

    def __init__(self, mapping_update_s: float = 0.0) -> None:
        self._process: subprocess.Popen[str] | None = None
        self.port = 0
        self.mapping_update_s = mapping_update_s

    @property
    def endpoint_url(self) -> str:
        return f"http://{LOOPBACK}:{self.port}"

    def start(self) -> None:
        # moto needs no AWS settings of the shell's (a profile that does not exist here would fail it).
        environment = {key: value for key, value in os.environ.items() if not key.startswith("AWS_")}
        # stderr is the stack's own: whatever moto has to say lands in the stack's log. A session of
        # its own keeps the signals sent to the stack's whole group (Ctrl-C, a supervisor's SIGTERM)
        # from stopping moto while the stack's handlers and pollers are still using it.
        self._process = subprocess.Popen(
            [sys.executable, "-m", "wakeup_local.moto_process", "--mapping-update-s", str(self.mapping_update_s)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=environment,
            text=True,
            start_new_session=True,
        )
        assert self._process.stdout is not None
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            ready, _, _ = select.select([self._process.stdout], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                self.stop()
                raise MotoProcessError(f"moto's server did not start within {START_TIMEOUT_S:.0f} s")
            line = self._process.stdout.readline()
            if not line:
                code = self._process.wait()
                self.stop()
                raise MotoProcessError(f"moto's server exited at start (exit code {code}); see the log above")
            if line.startswith("port="):
                self.port = int(line.removeprefix("port="))
                return

    def stop(self) -> None:
        process, self._process = self._process, None
        if process is not None:
            stop_child(process, STOP_TIMEOUT_S)


def main() -> int:
    """The child: serves moto until its stdin closes."""
    parser = argparse.ArgumentParser(prog="python -m wakeup_local.moto_process")
    parser.add_argument("--mapping-update-s", type=float, default=0.0)
    args = parser.parse_args()
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING)

    from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app

    from wakeup_local import moto_fixes
    from wakeup_local.loopback_wsgi import LoopbackWsgiServer
    from wakeup_local.moto_shortcut import MotoShortcut
    from wakeup_local.request_counter import RequestCounter

    moto_fixes.apply(mapping_update_s=args.mapping_update_s)
    # moto's ThreadedMotoServer's application, with the functions' requests counted on the way
    # (request_counter.py) and DynamoDB's and SQS's past Flask (moto_shortcut.py), behind a lighter
    # server than werkzeug's (loopback_wsgi.py).
    app = RequestCounter(MotoShortcut(DomainDispatcherApplication(create_backend_app)))
    server = LoopbackWsgiServer(LOOPBACK, 0, app)
    server.serve_in_thread("moto")
    port = server.port
    sys.stdout.write(f"port={port}\n")
    sys.stdout.flush()
    sys.stdin.read()  # until the parent closes it
    return 0


if __name__ == "__main__":
    sys.exit(main())
