"""`wakeup-admin`: the operator's CLI over the table (AWS credentials, or the local stack's
`AWS_ENDPOINT_URL`).

    wakeup-admin accounts mint --label L     prints the new account's token, then its signing
                                             secret, once each, one per line on stdout
    wakeup-admin accounts list
    wakeup-admin accounts revoke ID
    wakeup-admin accounts rotate-token ID [--overlap 24h]
                                             prints the new token once; the old one keeps
                                             working beside it for the overlap, then is refused
    wakeup-admin accounts rotate-signing-secret ID [--overlap 24h]
                                             prints the new signing secret once; the old one
                                             keeps signing beside it for the overlap
    wakeup-admin accounts limit ID --max-instances N   the account's own limit (--default: the service's)
    wakeup-admin accounts rate ID --per-second N       the account's own rate on the account routes
                                             (--default: the service's)
    wakeup-admin master-key list             the master's versions, and how many accounts sign with each
    wakeup-admin master-key add              a new master, current from now on (rotate each account's
                                             signing secret to move it over)
    wakeup-admin master-key retire VERSION   removes a version no live account signs with any more
    wakeup-admin instances list [--account ID]
    wakeup-admin instances show ID           the instance, and its calls of the last 7 days
    wakeup-admin wakes failing               pending wakes whose last call failed
"""

import argparse
import json
import os
import re
import sys
from collections.abc import Iterable, Sequence
from datetime import timedelta
from urllib.parse import urlsplit

import boto3
from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError

from wakeup import aws
from wakeup.api.models import attempt_reply, instance_reply
from wakeup.errors import UnavailableError
from wakeup.factories import signing_keys
from wakeup.logic import history
from wakeup.logic.accounts import (
    mint_account,
    revoke_account,
    rotate_signing_secret,
    rotate_token,
    signing_secret,
)
from wakeup.logic.rates import ACCOUNT_WINDOW_S
from wakeup.model import Account, Instance
from wakeup.settings import MAX_ACCOUNT_REQUESTS_PER_S
from wakeup.signing import SigningKeys
from wakeup.table import DynamoStore
from wakeup.table.items import is_id
from wakeup.times import format_time, now
from wakeup_admin import master_keys

DEFAULT_OVERLAP = "24h"
_DURATION = re.compile(r"(\d+)([smhd]?)")
_UNIT_SECONDS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}


class UsageError(Exception):
    """Raised when the command line cannot be acted on (exit 2)."""


