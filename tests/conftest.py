"""Fixtures every tier shares: the local stack (in a process of its own), a real host on loopback
and a client of the stack's HTTP API.

- `stack` (session): the stack of `template.yaml`, exact schedules, short call timeout and lease.
- `make_stack(**env)`: another stack with other settings, stopped after the test.
- `make_module_stack(**env)`: the same, shared by the tests of a module (one stack per set of settings),
  stopped after the module: for tests that each use accounts and instances of their own.
- `host`: a scriptable HTTP host recording the calls it receives.
- `api`: the session stack's HTTP API with its first account's token.

When a test fails, the log lines of each stack written during the test are added to its report.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Generator, Iterator
from pathlib import Path

import pytest
from hypothesis import settings

from support.api import Api
from support.host import WakeHost
from support.stack_process import STACK_SETTINGS, MakeStack, StackProcess

ROOT = Path(__file__).resolve().parents[1]
TEMPLATE = ROOT / "template.yaml"

# Tests talk to moto only: dummy credentials, so that nothing can reach a real account, and so that
# a test's own boto3 client (reading the stack's table, say) needs no setup.
TEST_AWS_ENVIRONMENT = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
}

# No time limit on a hypothesis example: its default (200 ms an example) is a timing bound in a
# test's pass mark, and on two busy cores (the simulations at a low priority, one core held by
# something else) one example of a quick test took 365 ms. A test that means a bound asserts it.
settings.register_profile("suite", deadline=None)
settings.load_profile("suite")

# Every stack started in this process, for the failure reports.
_stacks: list[StackProcess] = []
_log_offsets = pytest.StashKey[dict[Path, int]]()


@pytest.fixture(scope="session", autouse=True)
def _dummy_aws_credentials() -> Iterator[None]:
    with pytest.MonkeyPatch.context() as patch:
        for key in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_SESSION_TOKEN"):
            patch.delenv(key, raising=False)
        for key, value in TEST_AWS_ENVIRONMENT.items():
            patch.setenv(key, value)
        yield


def _start_stack(log_dir: Path, name: str, env: dict[str, str]) -> StackProcess:
    stack = StackProcess(TEMPLATE, env, log_dir / f"{name}.log", cwd=ROOT)
    stack.start()
    _stacks.append(stack)
    # The instances function's first environment started by a read, whatever it answers: on a
    # loaded machine the stack's first cold start (its environments' fork server starting too) can
    # use up so much of an invocation that a registration's last request has no time left, which
    # the service answers 503, as it should (wakeup.deadlines), and a test registering first fails.
    api = Api(stack.url, stack.account_token)
    api.get("/wakeup/instances")
    api.close()
    return stack


@pytest.fixture(scope="session")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StackProcess]:
    started = _start_stack(tmp_path_factory.mktemp("stack"), "session-stack", STACK_SETTINGS)
    yield started
    started.stop()


@pytest.fixture
def make_stack(tmp_path: Path) -> Iterator[MakeStack]:
    """Starts stacks with the session stack's settings updated by `env` (`WAKEUP_SQS_HORIZON_S="5"`)."""
    made: list[StackProcess] = []

    def make(**env: str) -> StackProcess:
        made.append(_start_stack(tmp_path, f"stack-{len(made)}", {**STACK_SETTINGS, **env}))
        return made[-1]

    yield make
    for started in made:
        started.stop()


@pytest.fixture(scope="module")
def make_module_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MakeStack]:
    """Starts a stack with the session stack's settings updated by `env`, or returns the module's
    stack started with those settings already."""
    made: dict[frozenset[tuple[str, str]], StackProcess] = {}

    def make(**env: str) -> StackProcess:
        key = frozenset(env.items())
        if key not in made:
            made[key] = _start_stack(tmp_path_factory.mktemp("stack"), "module-stack", {**STACK_SETTINGS, **env})
        return made[key]

    yield make
    for started in made.values():
        started.stop()


@pytest.fixture
def host() -> Iterator[WakeHost]:
    started = WakeHost()
    yield started
    started.close()


@pytest.fixture
def api(stack: StackProcess) -> Iterator[Api]:
    client = Api(stack.url, stack.account_token)
    yield client
    client.close()


