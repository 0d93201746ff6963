"""What the local stack's own tests share besides fixtures."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from support.waiting import wait_until
from wakeup_local.aws.clients import AwsClients
from wakeup_local.stack import LocalStack

FIXTURE_DIR = Path(__file__).parent / "stack_fixture"
FIXTURE_TEMPLATE = FIXTURE_DIR / "template.yaml"
ROOT = Path(__file__).resolve().parents[2]

# The `start_stack` fixture: starts an in-process stack of the fixture template (LocalStack's kwargs).
StartStack = Callable[..., LocalStack]

# The setting that tells the fixture's handlers where to record what they get (see handlers/records.py).
RECORDS_ENV = "WAKEUP_TEST_RECORDS"

__all__ = [
    "StartStack",
    "FIXTURE_DIR",
    "FIXTURE_TEMPLATE",
    "RECORDS_ENV",
    "ROOT",
    "fake_minter",
    "handler_records",
    "wait_until",
    "warm_up",
]


def fake_minter(clients: AwsClients, table_name: str, label: str) -> str:
    """Stands in for the service's own minting: these tests are about the local stack."""
    return f"swa_test_{label}"


def handler_records(stack: LocalStack, logical_id: str) -> list[dict[str, Any]]:
    """What the function's handlers recorded so far, in order (each environment appends its own)."""
    path = Path(stack.env[RECORDS_ENV]) / f"{stack.functions.by_logical_id(logical_id).name}.jsonl"
    if not path.exists():
        return []
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    return [json.loads(line) for line in lines if line.endswith("\n")]  # a line being written is left out


def warm_up(stack: LocalStack, logical_id: str, environments: int, event: Any) -> None:
    """Starts about `environments` environments of the function at once (each invocation finds none
    free while the others start), so that what a test times next includes no cold start."""
    function = stack.functions.by_logical_id(logical_id)
    with ThreadPoolExecutor(environments) as pool:
        list(pool.map(lambda _: function.invoke(event), range(environments)))


@contextmanager
def shared_stack(tmp_path_factory: pytest.TempPathFactory, **env: str) -> Iterator[LocalStack]:
    """A stack of the fixture template for the tests of a module that do not disturb each other."""
    records = tmp_path_factory.mktemp("records")
    with (
        (records / "functions.log").open("w") as log,
        LocalStack(
            FIXTURE_TEMPLATE,
            account_minter=fake_minter,
            stack_name=f"m-{uuid.uuid4().hex[:8]}",
            env={RECORDS_ENV: str(records), **env},
            function_log=log,
        ) as stack,
    ):
        yield stack
