"""The local API Gateway answers as API Gateway's HTTP API does before any function runs: route
throttling from the template (429), and a plain 4xx for malformed HTTP, over raw sockets."""

from __future__ import annotations

import json
import random
import socket
import textwrap
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import requests
from localstack_helpers import ROOT, StartStack

from wakeup_awsfacts.api_gateway import ACCOUNT_BURST_LIMIT, ACCOUNT_RATE_LIMIT, RouteThrottle, api_throttles
from wakeup_awsfacts.template import Resolver, Template, load_template, parse_template
from wakeup_local.gateway.throttling import RouteBucket, route_buckets
from wakeup_local.stack import LocalStack

# --- route throttling ----------------------------------------------------------------------------


def _concurrent_gets(stack: LocalStack, path: str, clients: int) -> list[requests.Response]:
    def get(_: int) -> requests.Response:
        with requests.Session() as session:
            return session.get(f"{stack.url}{path}", timeout=10)

    with ThreadPoolExecutor(max_workers=clients) as pool:
        return list(pool.map(get, range(clients)))


def test_a_route_past_its_burst_is_answered_429_too_many_requests(module_stack: LocalStack) -> None:
    # given "GET /limited" with a burst of 5 and (practically) no refill, in the fixture template
    # when 12 clients call it at once
    replies = _concurrent_gets(module_stack, "/limited", 12)
    # then 5 pass and the rest get API Gateway's own 429
    statuses = sorted(reply.status_code for reply in replies)
    assert statuses == [201] * 5 + [429] * 7
    for reply in replies:
        if reply.status_code == 429:
            assert reply.json() == {"message": "Too Many Requests"}
            assert reply.headers["apigw-requestid"]
    # and another route has a bucket of its own
    assert requests.get(f"{module_stack.url}/items/x", timeout=10).status_code == 201


def test_the_unbounded_setting_lifts_route_throttles(start_stack: StartStack) -> None:
    stack = start_stack(env={"WAKEUP_LOCAL_UNBOUNDED": "1"})
    statuses = [reply.status_code for reply in _concurrent_gets(stack, "/limited", 12)]
    assert statuses == [201] * 12


def test_a_routes_bucket_refills_on_the_clock_it_is_given_up_to_its_burst() -> None:
    now = [100.0]
    bucket = RouteBucket(RouteThrottle(rate_per_s=2.0, burst=3), clock=lambda: now[0])
    assert [bucket.take() for _ in range(4)] == [True, True, True, False]
    now[0] += 0.5  # one token back
    assert [bucket.take(), bucket.take()] == [True, False]
    now[0] += 60  # never more than the burst
    assert [bucket.take() for _ in range(4)] == [True, True, True, False]


def test_a_burst_of_zero_lets_nothing_through() -> None:
    assert RouteBucket(RouteThrottle(rate_per_s=100.0, burst=0)).take() is False


THROTTLED_TEMPLATE = """
    Transform: AWS::Serverless-2016-10-31
    Parameters:
      Rate: {Type: Number, Default: 7}
    Globals:
      HttpApi:
        DefaultRouteSettings: {ThrottlingBurstLimit: 40}
    Resources:
      Api:
        Type: AWS::Serverless::HttpApi
        Properties:
          DefaultRouteSettings: {ThrottlingRateLimit: !Ref Rate, ThrottlingBurstLimit: 20}
          RouteSettings:
            "GET /slow": {ThrottlingBurstLimit: 2}
      Other:
        Type: AWS::Serverless::HttpApi
"""


def test_default_route_settings_apply_to_each_route_and_route_settings_override_them() -> None:
    template = Template(parse_template(textwrap.dedent(THROTTLED_TEMPLATE)), Path("/tmp"))
    resolver = Resolver(template, "s", rng=random.Random(1))
    api, other = str(resolver.ref("Api")), str(resolver.ref("Other"))
    buckets = route_buckets(
        api_throttles(template, resolver),
        [(api, "GET /fast"), (api, "POST /fast"), (api, "GET /slow"), (other, "GET /x"), ("", "GET /implicit")],
    )
    limits = {key: (bucket.throttle.rate_per_s, bucket.throttle.burst) for key, bucket in buckets.items()}
    assert limits == {
        (api, "GET /fast"): (7.0, 20),
        (api, "POST /fast"): (7.0, 20),
        (api, "GET /slow"): (7.0, 2),  # the route's own burst, the default's rate
        (other, "GET /x"): (ACCOUNT_RATE_LIMIT, 40),  # Globals, then the account's limit
        ("", "GET /implicit"): (ACCOUNT_RATE_LIMIT, 40),
    }
    assert buckets[(api, "GET /fast")] is not buckets[(api, "POST /fast")]
    assert ACCOUNT_BURST_LIMIT == 5000


def test_template_yamls_default_route_has_its_own_small_bucket_locally_too() -> None:
    # The $default route's throttle (template.yaml's RouteSettings) reaches the local gateway.
    template = load_template(ROOT / "template.yaml")
    resolver = Resolver(template, "s", rng=random.Random(1))
    api = str(resolver.ref("HttpApi"))
    buckets = route_buckets(api_throttles(template, resolver), [(api, "$default"), (api, "PUT /wakeup/wake")])
    limits = {route: (bucket.throttle.rate_per_s, bucket.throttle.burst) for (_, route), bucket in buckets.items()}
    assert limits == {"$default": (10.0, 20), "PUT /wakeup/wake": (10000.0, 5000)}