def _duration(text: str) -> timedelta:
    """`90`, `90s`, `30m`, `24h`, `7d`: whole seconds, minutes, hours or days."""
    match = _DURATION.fullmatch(text.strip())
    if match is None:
        raise argparse.ArgumentTypeError(f"{text!r} is not a duration such as 90s, 30m, 24h or 7d")
    return timedelta(seconds=int(match.group(1)) * _UNIT_SECONDS[match.group(2)])


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="wakeup-admin", description="Operate a wakeup service's table.")
    parser.add_argument("--table", default=os.environ.get("WAKEUP_TABLE"), help="the table (default: $WAKEUP_TABLE)")
    parser.add_argument(
        "--master-key-secret",
        default=os.environ.get("WAKEUP_MASTER_KEY_SECRET"),
        help="the Secrets Manager secret of the signing master key, for mint, rotate-signing-secret and master-key "
        "(default: $WAKEUP_MASTER_KEY_SECRET; the stack's output SigningMasterKeyArn)",
    )
    topics = parser.add_subparsers(dest="topic", required=True)

    accounts = topics.add_parser(
        "accounts", help="mint, list, revoke and limit accounts, and rotate their signing secrets"
    ).add_subparsers(dest="action", required=True)
    accounts.add_parser("mint", help="mint an account; its token and signing secret are printed once").add_argument(
        "--label", required=True, help="whose account it is"
    )
    accounts.add_parser("list", help="every account")
    accounts.add_parser("revoke", help="revoke an account and its instances' tokens").add_argument(
        "id", help="the account's id (accounts list)"
    )
    for name, what, kept in (
        (
            "rotate-token",
            "a new account token; the old one keeps working for the overlap, then is refused",
            "how long the old token works beside the new one: 0, 90s, 30m, 24h, 7d",
        ),
        (
            "rotate-signing-secret",
            "a new signing secret; the old one keeps signing for the overlap",
            "how long the old secret keeps signing beside the new one: 90s, 30m, 24h, 7d",
        ),
    ):
        rotation = accounts.add_parser(name, help=what)
        rotation.add_argument("id", help="the account's id (accounts list)")
        rotation.add_argument(
            "--overlap", type=_duration, default=_duration(DEFAULT_OVERLAP), help=f"{kept} (default {DEFAULT_OVERLAP})"
        )
    limit = accounts.add_parser("limit", help="set how many instances an account may hold")
    limit.add_argument("id", help="the account's id (accounts list)")
    chosen = limit.add_mutually_exclusive_group(required=True)
    chosen.add_argument("--max-instances", type=_positive, help="the account's own limit")
    chosen.add_argument("--default", action="store_true", help="the service's limit again")
    rate = accounts.add_parser("rate", help="set how many requests a second an account may send on its routes")
    rate.add_argument("id", help="the account's id (accounts list)")
    paced = rate.add_mutually_exclusive_group(required=True)
    paced.add_argument("--per-second", type=_rate, help=f"the account's own rate, 1 to {MAX_ACCOUNT_REQUESTS_PER_S}")
    paced.add_argument("--default", action="store_true", help="the service's rate again")

    master = topics.add_parser(
        "master-key", help="add, list and retire versions of the signing master key"
    ).add_subparsers(dest="action", required=True)
    master.add_parser("list", help="the versions, the current one, and how many live accounts sign with each")
    master.add_parser("add", help="a new master version, current from now on; the others stay")
    master.add_parser("retire", help="removes a version no live account signs with").add_argument(
        "version", type=_positive, help="the version (master-key list)"
    )

    instances = topics.add_parser("instances", help="list and inspect instances").add_subparsers(
        dest="action", required=True
    )
    instances.add_parser("list", help="instances, of one account or all").add_argument("--account")
    instances.add_parser("show", help="one instance").add_argument("id", help="the instance's id")

    wakes = topics.add_parser("wakes", help="wakes that need attention").add_subparsers(dest="action", required=True)
    wakes.add_parser("failing", help="pending wakes whose last call failed")
    return parser


def _positive(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError("a whole number from 1")
    return int(text)


def _rate(text: str) -> int:
    if not text.isdigit() or not 1 <= int(text) <= MAX_ACCOUNT_REQUESTS_PER_S:
        raise argparse.ArgumentTypeError(f"a whole number from 1 to {MAX_ACCOUNT_REQUESTS_PER_S}")
    return int(text)


def _rows(header: Sequence[str], rows: Iterable[Sequence[str]]) -> None:
    table = [list(header), *(list(row) for row in rows)]
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    for row in table:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())


def _account_row(account: Account) -> list[str]:
    revoked = format_time(account.revoked_at) if account.revoked_at else "-"
    limit = str(account.max_instances) if account.max_instances is not None else "default"
    rate = f"{account.max_requests_per_s}/s" if account.max_requests_per_s is not None else "default"
    created = format_time(account.created_at)
    return [account.id, account.label, created, revoked, str(account.instance_count), limit, rate]


def _instance_row(instance: Instance) -> list[str]:
    shown = instance_reply(instance)
    return [
        instance.id,
        instance.account_id,
        instance.url,
        shown["at"] or "-",
        shown["calledAt"] or "-",
        str(instance.attempts),
        instance.last_error or "-",
    ]


INSTANCE_HEADER = ["ID", "ACCOUNT", "URL", "AT", "CALLED AT", "ATTEMPTS", "LAST ERROR"]


def _instances(store: DynamoStore, account_id: str | None) -> list[Instance]:
    accounts = [account_id] if account_id else [a.id for a in store.list_accounts()]
    return [instance for each in accounts for instance in store.all_instances(each)]


