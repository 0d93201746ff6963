"""`wakeup-admin` run against a local stack, as an operator runs it with the lines `make run` prints.

`admin` runs the CLI's entry function (`wakeup_admin.cli:main`, what the installed `wakeup-admin`
script calls) in this process, with the operator's environment, and gives its output and exit
status as a run of the script does: a run of the script costs its imports' CPU every time.
`admin_process` runs the installed script itself, for what only a process of its own shows (its
entry point, its environment, its pipes).
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
from collections.abc import Mapping
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from typing import Any
from unittest import mock

from wakeup_admin.cli import main

ADMIN = str(Path(sys.executable).with_name("wakeup-admin"))


def admin_env(stack: Any) -> dict[str, str]:
    """The environment an operator of the local stack runs `wakeup-admin` in."""
    return {
        **os.environ,
        "AWS_ENDPOINT_URL": stack.endpoint_url,
        "AWS_DEFAULT_REGION": stack.region,
        "AWS_ACCESS_KEY_ID": "local",
        "AWS_SECRET_ACCESS_KEY": "local",
        "WAKEUP_TABLE": stack.table_name,
        "WAKEUP_MASTER_KEY_SECRET": stack.master_key_secret,
    }


def admin(stack: Any, *args: str) -> subprocess.CompletedProcess[str]:
    """`wakeup-admin *args` against the stack, run in this process."""
    return run_admin(admin_env(stack), *args)


def run_admin(env: Mapping[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """`wakeup-admin *args` in the environment `env` (the whole of it, as a process would have it),
    run in this process: what it printed on stdout and stderr, and the status it exits with."""
    out, err = io.StringIO(), io.StringIO()
    with mock.patch.dict(os.environ, env, clear=True), redirect_stdout(out), redirect_stderr(err):
        try:
            code = main(list(args))
        except SystemExit as exc:  # argparse's refusals of a command line, and --help
            code = exc.code if isinstance(exc.code, int) else 1
    return subprocess.CompletedProcess([ADMIN, *args], code, out.getvalue(), err.getvalue())


def admin_process(env: Mapping[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """The installed `wakeup-admin *args`, a process of its own in the environment `env`."""
    return subprocess.run([ADMIN, *args], env=env, capture_output=True, text=True, timeout=60, check=False)


def account_id(stack: Any, label: str) -> str:
    """The id of the account with this label, from `wakeup-admin accounts list`."""
    listed = admin(stack, "accounts", "list").stdout.splitlines()
    return next(line.split()[0] for line in listed if f"  {label}  " in f"{line}  ")
