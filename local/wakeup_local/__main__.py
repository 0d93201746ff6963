"""`wakeup-local`: runs the local stack until Ctrl-C or SIGTERM.

Prints exactly seven `NAME=value` lines on stdout (the service's URL, a first account's token and
signing secret, and what `wakeup-admin` and boto3 need to reach the local AWS), then closes stdout:
from then on everything, the handlers' own logs included, goes to stderr.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
from types import FrameType

from wakeup.settings import SettingsError
from wakeup_awsfacts.template import TemplateError
from wakeup_local.stack import LocalStack

log = logging.getLogger("wakeup_local")


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="wakeup-local",
        description="Run the wakeup service on this machine: moto, the template's handlers, an HTTP API.",
    )
    parser.add_argument("--port", type=int, default=3000, help="the HTTP API's port on 127.0.0.1 (0: any free port)")
    parser.add_argument("--template", default="template.yaml", help="the SAM template to run (default: %(default)s)")
    parser.add_argument("--log-level", default="INFO", help="the local stack's log level (default: %(default)s)")
    return parser.parse_args(argv)


def _stdout_to_stderr() -> None:
    """Sends whatever is written to stdout from now on (handlers log there) to stderr instead."""
    sys.stdout.flush()
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())


def main(argv: list[str] | None = None) -> int:
    args = _parse_args(argv)
    logging.basicConfig(
        stream=sys.stderr, level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    stopping = threading.Event()

    def request_stop(signum: int, frame: FrameType | None) -> None:
        stopping.set()

    signal.signal(signal.SIGTERM, request_stop)
    signal.signal(signal.SIGINT, request_stop)

    stack = LocalStack(args.template, port=args.port)
    try:
        stack.start()
    except (TemplateError, SettingsError) as exc:
        log.error("cannot start: %s", exc)
        return 2
    except OSError as exc:
        log.error(
            "cannot start on port %d: %s (choose another with --port, or make run PORT=...)",
            args.port,
            exc.strerror or exc,
        )
        return 1
    try:
        sys.stdout.write("".join(f"{line}\n" for line in stack.env_lines()))
        _stdout_to_stderr()
        while not stopping.wait(3600):
            pass
        log.info("stopping")
    finally:
        stack.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
