"""`wakeup-admin` run against a local stack, as an operator runs it with the lines `make run` prints."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

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
    return subprocess.run([ADMIN, *args], env=admin_env(stack), capture_output=True, text=True, timeout=60, check=False)


def account_id(stack: Any, label: str) -> str:
    """The id of the account with this label, from `wakeup-admin accounts list`."""
    listed = admin(stack, "accounts", "list").stdout.splitlines()
    return next(line.split()[0] for line in listed if f"  {label}  " in f"{line}  ")