def _local_credentials() -> None:
    """Any credentials do for the local stack (moto on loopback): supplies some when none are set."""
    endpoint = urlsplit(os.environ.get("AWS_ENDPOINT_URL", "")).hostname
    if endpoint in ("127.0.0.1", "localhost", "::1") and boto3.Session().get_credentials() is None:
        os.environ.setdefault("AWS_ACCESS_KEY_ID", "local")
        os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "local")


def _keys(args: argparse.Namespace) -> SigningKeys:
    if not args.master_key_secret:
        raise UsageError(
            "no signing master key: pass --master-key-secret or set WAKEUP_MASTER_KEY_SECRET "
            "(the stack's output SigningMasterKeyArn; make run prints it)"
        )
    return signing_keys(args.master_key_secret)


def _master_key(args: argparse.Namespace, store: DynamoStore, action: str) -> int:
    secret_id = _keys(args).master_secret_id
    client = aws.client("secretsmanager")
    if action == "add":
        added = master_keys.add(client, secret_id)
        print(
            f"master key version {added.current} added, and current: new accounts and every rotation derive from it."
            f" Move each account to it with accounts rotate-signing-secret ID; once none signs with an older"
            " version, master-key retire it"
        )
    elif action == "retire":
        refusal = master_keys.retire(client, secret_id, store, args.version, now())
        if refusal is not None:
            print(f"wakeup-admin: {refusal}", file=sys.stderr)
            return 1
        print(f"master key version {args.version} retired")
    else:
        keys, used = master_keys.read(client, secret_id), master_keys.usage(store, now())
        rows = [[str(v), "current" if v == keys.current else "-", str(used[v])] for v in sorted(keys.versions)]
        _rows(["VERSION", "CURRENT", "ACCOUNTS SIGNING"], rows)
    return 0