# --- CPU-heavy tests in a run of their own -----------------------------------------------------------

# The simulations keep a core busy for seconds at a time: `make pytest` runs them in a pytest of their
# own (`-m cpu_heavy`) at a low CPU priority, so that they take little of a core from a test that
# times a stack. (pytest-xdist's loadgroup would put them on one worker, but with pytest 9.2 it
# silently stops grouping: pytest-dev/pytest-xdist#1386.) Only under tests/unit, which that run
# collects.
CPU_HEAVY = ("test_simulation", "test_cost_floor", "test_cost_month", "test_fault")
# `make pytest` runs the tests marked `alone` from the test files its grep finds this in (the
# Makefile's ALONE_MARK): a test marked otherwise (by a hook, say) would not run at all.
ALONE_MARK = re.compile(r"mark\.alone\b")


@pytest.hookimpl(wrapper=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> Generator[None, None, None]:
    for item in items:
        if item.path.parent == ROOT / "tests" / "unit" and item.path.name.startswith(CPU_HEAVY):
            item.add_marker(pytest.mark.cpu_heavy)
        if item.get_closest_marker("alone") and not _found_alone(item.path):
            raise pytest.UsageError(f"{item.nodeid} is marked `alone` where make pytest's last phase cannot find it")
    yield
    # After `-m` and `-k` have deselected theirs. A pytest-xdist worker knows how many there are.
    workers = int(getattr(config, "workerinput", {}).get("workercount", 1))
    items[:] = _slow_first(items, workers)


def _found_alone(path: Path) -> bool:
    """Whether `make pytest`'s grep for the tests marked `alone` finds this test file."""
    return path.name.startswith("test_") and ALONE_MARK.search(path.read_text(encoding="utf-8")) is not None


# The slow tests that wait longest (a schedule's minute, a sweep, sam build's install) before the others.
LONGEST = ("test_far_wakes.py", "test_chaos.py", "test_template_build.py")


def _slow_first(items: list[pytest.Item], workers: int) -> list[pytest.Item]:
    """The tests in an order where each worker starts with a slow test, so that the slow tests run
    side by side from the start instead of one starting last and running on alone.

    `make pytest` runs `--dist worksteal`: pytest-xdist splits the list into one run of tests a
    worker, in order and evenly, and idle workers then take half of a busy one's remaining tests.
    So each run starts with a slow test, the longest first; slow tests beyond one a worker follow
    the shortest of those. The other tests keep their order, and with it a module's tests stay
    together (a module's stack is started once, not on every worker)."""
    slow = sorted(
        (item for item in items if item.get_closest_marker("slow")),
        key=lambda item: LONGEST.index(item.path.name) if item.path.name in LONGEST else len(LONGEST),
    )
    rest = iter([item for item in items if not item.get_closest_marker("slow")])
    runs: list[list[pytest.Item]] = [[] for _ in range(workers)]
    for n, item in enumerate(slow):
        runs[n if n < workers else workers - 1 - (n - workers) % workers].append(item)
    ordered: list[pytest.Item] = []
    left = len(items)
    for n, run in enumerate(runs):
        size = left // (workers - n)  # as pytest-xdist's worksteal sizes its runs
        left -= size
        ordered += run + list(itertools.islice(rest, max(0, size - len(run))))
    return ordered + list(rest)


# --- the stacks' logs in the report of a failed test ------------------------------------------------


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Generator[None, None, None]:
    item.stash[_log_offsets] = {stack.log_path: _size(stack.log_path) for stack in _stacks}
    return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    if report.failed:
        offsets = item.stash.get(_log_offsets, {})
        for stack in _stacks:
            text = _read_from(stack.log_path, offsets.get(stack.log_path, 0))
            if text.strip():
                report.sections.append((f"local stack log ({stack.log_path.name})", text[-20000:]))
    return report


def _size(path: Path) -> int:
    return path.stat().st_size if path.exists() else 0


def _read_from(path: Path, offset: int) -> str:
    if not path.exists():
        return ""
    with path.open("rb") as log:
        log.seek(offset)
        return log.read().decode("utf-8", errors="replace")
