"""Runs one local stack in a process of its own, for the tests (see stack_process.py).

Started as `python stack_child.py --template T`, with the stack's settings in its environment. It
writes one JSON line on stdout once the stack runs (or fails to start), then answers JSON commands,
one per line on stdin: `{"op": "mint", "label": L}`, `{"op": "sweep"}`,
`{"op": "signing_secret", "token": T}` and `{"op": "environments", "function": LOGICAL_ID}` (their
pids). When stdin closes (the
test session ended, or died) or on SIGTERM it stops the stack and exits. Everything else it and the
handlers write goes to stderr.
"""

import argparse
import json
import logging
import os
import signal
import sys
import traceback
from types import FrameType
from typing import Any, TextIO

from wakeup_local.stack import LocalStack


def _stop_on_sigterm(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(0)


def _answer(control: TextIO, **reply: Any) -> None:
    control.write(json.dumps(reply) + "\n")
    control.flush()


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--template", required=True)
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    signal.signal(signal.SIGTERM, _stop_on_sigterm)
    # The replies keep the real stdout; handlers (Powertools logs, metrics) print to fd 1, now stderr.
    control = os.fdopen(os.dup(sys.stdout.fileno()), "w", encoding="utf-8")
    sys.stdout.flush()
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())

    stack = LocalStack(args.template, port=args.port)
    try:
        stack.start()
    except Exception:
        _answer(control, error=traceback.format_exc())
        return 1
    try:
        _answer(
            control,
            url=stack.url,
            account_token=stack.account_token,
            endpoint_url=stack.endpoint_url,
            region=stack.region,
            table_name=stack.table_name,
            master_key_secret=stack.master_key_secret,
            env_lines=stack.env_lines(),
            pid=os.getpid(),
            moto_pid=stack.moto_pid,
        )
        for line in sys.stdin:
            command = json.loads(line)
            try:
                if command["op"] == "mint":
                    _answer(control, value=stack.mint_account(command["label"]))
                elif command["op"] == "sweep":
                    _answer(control, value=stack.run_sweeper())
                elif command["op"] == "signing_secret":
                    _answer(control, value=stack.signing_secret(command["token"]))
                elif command["op"] == "environments":
                    _answer(control, value=stack.functions.by_logical_id(command["function"]).pool.pids())
                else:
                    _answer(control, error=f"unknown command {command['op']!r}")
            except Exception:
                # The test asked for it: the test gets the trace, and the stack goes on.
                _answer(control, error=traceback.format_exc())
    finally:
        stack.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
