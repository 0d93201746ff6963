"""Fixtures of the local stack's own tests: a small template with test handlers, run in-process."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from localstack_helpers import FIXTURE_TEMPLATE, StartStack, fake_minter

from wakeup_local.stack import LocalStack


@pytest.fixture
def start_stack() -> Iterator[StartStack]:
    """Starts in-process stacks of the fixture template (keyword arguments go to LocalStack)."""
    started: list[LocalStack] = []

    def start(**kwargs: Any) -> LocalStack:
        kwargs.setdefault("account_minter", fake_minter)
        kwargs.setdefault("stack_name", f"t-{uuid.uuid4().hex[:8]}")
        started.append(LocalStack(FIXTURE_TEMPLATE, **kwargs).start())
        return started[-1]

    yield start
    for stack in started:
        stack.stop()


@pytest.fixture(scope="module")
def module_stack() -> Iterator[LocalStack]:
    """One stack for the tests of a module that do not disturb each other."""
    with LocalStack(FIXTURE_TEMPLATE, account_minter=fake_minter, stack_name=f"m-{uuid.uuid4().hex[:8]}") as stack:
        yield stack
