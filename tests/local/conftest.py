"""Fixtures of the local stack's own tests: a small template with test handlers, run in-process,
and motos: the local stack's (`moto_endpoint`) and moto's own server, unpatched (`plain_moto`)."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest
from localstack_helpers import FIXTURE_TEMPLATE, RECORDS_ENV, StartStack, fake_minter, shared_stack
from moto.server import ThreadedMotoServer

from wakeup_local.aws.moto_process import MotoProcess
from wakeup_local.stack import LocalStack


@pytest.fixture
def start_stack(tmp_path: Path) -> Iterator[StartStack]:
    """Starts in-process stacks of the fixture template (keyword arguments go to LocalStack); their
    handlers record what they get in a folder of the test's own, and their log goes to a file there
    (what an environment prints may come after the test ends)."""
    started: list[LocalStack] = []
    with ExitStack() as logs:

        def start(**kwargs: Any) -> LocalStack:
            kwargs.setdefault("account_minter", fake_minter)
            kwargs.setdefault("stack_name", f"t-{uuid.uuid4().hex[:8]}")
            records = tmp_path / f"records-{len(started)}"
            records.mkdir()
            kwargs["env"] = {RECORDS_ENV: str(records), **(kwargs.get("env") or {})}
            kwargs.setdefault("function_log", logs.enter_context((records / "functions.log").open("w")))
            started.append(LocalStack(FIXTURE_TEMPLATE, **kwargs).start())
            return started[-1]

        yield start
        for stack in started:
            stack.stop()


@pytest.fixture(scope="module")
def module_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    """One stack for the tests of a module that do not disturb each other."""
    with shared_stack(tmp_path_factory) as stack:
        yield stack


@pytest.fixture(scope="module")
def moto_endpoint() -> Iterator[str]:
    """A moto of the module's own, as the local stack runs it (its process, `moto_fixes` applied)."""
    moto = MotoProcess()
    moto.start()
    yield moto.endpoint_url
    moto.stop()


@pytest.fixture(scope="module")
def plain_moto() -> Iterator[str]:
    """moto's own server as it comes, in this process, to compare the local stack's with."""
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()
