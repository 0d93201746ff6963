"""What the local stack's own tests share besides fixtures."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from support.waiting import wait_until
from wakeup_local.aws import AwsClients
from wakeup_local.stack import LocalStack

FIXTURE_DIR = Path(__file__).parent / "stack_fixture"
FIXTURE_TEMPLATE = FIXTURE_DIR / "template.yaml"
ROOT = Path(__file__).resolve().parents[2]

# The `start_stack` fixture: starts an in-process stack of the fixture template (LocalStack's kwargs).
StartStack = Callable[..., LocalStack]

__all__ = ["StartStack", "FIXTURE_DIR", "FIXTURE_TEMPLATE", "ROOT", "fake_minter", "handler_state", "wait_until"]


def fake_minter(clients: AwsClients, table_name: str, label: str) -> str:
    """Stands in for the service's own minting: these tests are about the local stack."""
    return f"swa_test_{label}"


def handler_state(stack: LocalStack, logical_id: str, name: str) -> Any:
    """A module-level variable of the function's handler (each function has its own module)."""
    return stack.functions.by_logical_id(logical_id).handler.__globals__[name]
