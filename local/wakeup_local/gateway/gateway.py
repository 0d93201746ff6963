"""API Gateway HTTP API (payload format 2.0) in front of the template's functions, on loopback.

Routes come from the functions' `HttpApi` events: `GET /wakeup/instances/{id}` and the like, and a
`$default` route that takes whatever no other route matches (an unknown path, or a known path with
another method: HTTP APIs answer neither 404 nor 405 themselves). Without a `$default` route an
unmatched request gets API Gateway's own 404.

API Gateway answers some requests itself, in its own `{"message": ...}` shape, before any function
runs: a route's throttle exceeded (429, see throttling.py), and malformed HTTP (a plain 4xx: a
method HTTP APIs do not route, a request line that is not HTTP/1.x, a bad or conflicting
`Content-Length`, a bad chunk, request line and headers over 10,240 bytes). `http.server` would
answer those with an HTML page, or wait for a body that never comes; here they are refused at once.
"""

from __future__ import annotations

import base64
import json
import logging
import re
import socket
import threading
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, unquote

from wakeup_awsfacts.template import ACCOUNT_ID
from wakeup_local.gateway.throttling import RouteBucket
from wakeup_local.lambda_.functions import Functions, LocalFunction

log = logging.getLogger(__name__)

DEFAULT_ROUTE = "$default"
STAGE = "$default"
# API Gateway's payload limit for HTTP APIs.
MAX_BODY_BYTES = 10 * 1024 * 1024
# API Gateway's own reply when the function fails, times out or is throttled (HTTP APIs, payload
# format 2.0: https://docs.aws.amazon.com/apigateway/latest/developerguide/http-api-troubleshooting-lambda.html).
INTERNAL_ERROR = {"message": "Internal Server Error"}
_ANY_METHODS = {"ANY", "X-AMAZON-APIGATEWAY-ANY-METHOD"}
# Seconds an idle keep-alive connection stays open.
IDLE_CONNECTION_TIMEOUT_S = 30
# The methods an HTTP API routes (its `ANY` stands for these); method names are case-sensitive.
HTTP_API_METHODS = frozenset({"DELETE", "GET", "HEAD", "OPTIONS", "PATCH", "POST", "PUT"})
# "Quotas for configuring and running an HTTP API" (http-api-quotas): "Total combined size of request
# line and header values: 10240 bytes".
MAX_REQUEST_LINE_AND_HEADERS_BYTES = 10240
TOO_MANY_REQUESTS = {"message": "Too Many Requests"}
_DIGITS = re.compile(r"[0-9]+")
_HEX_DIGITS = re.compile(rb"[0-9A-Fa-f]+")


@dataclass(frozen=True)
class Route:
    """One route of the HTTP API: `method` is upper case or `ANY`; `path` a template or `$default`."""

    method: str
    path: str
    function: LocalFunction
    api: str = ""  # the id of the HTTP API it belongs to ("" for SAM's implicit one)

    @property
    def route_key(self) -> str:
        return DEFAULT_ROUTE if self.path == DEFAULT_ROUTE else f"{self.method} {self.path}"

    @property
    def _segments(self) -> list[str]:
        return self.path.strip("/").split("/") if self.path.strip("/") else []

    def specificity(self) -> tuple[int, int, int]:
        """Sorts the most specific route first: no greedy variable, fewest variables, a named method."""
        segments = self._segments
        greedy = sum(1 for segment in segments if segment.endswith("+}"))
        variables = sum(1 for segment in segments if segment.startswith("{"))
        return (greedy, variables, 1 if self.method == "ANY" else 0)

    def match(self, method: str, raw_path: str) -> dict[str, str] | None:
        """The path parameters when the request matches this route, else None."""
        if self.path == DEFAULT_ROUTE or self.method not in ("ANY", method):
            return None
        parts = raw_path.strip("/").split("/") if raw_path.strip("/") else []
        parameters: dict[str, str] = {}
        for index, segment in enumerate(self._segments):
            variable = re.fullmatch(r"\{([^}+]+)(\+?)\}", segment)
            if variable and variable.group(2):  # `{proxy+}` takes the rest, at least one segment
                if index >= len(parts):
                    return None
                parameters[variable.group(1)] = unquote("/".join(parts[index:]))
                return parameters
            if index >= len(parts):
                return None
            if variable:
                if not parts[index]:
                    return None
                parameters[variable.group(1)] = unquote(parts[index])
            elif segment != parts[index]:
                return None
        return parameters if len(parts) == len(self._segments) else None


