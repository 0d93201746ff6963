"""The HTTP API fuzzed over the local stack, driven by docs/openapi.json (schemathesis on hypothesis).

Every operation gets requests that fit the document and requests that do not. Each reply must be
no 5xx, an error body in the service's shape on every 4xx it answers (API Gateway's own
`{"message"}` only for the 429, 500 and 503 it answers itself), and a status, content type and body
the document describes. The budget is bounded for `make test` (`WAKEUP_FUZZ_EXAMPLES` per operation
and mode, 40 by default); raise it to explore: `WAKEUP_FUZZ_EXAMPLES=1000 .venv/bin/pytest tests/e2e/test_api_fuzz.py`.

A failure can be replayed: each test prints its seed (shown with a failure's captured output), and
`WAKEUP_FUZZ_SEED=<seed>` runs that exploration again; hypothesis also prints the failing example
itself as a `@reproduce_failure(...)` decorator (`print_blob`).
"""

from __future__ import annotations

import json
import os
import random
import uuid
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote, urlencode

import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st
from schemathesis.checks import not_a_server_error
from schemathesis.generation import GenerationMode
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

import apidoc
from wakeup.tokens import TokenKind, mint

SCHEMA = schemathesis.openapi.from_path(str(apidoc.DOCUMENT))
OPERATIONS = [(method.upper(), path) for path, item in SCHEMA.raw_schema["paths"].items() for method in item]
EXAMPLES = int(os.environ.get("WAKEUP_FUZZ_EXAMPLES", "40"))
# The exploration's seed: a new one each run, unless given to replay one.
SEED = int(os.environ.get("WAKEUP_FUZZ_SEED") or random.SystemRandom().randrange(2**32))
# The statuses API Gateway answers itself, in its own shape.
GATEWAY_STATUSES = {429, 500, 503}


@pytest.fixture(autouse=True)
def said_seed() -> None:
    """Printed in each test's captured output, which pytest shows with its failure."""
    print(f"fuzz seed {SEED}: WAKEUP_FUZZ_SEED={SEED} replays this run")


@pytest.fixture(scope="module")
def caller(stack: Any) -> Iterator[tuple[requests.Session, dict[str, str]]]:
    """One session, and the token each route wants: a fresh account's, and its one instance's
    (registered at a loopback port nothing answers on, so the wakes the fuzz registers call nowhere)."""
    session = requests.Session()
    account = stack.mint_account(f"fuzz-{uuid.uuid4().hex[:8]}")
    instance = mint(TokenKind.INSTANCE)
    registered = session.post(
        f"{stack.url}/wakeup/instances",
        json={"url": "http://127.0.0.1:9/fuzz", "token": instance},
        headers={"Authorization": f"Bearer {account}"},
        timeout=10,
    )
    assert registered.status_code == 201, registered.text
    yield session, {"account": account, "instance": instance}
    # The wakes the fuzz registered (some in the past) stop being retried with the instance.
    session.delete(
        f"{stack.url}/wakeup/instances/{registered.json()['id']}", headers={"Authorization": f"Bearer {account}"}
    )
    session.close()


def check_error_shape(response: requests.Response) -> None:
    """Every 4xx the service answers is `{"error": "<sentence>"}`; API Gateway's own replies are
    `{"message": ...}`, and only for the statuses it answers itself."""
    if response.status_code < 400:
        return
    body = response.json()
    if set(body) == {"message"} and response.status_code in GATEWAY_STATUSES:
        return
    assert set(body) == {"error"}, body
    assert isinstance(body["error"], str) and body["error"].strip(), body


@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE], ids=str)
@pytest.mark.parametrize(("method", "path"), OPERATIONS, ids=[f"{m} {p}" for m, p in OPERATIONS])
def test_fuzzed_requests_get_replies_the_document_describes(
    stack: Any, caller: tuple[requests.Session, dict[str, str]], method: str, path: str, mode: GenerationMode
) -> None:
    session, tokens = caller
    token = tokens["instance"] if path == "/wakeup/wake" else tokens["account"]
    operation = SCHEMA[path][method]

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        database=None,
        print_blob=True,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.data_too_large],
    )
    @seed(SEED)
    @given(case=operation.as_strategy(generation_mode=mode))
    def exchange(case: Any) -> None:
        response = case.call(
            base_url=stack.url, session=session, headers={"Authorization": f"Bearer {token}"}, timeout=10
        )
        case.validate_response(
            response,
            checks=[not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance],
        )
        check_error_shape(response)

    exchange()


# --- below the document: any bytes, any path, any query ------------------------------------------

# Mostly the routes with the token each wants (so the request reaches the body, the query and the
# id), sometimes any method, path and token.
_ROUTES = [
    ("POST", "/wakeup/instances", "account"),
    ("GET", "/wakeup/instances", "account"),
    ("PUT", "/wakeup/wake", "instance"),
    ("GET", "/wakeup/instances/{}", "account"),
    ("DELETE", "/wakeup/instances/{}", "account"),
]
_IDS = st.text(max_size=40).map(lambda text: quote(text, safe=""))
_REQUEST_LINES = st.sampled_from(_ROUTES) | st.tuples(
    st.sampled_from(["GET", "POST", "PUT", "DELETE", "PATCH"]),
    st.sampled_from(["/wakeup/instances", "/wakeup/wake", "/wakeup/instances/{}", "/wakeup", "/", "/wakeup/x/{}"]),
    st.sampled_from(["account", "instance", "none"]),
)
_QUERIES = st.dictionaries(
    st.sampled_from(["limit", "cursor", "x"]), st.text(max_size=30) | st.integers().map(str), max_size=2
).map(urlencode)
_JSON_TEXT = st.recursive(
    st.none() | st.booleans() | st.floats() | st.text(max_size=20) | st.integers(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(["url", "token", "at"]), inner),
    max_leaves=10,
).map(lambda value: json.dumps(value).encode())
_ATTACKS = st.sampled_from(
    [b"[" * 5000, b'{"a": ' * 2000, b'{"at": NaN}', b'{"url": Infinity}', b"\xff\xfe{}", b'{"url": "\\ud800"}']
)
_BODIES = st.binary(max_size=200) | _JSON_TEXT | _ATTACKS


@settings(
    max_examples=EXAMPLES * 4,
    deadline=None,
    database=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@seed(SEED)
@given(line=_REQUEST_LINES, instance_id=_IDS, query=_QUERIES, body=_BODIES)
def test_any_request_gets_a_4xx_in_the_error_shape_or_a_success(
    stack: Any,
    caller: tuple[requests.Session, dict[str, str]],
    line: tuple[str, str, str],
    instance_id: str,
    query: str,
    body: bytes,
) -> None:
    session, tokens = caller
    method, path, who = line
    headers = {"Authorization": f"Bearer {tokens[who]}"} if who in tokens else {}
    url = f"{stack.url}{path.format(instance_id)}?{query}"

    response = session.request(method, url, data=body, headers=headers, timeout=10, allow_redirects=False)

    assert response.status_code < 500, (response.status_code, response.text)
    check_error_shape(response)
