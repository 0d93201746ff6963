"""``wakeup-client``: the wakeup service from the command line, over the client library.

    wakeup-client instances register URL [--token T | --mint]
    wakeup-client instances show ID
    wakeup-client instances delete ID
    wakeup-client instances list
    wakeup-client instances attempts ID
    wakeup-client wake --at TIME | --in DURATION | --show [--token T]

The service's URL comes from ``--url`` or ``WAKEUP_URL``, the account's token from
``WAKEUP_ACCOUNT_TOKEN``, an instance's from ``--token`` or ``WAKEUP_TOKEN``. Output is for people
unless ``--json`` is given. Errors go to stderr on one line; the exit code is 0 on success, 1 when
the service or the network failed, 2 when the command itself is wrong.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import NoReturn

import requests

from .account import WakeupClient
from .errors import USAGE_CODES, ErrorCode, WakeupError
from .formats import format_time, parse_time
from .instance import InstanceClient
from .models import Attempt, Instance, OwnWake
from .tokens import mint_instance_token

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)([dhms])")
_UNIT_SECONDS = {"d": 86400, "h": 3600, "m": 60, "s": 1}


class _UsageError(Exception):
    """Raised when the command line is wrong (argparse's error, made to fit on one line)."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise _UsageError(f"{message} (see {self.prog} --help)")


def _duration(text: str) -> timedelta:
    """``90``, ``90s``, ``5m``, ``1h30m``, ``2d``: a delay; bare numbers are seconds."""
    try:
        return timedelta(seconds=float(text))
    except ValueError:
        pass
    parts = _DURATION_PART.findall(text)
    if not parts or "".join(number + unit for number, unit in parts) != text:
        raise argparse.ArgumentTypeError(f"{text!r} is not a duration such as 90, 90s, 5m, 1h30m or 2d")
    return timedelta(seconds=sum(float(number) * _UNIT_SECONDS[unit] for number, unit in parts))


def _time(text: str) -> datetime:
    try:
        return parse_time(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def _parser() -> _Parser:
    # The common options work before the command and after it: a leaf's default is SUPPRESS so it
    # does not overwrite a value given before the command.
    common = _Parser(add_help=False)
    common.add_argument("--url", default=argparse.SUPPRESS, help="the service's URL (default: $WAKEUP_URL)")
    common.add_argument(
        "--timeout", type=float, default=argparse.SUPPRESS, help="seconds one request may take (default 10)"
    )
    common.add_argument("--json", action="store_true", default=argparse.SUPPRESS, help="print JSON for scripts")

    parser = _Parser(
        prog="wakeup-client",
        description="Register hosts with a wakeup service and ask for wakes. The account's token "
        "comes from WAKEUP_ACCOUNT_TOKEN, an instance's from --token or WAKEUP_TOKEN.",
    )
    parser.add_argument("--url", help="the service's URL (default: $WAKEUP_URL)")
    parser.add_argument("--timeout", type=float, default=10.0, help="seconds one request may take (default 10)")
    parser.add_argument("--json", action="store_true", help="print JSON for scripts")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    instances = commands.add_parser("instances", help="an account's instances (WAKEUP_ACCOUNT_TOKEN)")
    actions = instances.add_subparsers(dest="action", required=True, metavar="ACTION")
    register = actions.add_parser("register", parents=[common], help="register a host by its URL")
    register.add_argument("host_url", metavar="URL", help="the host's URL; the service calls URL/wake")
    token = register.add_mutually_exclusive_group()
    token.add_argument("--token", help="the instance token to register (default: $WAKEUP_TOKEN)")
    token.add_argument("--mint", action="store_true", help="mint a new instance token and print it")
    for name, what in (("show", "show an instance"), ("delete", "delete an instance and its wake")):
        actions.add_parser(name, parents=[common], help=what).add_argument("id", metavar="ID")
    actions.add_parser("list", parents=[common], help="list the account's instances")
    actions.add_parser(
        "attempts", parents=[common], help="an instance's calls of the last 7 days, newest first"
    ).add_argument("id", metavar="ID")

    wake = commands.add_parser("wake", parents=[common], help="ask to be woken, or show the wake (the instance token)")
    when = wake.add_mutually_exclusive_group(required=True)
    when.add_argument("--at", type=_time, metavar="TIME", help="an ISO 8601 time with a zone")
    when.add_argument("--in", dest="delay", type=_duration, metavar="DURATION", help="90, 5m, 1h30m, 2d")
    when.add_argument("--show", action="store_true", help="show the wake registered, and how its calls went")
    wake.add_argument("--token", help="the instance's token (default: $WAKEUP_TOKEN)")
    return parser


def _state(instance: Instance | OwnWake) -> str:
    """A few words on where the instance's wake stands."""
    if instance.at is None:
        return "no wake registered"
    if instance.called_at is not None:
        return f"called at {format_time(instance.called_at)}"
    at = format_time(instance.at)
    if instance.attempts:
        return f"wake for {at} failing after {instance.attempts} attempts: {instance.last_error}"
    return f"wake pending for {at}"


def _shown(instance: Instance) -> str:
    at = "-" if instance.at is None else format_time(instance.at)
    rows = [
        ("id", instance.id),
        ("url", instance.url),
        ("wake at", at),
        ("state", _state(instance)),
        ("attempts", str(instance.attempts)),
        ("last error", instance.last_error or "-"),
    ]
    return "\n".join(f"{name:<11}{value}" for name, value in rows)


def _attempt_line(call: Attempt) -> str:
    """One call, for a person: when, which, how it went, how long, how late, what delivered it."""
    outcome = call.error or f"HTTP {call.status}"
    late = f", {call.lateness_ms} ms late" if call.lateness_ms is not None else ""
    return (
        f"{format_time(call.started_at)}  call {call.attempt} for {format_time(call.at)}  {outcome}"
        f"  ({call.duration_ms} ms{late}, {call.trigger})"
    )


def _run(args: argparse.Namespace, session: requests.Session | None) -> tuple[object, str]:
    """Run the command: what it found as JSON, and as text for a person."""
    if args.command == "wake":
        host = InstanceClient(args.url, args.token, timeout=args.timeout, session=session)
        if args.show:
            own = host.current_wake()
            return own.model_dump(mode="json", by_alias=True), _state(own)
        at = host.wake_at(args.at) if args.at is not None else host.wake_in(args.delay)
        return {"at": format_time(at)}, f"wake registered for {format_time(at)}"

    account = WakeupClient(args.url, timeout=args.timeout, session=session)
    if args.action == "register":
        token = mint_instance_token() if args.mint else args.token
        if token is None:
            token = _instance_token_from_env()
        registration = account.register(args.host_url, token)
        found: dict[str, object] = {"id": registration.id, "created": registration.created}
        text = f"instance {registration.id} " + (
            "registered" if registration.created else "was registered already; its URL is the one given"
        )
        if args.mint:
            found["token"] = token
            text += f"\nits instance token, for the host's WAKEUP_TOKEN (not shown again):\n{token}"
        return found, text
    if args.action == "show":
        instance = account.get(args.id)
        if instance is None:
            raise WakeupError(f"there is no instance {args.id}", code=ErrorCode.NOT_FOUND, retryable=False, status=404)
        return instance.to_json(), _shown(instance)
    if args.action == "attempts":
        calls = list(account.attempts(args.id))
        lines = [_attempt_line(call) for call in calls]
        return [call.to_json() for call in calls], "\n".join(lines) if lines else "no calls in the last 7 days"
    if args.action == "delete":
        deleted = account.delete(args.id)
        text = f"instance {args.id} deleted" if deleted else f"there is no instance {args.id}: nothing to delete"
        return {"id": args.id, "deleted": deleted}, text
    instances = list(account.list())
    lines = [f"{i.id}  {i.url}  {_state(i)}" for i in instances]
    return [i.to_json() for i in instances], "\n".join(lines) if lines else "no instances"


def _instance_token_from_env() -> str:
    token = os.environ.get("WAKEUP_TOKEN")
    if not token:
        raise _UsageError("give --token T or --mint, or set WAKEUP_TOKEN")
    return token


def main(argv: Sequence[str] | None = None, *, session: requests.Session | None = None) -> int:
    """Run ``wakeup-client`` with ``argv`` (default: the process's arguments); returns the exit code.

    ``session`` is the HTTP session the clients use (a ``FakeWakeupService``'s in tests).
    """
    try:
        args = _parser().parse_args(argv)
        found, text = _run(args, session)
    except _UsageError as exc:
        return _fail(str(exc), EXIT_USAGE)
    except WakeupError as exc:
        return _fail(exc.message, EXIT_USAGE if exc.code in USAGE_CODES else EXIT_FAILED)
    try:
        print(json.dumps(found, indent=2) if args.json else text, flush=True)
    except BrokenPipeError:
        # The reader went away (`wakeup-client instances list | head`). Python's advice: point stdout at
        # devnull so the flush at exit fails quietly too
        # (https://docs.python.org/3/library/signal.html#note-on-sigpipe).
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_FAILED
    return EXIT_OK


def _fail(message: str, code: int) -> int:
    one_line = " ".join(message.split())
    print(f"wakeup-client: error: {one_line}", file=sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main())
