"""A real HTTP host on loopback that records each call and answers as a test scripts it.

host.script(503, 503, Answer(delay_s=5), redirect("http://elsewhere.test/"))   # then 200s
calls = host.wait_for_calls(4, timeout=20)
"""

from __future__ import annotations

import socket
import struct
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Answer:
    """How the host answers one request: a status, after an optional delay, maybe a redirect."""

    status: int = 200
    delay_s: float = 0.0
    location: str | None = None
    body: bytes = b"ok"
    # Instead of answering, reset the connection (an RST, as a host that crashes mid-request sends).
    reset: bool = False


def hang(seconds: float) -> Answer:
    """An answer that comes only after `seconds` (longer than the caller's timeout: a timeout)."""
    return Answer(delay_s=seconds)


def reset() -> Answer:
    """No answer: the connection is reset once the request is read."""
    return Answer(reset=True)


def redirect(location: str, status: int = 302) -> Answer:
    return Answer(status=status, location=location)


@dataclass(frozen=True)
class Call:
    """One request the host received."""

    method: str
    path: str
    headers: dict[str, str]  # names in lower case
    monotonic: float  # time.monotonic() when it arrived
    wall: float  # time.time() when it arrived
    answer: Answer


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    # socketserver's default backlog of 5 drops the connections of a burst (a hundred wakes at one
    # second), which the callers' kernels retry only a second later.
    request_queue_size = 1024

    def __init__(self, host: WakeHost) -> None:
        self.host = host
        super().__init__(("127.0.0.1", 0), _Handler)

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A caller killed mid-call (the chaos test kills them) resets its connection: no fault here.
        if not isinstance(sys.exc_info()[1], ConnectionResetError):
            super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def do_GET(self) -> None:  # noqa: N802 - the names http.server dispatches to
        host = self.server.host
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        answer = host._record(self.command, self.path, {name.lower(): value for name, value in self.headers.items()})
        if answer.delay_s and host._closing.wait(answer.delay_s):
            return  # the host is closing: no answer at all
        if answer.reset:
            # A linger of zero makes close() send an RST rather than a FIN.
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.connection.close()
            self.close_connection = True
            return
        try:
            self.send_response(answer.status)
            if answer.location:
                self.send_header("Location", answer.location)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(answer.body)))
            self.end_headers()
            self.wfile.write(answer.body)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the caller gave up waiting (its timeout), as a real caller does

    do_POST = do_PUT = do_DELETE = do_HEAD = do_GET  # noqa: N815

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        pass


class WakeHost:
    """The host: `url` to register, `calls` received so far, a script of answers (200 once it runs out)."""

    def __init__(self) -> None:
        self._calls: list[Call] = []
        self._script: deque[Answer] = deque()
        self._path_scripts: dict[str, deque[Answer]] = {}
        self.default = Answer()
        # When set, how the host answers a request no script answers (a verifying host's check).
        self.respond: Callable[[str, dict[str, str]], Answer] | None = None
        self._changed = threading.Condition()
        self._closing = threading.Event()
        self._server = _Server(self)
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        """The host's base URL: the service calls `{url}/wake`."""
        return f"http://127.0.0.1:{self.port}"

    def url_for(self, name: str) -> str:
        """A URL of its own for one of several instances on this host (calls to `/{name}/wake`)."""
        return f"{self.url}/{name}"

    def script(self, *answers: int | Answer, path: str | None = None) -> None:
        """Queues answers for the next requests (to `path` only, when given); ints are statuses."""
        queue = self._script if path is None else self._path_scripts.setdefault(path, deque())
        with self._changed:
            queue.extend(Answer(status=answer) if isinstance(answer, int) else answer for answer in answers)

    @property
    def calls(self) -> list[Call]:
        with self._changed:
            return list(self._calls)

    def calls_to(self, path: str) -> list[Call]:
        return [call for call in self.calls if call.path == path]

    def wait_for_calls(self, count: int, timeout: float = 10.0, path: str | None = None) -> list[Call]:
        """The first `count` calls (to `path`, when given) once they have come; AssertionError after
        `timeout` seconds without them."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while True:
                calls = [call for call in self._calls if path is None or call.path == path]
                if len(calls) >= count:
                    return calls[:count]
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    where = f" to {path}" if path else ""
                    seen = [(call.method, call.path, call.answer.status) for call in calls]
                    raise AssertionError(f"expected {count} calls{where} within {timeout} s, got {len(calls)}: {seen}")
                self._changed.wait(remaining)

    def assert_no_calls_beyond(self, count: int, during: float, path: str | None = None) -> None:
        """Watches for `during` seconds that no more than `count` calls (to `path`) come; fails at the
        first one beyond."""
        deadline = time.monotonic() + during
        with self._changed:
            while True:
                calls = [call for call in self._calls if path is None or call.path == path]
                if len(calls) > count:
                    raise AssertionError(f"expected at most {count} calls, got {len(calls)}: {calls[count:]}")
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return
                self._changed.wait(remaining)

    def close(self) -> None:
        self._closing.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()

    def _record(self, method: str, path: str, headers: dict[str, str]) -> Answer:
        with self._changed:
            queue = self._path_scripts.get(path)
            if queue:
                answer = queue.popleft()
            elif self._script:
                answer = self._script.popleft()
            elif self.respond is not None:
                answer = self.respond(path, headers)
            else:
                answer = self.default
            self._calls.append(Call(method, path, headers, time.monotonic(), time.time(), answer))
            self._changed.notify_all()
        return answer


@contextmanager
def running_host() -> Iterator[WakeHost]:
    host = WakeHost()
    try:
        yield host
    finally:
        host.close()


@contextmanager
def closed_port_url() -> Iterator[str]:
    """A loopback URL on a port bound but not listening: a connection there is refused. The port is
    held until the block ends, so that no other socket takes it meanwhile (a port released at once
    may become a test server's, or an outgoing connection's, before the call it is for)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as held:
        held.bind(("127.0.0.1", 0))
        yield f"http://127.0.0.1:{held.getsockname()[1]}"