def routes_from(functions: Functions) -> list[Route]:
    """The routes the functions' `HttpApi` events declare (their properties already resolved)."""
    routes = []
    for function in functions:
        for event_name, event in function.spec.events.items():
            if event.get("Type") != "HttpApi":
                continue
            properties = event.get("Properties") or {}
            if str(properties.get("PayloadFormatVersion", "2.0")) != "2.0":
                log.warning("%s.%s: only payload format 2.0 is served locally", function.name, event_name)
            path = str(properties.get("Path", DEFAULT_ROUTE))
            method = str(properties.get("Method", "ANY")).upper()
            api = str(properties.get("ApiId") or "")
            routes.append(Route("ANY" if method in _ANY_METHODS else method, path, function, api))
    return routes


def select_route(routes: Iterable[Route], method: str, raw_path: str) -> tuple[Route, dict[str, str]] | None:
    """The route a request takes (the most specific match, else `$default`) and its path parameters."""
    matches = []
    default = None
    for route in routes:
        if route.path == DEFAULT_ROUTE:
            default = default or route
            continue
        parameters = route.match(method, raw_path)
        if parameters is not None:
            matches.append((route, parameters))
    if matches:
        return min(matches, key=lambda match: match[0].specificity())
    return (default, {}) if default else None


def build_event(
    *,
    route: Route,
    path_parameters: dict[str, str],
    method: str,
    raw_path: str,
    raw_query: str,
    headers: Iterable[tuple[str, str]],
    body: bytes,
    source_ip: str,
    api_id: str,
    request_id: str,
    now: datetime,
) -> dict[str, Any]:
    """The payload format 2.0 event API Gateway would send for this request."""
    merged: dict[str, str] = {}
    cookies: list[str] = []
    for name, value in headers:
        key = name.lower()
        if key == "cookie":
            cookies.extend(part.strip() for part in value.split(";") if part.strip())
            continue
        merged[key] = f"{merged[key]},{value}" if key in merged else value
    query: dict[str, str] = {}
    for name, value in parse_qsl(raw_query, keep_blank_values=True):
        query[name] = f"{query[name]},{value}" if name in query else value
    host = merged.get("host", "localhost")
    # HTTP APIs hand the path over percent-decoded (REST APIs and function URLs do not).
    path = unquote(raw_path)
    event: dict[str, Any] = {
        "version": "2.0",
        "routeKey": route.route_key,
        "rawPath": path,
        "rawQueryString": raw_query,
        "headers": merged,
        "requestContext": {
            "accountId": ACCOUNT_ID,
            "apiId": api_id,
            "domainName": host,
            "domainPrefix": host.split(".")[0],
            "http": {
                "method": method,
                "path": path,
                "protocol": "HTTP/1.1",
                "sourceIp": source_ip,
                "userAgent": merged.get("user-agent", ""),
            },
            "requestId": request_id,
            "routeKey": route.route_key,
            "stage": STAGE,
            "time": now.strftime("%d/%b/%Y:%H:%M:%S +0000"),
            "timeEpoch": int(now.timestamp() * 1000),
        },
        "isBase64Encoded": False,
    }
    if cookies:
        event["cookies"] = cookies
    if query:
        event["queryStringParameters"] = query
    if path_parameters:
        event["pathParameters"] = path_parameters
    if body:
        try:
            event["body"] = body.decode("utf-8")
        except UnicodeDecodeError:  # binary: API Gateway hands it over base64-encoded
            event["body"] = base64.b64encode(body).decode("ascii")
            event["isBase64Encoded"] = True
    return event


@dataclass(frozen=True)
class HttpResponse:
    status: int
    headers: list[tuple[str, str]]
    body: bytes


def response_from(result: Any) -> HttpResponse:
    """The HTTP response API Gateway makes of a handler's result (payload format 2.0).

    Raises ValueError for a result API Gateway could not turn into a response.
    """
    if not (isinstance(result, dict) and "statusCode" in result):
        # Without a status code, API Gateway answers 200 with the result as a JSON body.
        return HttpResponse(200, [("content-type", "application/json")], json.dumps(result).encode())
    status = result["statusCode"]
    if not isinstance(status, int) or isinstance(status, bool) or not 100 <= status <= 599:
        raise ValueError(f"statusCode {status!r} is not an HTTP status")
    headers = [(str(name), str(value)) for name, value in (result.get("headers") or {}).items()]
    headers += [("set-cookie", str(cookie)) for cookie in result.get("cookies") or []]
    raw_body = result.get("body")
    if raw_body is None:
        body = b""
    elif result.get("isBase64Encoded"):
        body = base64.b64decode(str(raw_body), validate=True)
    else:
        body = str(raw_body).encode("utf-8")
    return HttpResponse(status, headers, body)