def run(args: argparse.Namespace) -> int:
    if not args.table:
        raise UsageError("no table: pass --table or set WAKEUP_TABLE (make run prints it)")
    _local_credentials()
    store = DynamoStore(args.table)
    match args.topic, args.action:
        case "accounts", "mint":
            if not args.label.strip():
                raise UsageError("--label must say whose account it is; it was empty")
            keys = _keys(args)  # before minting: an account whose secret cannot be shown is no use
            account, token = mint_account(store, args.label, keys.current_master())
            print(
                f"minted account {account.id} ({account.label}); its token, then the secret its hosts verify "
                "wakes with, are shown only now:",
                file=sys.stderr,
            )
            print(token)
            print(signing_secret(keys, account))
        case "accounts", "list":
            header = ["ID", "LABEL", "CREATED", "REVOKED", "INSTANCES", "LIMIT", "RATE"]
            _rows(header, map(_account_row, store.list_accounts()))
        case "accounts", "revoke":
            # Revoked before, it is revoked again all the same: that finishes a revocation whose
            # instances were not all listed yet (wakeup.logic.accounts.revoke_account).
            before = store.get_account(args.id) if is_id(args.id) else None
            revoked = revoke_account(store, args.id) if before is not None else None
            if revoked is None:
                print(f"wakeup-admin: no account {args.id}", file=sys.stderr)
                return 1
            if before is not None and before.revoked_at is not None:
                print(
                    f"account {revoked.id} ({revoked.label}) was revoked already, at {format_time(before.revoked_at)};"
                    " its instances' tokens are revoked too"
                )
            else:
                print(f"revoked account {revoked.id} ({revoked.label}) and its instances' tokens")
        case "accounts", "rotate-token":
            replaced = rotate_token(store, args.id, args.overlap) if is_id(args.id) else None
            if replaced is None:
                print(
                    f"wakeup-admin: no live account {args.id} (none by that id, or revoked), or it was rotated"
                    " meanwhile",
                    file=sys.stderr,
                )
                return 1
            account, token = replaced
            print(
                f"account {account.id} ({account.label}) has a new token, shown only now; the previous one works "
                f"beside it until {format_time(now() + args.overlap)}, then is refused (401):",
                file=sys.stderr,
            )
            print(token)
        case "accounts", "rotate-signing-secret":
            rotated = rotate_signing_secret(store, _keys(args), args.id, args.overlap) if is_id(args.id) else None
            if rotated is None:
                print(
                    f"wakeup-admin: no live account {args.id} (none by that id, or revoked), or it was rotated"
                    " meanwhile",
                    file=sys.stderr,
                )
                return 1
            account, secret = rotated
            until = account.signing.previous_until
            print(
                f"account {account.id} ({account.label}) signs with a new secret, shown only now; the previous "
                f"one signs beside it until {format_time(until) if until else 'now'}:",
                file=sys.stderr,
            )
            print(secret)
        case "accounts", "limit":
            changed = store.set_account_limit(args.id, args.max_instances) if is_id(args.id) else None
            if changed is None:
                print(f"wakeup-admin: no account {args.id}", file=sys.stderr)
                return 1
            shown = (
                f"{changed.max_instances} instance{'' if changed.max_instances == 1 else 's'}"
                if changed.max_instances is not None
                else "the service's default number of instances (WAKEUP_MAX_INSTANCES_PER_ACCOUNT)"
            )
            held = f"it holds {changed.instance_count}"
            if changed.max_instances is not None and changed.instance_count > changed.max_instances:
                held += ", more: it keeps them, and registers no new one until it holds fewer"
            print(f"account {changed.id} ({changed.label}) may hold {shown}; {held}")
        case "accounts", "rate":
            paced = store.set_account_rate(args.id, args.per_second, ACCOUNT_WINDOW_S) if is_id(args.id) else None
            if paced is None:
                print(f"wakeup-admin: no account {args.id}", file=sys.stderr)
                return 1
            shown = (
                f"{paced.max_requests_per_s} request{'' if paced.max_requests_per_s == 1 else 's'} a second"
                if paced.max_requests_per_s is not None
                else "the service's default rate (WAKEUP_ACCOUNT_REQUESTS_PER_S)"
            )
            print(
                f"account {paced.id} ({paced.label}) may send {shown} on the account routes, counted over"
                f" {ACCOUNT_WINDOW_S} s windows"
            )
        case "master-key", action:
            return _master_key(args, store, action)
        case "instances", "list":
            if args.account is not None and (not is_id(args.account) or store.get_account(args.account) is None):
                print(f"wakeup-admin: no account {args.account}", file=sys.stderr)
                return 1
            _rows(INSTANCE_HEADER, map(_instance_row, _instances(store, args.account)))
        case "instances", "show":
            instance = store.get_instance(args.id) if is_id(args.id) else None
            if instance is None:
                print(f"wakeup-admin: no instance {args.id}", file=sys.stderr)
                return 1
            # Its calls of the last 7 days, newest first (at most 100 are kept).
            calls = history.page(store, instance, history.HISTORY_SIZE, None, now()).calls
            found = {**instance_reply(instance), "accountId": instance.account_id}
            print(json.dumps({**found, "history": [attempt_reply(call) for call in calls]}, indent=2))
        case "wakes", "failing":
            failing = [i for i in _instances(store, None) if i.pending and i.attempts > 0]
            _rows(INSTANCE_HEADER, map(_instance_row, failing))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        return run(args)
    except UsageError as exc:
        print(f"wakeup-admin: {exc}", file=sys.stderr)
        return 2
    except NoCredentialsError:
        print("wakeup-admin: no AWS credentials: configure them (aws configure, AWS_PROFILE, ...)", file=sys.stderr)
        return 1
    except (ClientError, BotoCoreError) as exc:
        print(f"wakeup-admin: AWS refused or failed: {exc}", file=sys.stderr)
        return 1
    except UnavailableError as exc:  # a revocation whose index lags, a table too busy to read
        print(f"wakeup-admin: {exc.message}", file=sys.stderr)
        return 1
    except BrokenPipeError:
        # The reader went away (`wakeup-admin accounts list | head`): stop quietly, as Python's
        # "Note on SIGPIPE" (the signal module's documentation) advises, so that the interpreter's
        # last flush of stdout does not fail again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1


if __name__ == "__main__":
    sys.exit(main())