# --- malformed HTTP ------------------------------------------------------------------------------


def exchange(stack: LocalStack, raw: bytes, timeout_s: float = 5.0) -> tuple[int, dict[str, str], bytes]:
    """Sends raw bytes and reads until the server closes: the status, headers and body it answered."""
    address = urlsplit(stack.url)
    with socket.create_connection((address.hostname, address.port), timeout=timeout_s) as connection:
        connection.sendall(raw)
        received = b""
        while chunk := connection.recv(65536):
            received += chunk
    head, _, body = received.partition(b"\r\n\r\n")
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    headers = {name.lower(): value.strip() for name, _, value in (line.partition(":") for line in header_lines)}
    return int(status_line.split()[1]), headers, body


REQUEST_LINE_ONLY = {
    # Refused on the request line: nothing else is sent, so nothing is left unread at the close.
    "HTTP/2.0 in a request line": b"GET /items/x HTTP/2.0\r\n",
    "a request line of three words that is not HTTP": b"GET /items/x FTP/1.1\r\n",
}
WHOLE_HEAD = {
    "TRACE": b"TRACE /items/x HTTP/1.1\r\nHost: local\r\n\r\n",
    "a lowercase get": b"get /items/x HTTP/1.1\r\nHost: local\r\n\r\n",
    "a made-up method": b"BREW /items/x HTTP/1.1\r\nHost: local\r\n\r\n",
    "HTTP/0.9": b"GET /items/x\r\n\r\n",
    "a Content-Length that is not a number": b"POST /items HTTP/1.1\r\nHost: local\r\nContent-Length: ten\r\n\r\n",
    "a negative Content-Length": b"POST /items HTTP/1.1\r\nHost: local\r\nContent-Length: -1\r\n\r\n",
    "a signed Content-Length": b"POST /items HTTP/1.1\r\nHost: local\r\nContent-Length: +2\r\n\r\n",
    "conflicting Content-Length headers": (
        b"POST /items HTTP/1.1\r\nHost: local\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n"
    ),
    "a Content-Length listing two values": b"POST /items HTTP/1.1\r\nHost: local\r\nContent-Length: 2, 3\r\n\r\n",
    "Content-Length with chunked": (
        b"POST /items HTTP/1.1\r\nHost: local\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n"
    ),
    "a transfer coding other than chunked": b"POST /items HTTP/1.1\r\nHost: local\r\nTransfer-Encoding: gzip\r\n\r\n",
    "a negative chunk size": b"POST /items HTTP/1.1\r\nHost: local\r\nTransfer-Encoding: chunked\r\n\r\n-5\r\n",
    "a chunk size that is not hexadecimal": (
        b"POST /items HTTP/1.1\r\nHost: local\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"
    ),
    "headers over API Gateway's 10,240 bytes": (
        b"GET /items/x HTTP/1.1\r\nHost: local\r\nX-Big: " + b"a" * 10_300 + b"\r\n\r\n"
    ),
    "many headers over API Gateway's 10,240 bytes": (
        b"GET /items/x HTTP/1.1\r\nHost: local\r\n"
        + b"".join(b"X-H%d: %s\r\n" % (n, b"b" * 200) for n in range(60))
        + b"\r\n"
    ),
}


@pytest.mark.parametrize(
    "raw", [*REQUEST_LINE_ONLY.values(), *WHOLE_HEAD.values()], ids=[*REQUEST_LINE_ONLY, *WHOLE_HEAD]
)
def test_malformed_http_gets_a_plain_4xx_in_json_and_the_connection_closes(
    module_stack: LocalStack, raw: bytes
) -> None:
    status, headers, body = exchange(module_stack, raw)
    assert 400 <= status < 500
    assert headers["content-type"] == "application/json"
    assert headers["connection"] == "close"
    assert set(json.loads(body)) == {"message"}
    assert b"<html" not in body.lower() and b"<!doctype" not in body.lower()


def test_oversized_headers_are_431_and_a_bad_method_400(module_stack: LocalStack) -> None:
    assert exchange(module_stack, WHOLE_HEAD["headers over API Gateway's 10,240 bytes"])[0] == 431
    assert exchange(module_stack, WHOLE_HEAD["TRACE"])[0] == 400
    assert exchange(module_stack, REQUEST_LINE_ONLY["HTTP/2.0 in a request line"])[0] == 400


def test_headers_just_under_the_limit_pass(module_stack: LocalStack) -> None:
    raw = b"GET /items/x HTTP/1.1\r\nHost: local\r\nConnection: close\r\nX-Big: " + b"a" * 9_000 + b"\r\n\r\n"
    assert exchange(module_stack, raw)[0] == 201


def test_repeated_equal_content_lengths_and_good_chunks_are_served(module_stack: LocalStack) -> None:
    repeated = (
        b"POST /items HTTP/1.1\r\nHost: local\r\nConnection: close\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\n{}"
    )
    status, _, body = exchange(module_stack, repeated)
    assert (status, json.loads(body)["event"]["body"]) == (201, "{}")
    chunked = (
        b"POST /items HTTP/1.1\r\nHost: local\r\nConnection: close\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"3;ext=1\r\nabc\r\n2\r\nde\r\n0\r\n\r\n"
    )
    status, _, body = exchange(module_stack, chunked)
    assert (status, json.loads(body)["event"]["body"]) == (201, "abcde")
