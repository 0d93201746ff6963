"""A proxy in front of moto that loses replies: the request reaches DynamoDB (moto) and is applied,
then the connection is closed without a reply, as when a reply is lost on the network or a
timeout strikes after the write. botocore then retries the same request for real.

    with LostReplyProxy(endpoint) as proxy:
        proxy.lose("UpdateItem")             # the next UpdateItem's reply is lost
        proxy.lose("UpdateItem", after=1)    # and the one after the next that passes
        proxy.lose("UpdateItem", then=race)  # `race()` runs after it applied, before botocore retries
        store = DynamoStore(table, client=proxy.dynamodb())
        proxy.lose("DeleteSchedule")         # Scheduler's too, through proxy.client("scheduler")
"""

from __future__ import annotations

import http.client
import socket
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any
from urllib.parse import urlsplit

import boto3

from wakeup import aws


class LostReplyProxy:
    def __init__(self, upstream: str) -> None:
        self.upstream = urlsplit(upstream)
        self._to_lose: set[tuple[str, int]] = set()  # (operation, its n-th request since the start)
        self._then: dict[tuple[str, int], Callable[[], None]] = {}
        self.seen: list[str] = []  # each request's DynamoDB operation, in order
        self.lost: list[str] = []
        self._lock = threading.Lock()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                self._relay(self.headers.get("X-Amz-Target", "").rpartition(".")[2])

            def do_DELETE(self) -> None:
                # Scheduler's REST API: `DELETE /schedules/{Name}` is DeleteSchedule.
                self._relay("DeleteSchedule" if self.path.startswith("/schedules/") else "DELETE")

            def _relay(self, operation: str) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                status, headers, reply = proxy._forward(self.command, self.path, dict(self.headers.items()), body)
                if proxy._should_lose(operation):
                    # Applied upstream; the reply never comes back (after what is to happen first).
                    proxy._run_then()
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                self.send_response(status)
                for name, value in headers:
                    if name.lower() not in ("transfer-encoding", "connection", "content-length"):
                        self.send_header(name, value)
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, format: str, *args: object) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    def lose(self, operation: str, times: int = 1, *, after: int = 0, then: Callable[[], None] | None = None) -> None:
        """The replies of `times` requests of `operation` are lost (after they are applied): the next
        ones after those already to be lost and after `after` more that pass (a botocore retry).
        `then` runs once the first of them applied, before its connection closes (so before the
        retry): another request landing between a write and its retry."""
        with self._lock:
            planned = [n for op, n in self._to_lose if op == operation]
            start = max([self.seen.count(operation), *planned]) + after
            self._to_lose.update((operation, start + k) for k in range(1, times + 1))
            if then is not None:
                self._then[(operation, start + 1)] = then

    def _run_then(self) -> None:
        with self._lock:
            operation = self.lost[-1]
            then = self._then.pop((operation, self.seen.count(operation)), None)
        if then is not None:
            then()

    def dynamodb(self) -> Any:
        """A DynamoDB client through the proxy, configured as the functions' clients are (retries too)."""
        return self.client("dynamodb")

    def client(self, service: str) -> Any:
        """A client of `service` through the proxy (DynamoDB, or Scheduler's DeleteSchedule)."""
        return boto3.client(service, endpoint_url=self.url, config=aws.CLIENT_CONFIG)

    def _should_lose(self, operation: str) -> bool:
        with self._lock:
            self.seen.append(operation)
            if (operation, self.seen.count(operation)) in self._to_lose:
                self._to_lose.remove((operation, self.seen.count(operation)))
                self.lost.append(operation)
                return True
            return False

    def _forward(
        self, method: str, path: str, headers: dict[str, str], body: bytes
    ) -> tuple[int, list[tuple[str, str]], bytes]:
        connection = http.client.HTTPConnection(self.upstream.hostname, self.upstream.port, timeout=30)
        try:
            connection.request(method, path, body=body, headers=headers)
            response = connection.getresponse()
            return response.status, response.getheaders(), response.read()
        finally:
            connection.close()

    def __enter__(self) -> LostReplyProxy:
        self._thread.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()