class _Server(ThreadingHTTPServer):
    """Keeps its open connections, so stopping closes idle keep-alive ones as well."""

    daemon_threads = True
    # socketserver's default backlog of 5 drops connections of a burst of requests, which clients
    # retry only a second later.
    request_queue_size = 1024

    def __init__(self, address: tuple[str, int], gateway: Gateway) -> None:
        self.gateway = gateway
        self._connections: set[socket.socket] = set()
        self._connections_lock = threading.Lock()
        super().__init__(address, _RequestHandler)

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._connections_lock:
            self._connections.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self._connections_lock:
            self._connections.discard(request)
        super().shutdown_request(request)

    def close_connections(self) -> None:
        with self._connections_lock:
            connections = list(self._connections)
        for connection in connections:
            try:
                connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass  # already closed by the other end


class _RequestHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    timeout = IDLE_CONNECTION_TIMEOUT_S
    # Headers and body go out in two writes; without this, Nagle's algorithm holds the body back
    # for the client's delayed ACK (about 40 ms) on a kept-alive connection.
    disable_nagle_algorithm = True
    server: _Server

    def do_GET(self) -> None:  # noqa: N802 - the names http.server dispatches to
        self._handle()

    do_POST = do_PUT = do_DELETE = do_PATCH = do_HEAD = do_OPTIONS = do_GET  # noqa: N815

    def version_string(self) -> str:
        return "wakeup-local"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        log.debug("%s %s", self.address_string(), format % args)

    def parse_request(self) -> bool:
        """http.server's parsing, then what API Gateway refuses besides: other methods, HTTP/0.9."""
        if not super().parse_request():
            return False
        if self.request_version not in ("HTTP/1.0", "HTTP/1.1") or self.command not in HTTP_API_METHODS:
            self.send_error(400)
            return False
        size = len(self.requestline) + sum(len(value) for value in self.headers.values())
        if size > MAX_REQUEST_LINE_AND_HEADERS_BYTES:
            self.send_error(431)
            return False
        return True

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """http.server's own refusals in API Gateway's shape: JSON, never an HTML page, and 4xx since
        the fault is the request's (`HTTP/2.0` in a request line, a method it has no handler for)."""
        if code >= 500:
            code = 400
        self._refuse(code, self.responses[code][0])

    def _handle(self) -> None:
        body = self._read_body()
        if body is None:
            return
        response = self.server.gateway.handle(
            method=self.command,
            target=self.path,
            headers=list(self.headers.items()),
            body=body,
            source_ip=self.client_address[0],
        )
        self.send_response(response.status)
        for name, value in response.headers:
            if name.lower() not in ("content-length", "connection", "transfer-encoding"):
                self.send_header(name, value)
        self.send_header("Content-Length", str(len(response.body)))
        if self.close_connection:  # the client asked to close: say so, as HTTP/1.1 wants
            self.send_header("Connection", "close")
        self.end_headers()
        if self.command != "HEAD" and response.body:
            self.wfile.write(response.body)

    def _read_body(self) -> bytes | None:
        """The request's body, or None once a 4xx has been sent and the connection is to close."""
        encodings = self.headers.get_all("Transfer-Encoding") or []
        lengths = self.headers.get_all("Content-Length") or []
        if encodings:
            codings = [coding.strip().lower() for coding in ",".join(encodings).split(",")]
            # Both framings at once is how requests are smuggled past a proxy (RFC 9112, 6.3).
            if lengths or codings != ["chunked"]:
                self._refuse(400, "Bad Request")
                return None
            return self._read_chunked()
        values = {value.strip() for header in lengths for value in header.split(",")}
        if len(values) > 1 or not all(_DIGITS.fullmatch(value) for value in values):
            self._refuse(400, "Bad Request")  # lengths that conflict, or one that is not a number
            return None
        length = int(values.pop()) if values else 0
        if length > MAX_BODY_BYTES:
            self._refuse(413, "Request Entity Too Large")
            return None
        body = self.rfile.read(length) if length > 0 else b""
        if len(body) < length:
            self._refuse(400, "Bad Request")  # the client stopped short of its Content-Length
            return None
        return body

    def _read_chunked(self) -> bytes | None:
        chunks: list[bytes] = []
        total = 0
        while True:
            size_line = self.rfile.readline(1024).split(b";")[0].strip()
            if not _HEX_DIGITS.fullmatch(size_line):  # negative, empty or not hexadecimal
                self._refuse(400, "Bad Request")
                return None
            size = int(size_line, 16)
            if size == 0:
                while self.rfile.readline(1024).strip():  # trailers
                    pass
                return b"".join(chunks)
            total += size
            if total > MAX_BODY_BYTES:
                self._refuse(413, "Request Entity Too Large")
                return None
            chunk = self.rfile.read(size)
            if len(chunk) < size or self.rfile.readline(1024) not in (b"\r\n", b"\n"):
                self._refuse(400, "Bad Request")
                return None
            chunks.append(chunk)

    def _refuse(self, status: int, message: str) -> None:
        body = json.dumps({"message": message}).encode()
        # A request line http.server read as HTTP/0.9 (or none at all) would get no status line.
        if self.request_version not in ("HTTP/1.0", "HTTP/1.1"):
            self.request_version = "HTTP/1.1"
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Connection", "close")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)
        self.close_connection = True


