"""Lambda's Runtime API, served to one execution environment on its own loopback port.

The environment's runtime interface client (`awslambdaric`, as in Lambda's Python runtime) polls
`GET /2018-06-01/runtime/invocation/next`, runs the handler on what it gets and posts the result to
`.../invocation/{id}/response` or `.../invocation/{id}/error`, or posts `.../init/error` when the
handler cannot be loaded. See "Using the Lambda runtime API for custom runtimes":
https://docs.aws.amazon.com/lambda/latest/dg/runtimes-api.html

One server per environment tells environments apart by port: `AWS_LAMBDA_RUNTIME_API` is a bare
`host:port`, and the client's paths are fixed. What the environment does is reported as
`RuntimeSignal`s on a queue its owner reads.
"""

from __future__ import annotations

import json
import queue
import re
import socket
import socketserver
import sys
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler
from typing import Any

LOOPBACK = "127.0.0.1"
_PREFIX = "/2018-06-01/runtime"
_INVOCATION_PATH = re.compile(rf"{_PREFIX}/invocation/([^/]+)/(response|error)")
ERROR_TYPE_HEADER = "Lambda-Runtime-Function-Error-Type"


@dataclass(frozen=True)
class Invocation:
    """One event for the environment, with the headers the runtime API sends along."""

    request_id: str
    payload: bytes
    deadline_ms: int
    function_arn: str
    trace_id: str


@dataclass(frozen=True)
class RuntimeSignal:
    """What the environment reported: `ready` (its first `next`: init is done), `response`, `error`
    (of an invocation, by request id), or `init_error`. `body` is what it posted."""

    kind: str
    request_id: str = ""
    body: bytes = b""
    error_type: str = ""


class _Server(socketserver.ThreadingMixIn, socketserver.TCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, api: RuntimeApi) -> None:
        self.api = api
        super().__init__((LOOPBACK, 0), _Handler)

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A connection cut by the environment's end (a timeout kills it) is nothing to report.
        if not isinstance(sys.exc_info()[1], OSError):
            super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # The client's requests and our replies are small and go back and forth: without TCP_NODELAY
    # each invocation waits about 40 ms on Nagle's algorithm against delayed ACKs.
    disable_nagle_algorithm = True
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        pass

    def do_GET(self) -> None:  # noqa: N802 - the names http.server dispatches to
        if self.path != f"{_PREFIX}/invocation/next":
            self._reply(404, {"errorMessage": "unknown path", "errorType": "InvalidRequest"})
            return
        invocation = self.server.api.next_invocation()
        if invocation is None:  # the environment is being stopped: its process is gone already
            self.close_connection = True
            return
        self._reply(
            200,
            invocation.payload,
            {
                "Lambda-Runtime-Aws-Request-Id": invocation.request_id,
                "Lambda-Runtime-Deadline-Ms": str(invocation.deadline_ms),
                "Lambda-Runtime-Invoked-Function-Arn": invocation.function_arn,
                "Lambda-Runtime-Trace-Id": invocation.trace_id,
            },
        )

    def do_POST(self) -> None:  # noqa: N802
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        error_type = self.headers.get(ERROR_TYPE_HEADER, "")
        if self.path == f"{_PREFIX}/init/error":
            self.server.api.signal(RuntimeSignal("init_error", body=body, error_type=error_type))
        elif match := _INVOCATION_PATH.fullmatch(self.path):
            request_id, outcome = match.groups()
            self.server.api.signal(RuntimeSignal(outcome, request_id, body, error_type))
        else:
            self._reply(404, {"errorMessage": "unknown path", "errorType": "InvalidRequest"})
            return
        self._reply(202, {"status": "OK"})

    def _reply(self, status: int, body: bytes | dict[str, Any], headers: dict[str, str] | None = None) -> None:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.send_response_only(status)
        # The client (its native part) waits forever on a `next` reply without a Content-Type.
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)


class RuntimeApi:
    """The runtime API of one environment: `hand()` it invocations, read `signals` for the outcomes."""

    def __init__(self) -> None:
        self.signals: queue.Queue[RuntimeSignal] = queue.Queue()
        self._invocations: queue.Queue[Invocation | None] = queue.Queue()
        self._ready = False
        self._server = _Server(self)
        self._thread = threading.Thread(target=self._serve, name="runtime-api", daemon=True)

    @property
    def address(self) -> str:
        """`host:port`, the value of `AWS_LAMBDA_RUNTIME_API`."""
        host, port = self._server.server_address[:2]
        return f"{host!s}:{port}"

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._invocations.put(None)  # releases a `next` that waits
        try:
            # Wakes the accept() below (closing alone would not, on Linux).
            self._server.socket.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._server.server_close()
        self._thread.join()

    def hand(self, invocation: Invocation) -> None:
        self._invocations.put(invocation)

    # --- called by the request handlers ---------------------------------------------------------

    def next_invocation(self) -> Invocation | None:
        if not self._ready:
            self._ready = True
            self.signal(RuntimeSignal("ready"))
        return self._invocations.get()

    def signal(self, signal: RuntimeSignal) -> None:
        self.signals.put(signal)

    def _serve(self) -> None:
        # A plain accept loop rather than serve_forever(), which polls twice a second while idle.
        while True:
            try:
                request, address = self._server.socket.accept()
            except OSError:
                return
            self._server.process_request(request, address)
