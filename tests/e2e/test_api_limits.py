"""Per-account limits over HTTP, each request from a client of its own: an account never holds more
instances than its limit, which the operator can change with `wakeup-admin`; an instance
registering wakes faster than the operator's rate gets 429.

The last test sends its requests all at once; the limits under concurrent clients are also
tested on the table itself, in tests/functional/test_store_limits.py.
"""

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

import pytest
import requests
from test_admin import admin

from support.api import Api
from support.stack_process import MakeStack, StackProcess
from wakeup.tokens import TokenKind, mint

CLIENTS = 8
HOST_URL = "http://127.0.0.1:9"  # never called: these instances register no wake
# One stack for the module, each test with an account of its own: at most 5 instances an account,
# 3 wakes an instance in a day's window (the longest the service allows).
WINDOW_S = 86400
LIMITS = {
    "WAKEUP_MAX_INSTANCES_PER_ACCOUNT": "5",
    "WAKEUP_MAX_WAKES_PER_WINDOW": "3",
    "WAKEUP_WAKE_WINDOW_S": str(WINDOW_S),
}
# A reply may wait for a function's cold start, one per concurrent client, on a loaded machine's
# shared cores: far past the clients' usual 10 s. The limits are under test here, not the latency.
PATIENT_S = 120.0


T = TypeVar("T")


def within_one_window(attempt: Callable[[int], T]) -> T:
    """`attempt(n)`'s result, from an attempt whose requests all fell in one rate window. The windows
    are aligned to the epoch (a day's ends at 00:00 UTC), so a run across midnight counts in two: it
    runs again, with instances of its own (`n` tells the attempts apart), in the window just begun."""
    for n in range(2):
        started = time.time()
        result = attempt(n)
        if started // WINDOW_S == time.time() // WINDOW_S:
            return result
    raise AssertionError("two attempts in a row straddled two rate windows")


@pytest.fixture(scope="module")
def limited_stack(make_module_stack: MakeStack) -> StackProcess:
    """The module's stack, its instances function started in as many environments as a test here
    has clients at once, each through its first AWS request: the tests are about the limits, and
    that many cold starts at once on a loaded machine can use up an invocation's time before its
    last AWS request, which the service then answers 503, as it should (wakeup.deadlines)."""
    stack = make_module_stack(**LIMITS)
    reader = stack.mint_account("warm")

    def read(_: int) -> int:
        client = Api(stack.url, reader, timeout=PATIENT_S)
        try:
            return client.get("/wakeup/instances").status_code
        finally:
            client.close()

    with ThreadPoolExecutor(max_workers=2 * CLIENTS) as pool:
        list(pool.map(read, range(2 * CLIENTS)))
    return stack


def limit_reached(limit: int) -> dict[str, str]:
    return {
        "error": f"this account has reached its limit of {limit} instances:"
        " delete some, or ask the service's operator to raise the limit"
    }


def register_each(url: str, account_token: str, count: int) -> list[tuple[str, requests.Response]]:
    """`count` clients, each with a session of its own, registering a new token each."""

    def register(token: str) -> tuple[str, requests.Response]:
        client = Api(url, account_token, timeout=PATIENT_S)
        try:
            return token, client.register(HOST_URL, token)
        finally:
            client.close()

    return [register(mint(TokenKind.INSTANCE)) for _ in range(count)]


def test_registrations_past_the_accounts_limit_are_403_and_the_operator_can_raise_it(
    limited_stack: StackProcess,
) -> None:
    stack = limited_stack
    label = "limited"
    account_token = stack.mint_account(label)

    replies = register_each(stack.url, account_token, CLIENTS)

    created = [reply.json()["id"] for _, reply in replies if reply.status_code == 201]
    refused = [reply for _, reply in replies if reply.status_code != 201]
    assert len(created) == 5 and len(set(created)) == 5
    assert all(reply.status_code == 403 and reply.json() == limit_reached(5) for reply in refused)
    account = Api(stack.url, account_token)
    listed = account.get("/wakeup/instances").json()["instances"]
    assert sorted(instance["id"] for instance in listed) == sorted(created)

    # the operator raises this account's own limit
    [account_id] = [line.split()[0] for line in admin(stack, "accounts", "list").stdout.splitlines() if label in line]
    raised = admin(stack, "accounts", "limit", account_id, "--max-instances", "6")
    assert raised.returncode == 0, raised.stderr
    assert "may hold 6 instances; it holds 5" in raised.stdout
    statuses = sorted(reply.status_code for _, reply in register_each(stack.url, account_token, 3))
    assert statuses == [201, 403, 403]
    assert account.register(HOST_URL, mint(TokenKind.INSTANCE)).json() == limit_reached(6)
    account.close()


def test_an_instance_registering_wakes_past_the_rate_gets_429(limited_stack: StackProcess) -> None:
    stack = limited_stack
    at = "2099-01-01T00:00:00Z"

    def attempt(n: int) -> tuple[list[requests.Response], int]:
        account = Api(stack.url, stack.mint_account(f"rate-{n}"))
        busy, quiet = mint(TokenKind.INSTANCE), mint(TokenKind.INSTANCE)
        for token in (busy, quiet):
            assert account.register(HOST_URL, token).status_code == 201

        def wake(_: int) -> requests.Response:
            client = Api(stack.url, busy, timeout=PATIENT_S)
            try:
                return client.wake(busy, at)
            finally:
                client.close()

        replies = [wake(i) for i in range(6)]
        quiet_status = account.with_token(quiet).wake(quiet, at).status_code
        account.close()
        return replies, quiet_status

    replies, quiet_status = within_one_window(attempt)

    assert [reply.status_code for reply in replies] == [204] * 3 + [429] * 3
    for reply in replies:
        if reply.status_code == 429:
            error = reply.json()["error"]
            assert error.startswith("this instance registered 3 wakes in 86400 s, as many as the service allows")
            # the seconds until the day's window ends, as the sentence says them
            assert 1 <= int(reply.headers["Retry-After"]) <= 86_400
            assert error.endswith(f"retry in {reply.headers['Retry-After']} s")
    assert quiet_status == 204  # per instance


def test_concurrent_clients_never_pass_either_limit(limited_stack: StackProcess) -> None:
    stack = limited_stack
    account_token = stack.mint_account("concurrent")
    tokens = [mint(TokenKind.INSTANCE) for _ in range(CLIENTS * 2)]

    def register(token: str) -> requests.Response:
        client = Api(stack.url, account_token, timeout=PATIENT_S)
        try:
            return client.register(HOST_URL, token)
        finally:
            client.close()

    with ThreadPoolExecutor(max_workers=len(tokens)) as pool:
        replies = list(pool.map(register, tokens))

    assert sorted(reply.status_code for reply in replies) == [201] * 5 + [403] * (len(tokens) - 5)
    assert all(reply.json() == limit_reached(5) for reply in replies if reply.status_code == 403)
    registered = [token for token, reply in zip(tokens, replies, strict=True) if reply.status_code == 201]

    def attempt(n: int) -> list[requests.Response]:
        busy = registered[n]  # an instance with no wake yet

        def wake(_: int) -> requests.Response:
            client = Api(stack.url, busy, timeout=PATIENT_S)
            try:
                return client.wake(busy, "2099-01-01T00:00:00Z")
            finally:
                client.close()

        with ThreadPoolExecutor(max_workers=10) as pool:
            return list(pool.map(wake, range(10)))

    woken = within_one_window(attempt)

    assert sorted(reply.status_code for reply in woken) == [204] * 3 + [429] * 7