class Gateway:
    """The HTTP API on `127.0.0.1:port` (0: a free port), calling the functions in-process."""

    def __init__(self, routes: list[Route], port: int = 0, host: str = "127.0.0.1", api_id: str = "local") -> None:
        self.routes = routes
        self.api_id = api_id
        # Route throttles by (API, route key); a route without one is not throttled.
        self.buckets: dict[tuple[str, str], RouteBucket] = {}
        self._server = _Server((host, port), self)
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        host = self._server.server_address[0]
        return f"http://{host!s}:{self.port}"

    def start(self) -> None:
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, name="gateway", daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        if self._thread is not None:
            self._server.shutdown()
            self._thread.join()
            self._thread = None
        self._server.server_close()
        self._server.close_connections()

    def handle(
        self, *, method: str, target: str, headers: list[tuple[str, str]], body: bytes, source_ip: str
    ) -> HttpResponse:
        raw_path, _, raw_query = target.partition("?")
        raw_query = raw_query.partition("#")[0]
        request_id = base64.urlsafe_b64encode(uuid.uuid4().bytes[:12]).decode().rstrip("=")
        selected = select_route(self.routes, method, raw_path)
        if selected is None:
            return _json_response(404, {"message": "Not Found"}, request_id)
        route, path_parameters = selected
        bucket = self.buckets.get((route.api, route.route_key))
        if bucket is not None and not bucket.take():
            log.info("%s %s -> 429 (route %s throttled)", method, raw_path, route.route_key)
            return _json_response(429, TOO_MANY_REQUESTS, request_id)
        event = build_event(
            route=route,
            path_parameters=path_parameters,
            method=method,
            raw_path=raw_path,
            raw_query=raw_query,
            headers=headers,
            body=body,
            source_ip=source_ip,
            api_id=self.api_id,
            request_id=request_id,
            now=datetime.now(UTC),
        )
        started = time.monotonic()
        try:
            # A synchronous invocation: throttled at the function's reserved concurrency, as Lambda's.
            response = response_from(route.function.invoke(event, throttle=True))
        except Exception as exc:
            # API Gateway answers a failed invocation with a 500 of its own; the error goes to the
            # log (the function's own trace is in its log already), never into the reply.
            log.error("%s failed on %s %s: %s", route.function.spec.logical_id, method, raw_path, exc)
            return _json_response(500, INTERNAL_ERROR, request_id)
        log.info(
            "%s %s -> %d (%s, %.0f ms)",
            method,
            raw_path,
            response.status,
            route.function.name,
            (time.monotonic() - started) * 1000,
        )
        return HttpResponse(response.status, [*response.headers, ("apigw-requestid", request_id)], response.body)


def _json_response(status: int, body: dict[str, str], request_id: str) -> HttpResponse:
    headers = [("content-type", "application/json"), ("apigw-requestid", request_id)]
    return HttpResponse(status, headers, json.dumps(body).encode())
