"""The benchmark's side of the wire: an HTTP client of the stack's API and a host to wake."""

from __future__ import annotations

import math
import selectors
import socket
import threading
import time
from collections import defaultdict
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from types import TracebackType

import requests

from wakeup.times import format_time
from wakeup.tokens import TokenKind, mint

REQUEST_TIMEOUT_S = 30
# Paths under this prefix answer 503 to their first call: a host that needs one retry.
FLAKY = "/flaky/"
WARM_UP_REQUESTS = 10
# A burst of wakes through Lambda's SQS scaling (without provisioned pollers: five batches, 300 more
# a minute) takes longer than a few wakes to deliver.
BURST_DELIVERY_TIMEOUT_S = 300
# After the last call, time for the caller to record it and the poller to delete its messages.
SETTLE_S = 1.5


def due_at(seconds_from_now: float) -> float:
    """A whole second at least `seconds_from_now` ahead (epoch seconds): many wakes at one second."""
    return float(math.ceil(time.time() + seconds_from_now))


def iso(epoch: float) -> str:
    return format_time(datetime.fromtimestamp(epoch, UTC))


def warm_up(api: Api, host: Host) -> None:
    """A few requests, so the handlers have made their clients before anything is measured."""
    for index in range(WARM_UP_REQUESTS):
        instance_id, token, _ = api.register(f"{host.url}/warm{index}")
        api.get(instance_id)
        api.wake(token, iso(time.time() + timedelta(days=1).total_seconds()))


# What the host answers: a status, no body, and the connection closed (the caller reads the status
# alone, and sends `Connection: close`).
_ANSWERS = {
    status: f"HTTP/1.1 {status} {reason}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".encode()
    for status, reason in ((200, "OK"), (400, "Bad Request"), (503, "Service Unavailable"))
}
_HEAD_END = b"\r\n\r\n"
_HEAD_BYTES = 16 * 1024  # a request's head longer than this is answered 400


class Host:
    """A host on 127.0.0.1 that answers `GET <path>/wake` and records when each call arrived.

    It stands for hosts on other machines, so it takes as little as it can of the cores that the
    stack shares with it: one thread and one selector for every connection, and of each request only
    its line read (http.server's thread a connection and header parsing cost several times as much:
    docs/benchmark.md, "Figures behind the code's choices").
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.calls: dict[str, list[float]] = defaultdict(list)
        # A burst of wakes due at one second connects all at once: with a short listen queue the
        # kernel drops the rest, and their callers resend only after a second.
        self._listener = socket.create_server(("127.0.0.1", 0), backlog=1024)
        self._listener.setblocking(False)
        self._stop_r, self._stop_w = socket.socketpair()
        self._selector = selectors.DefaultSelector()
        self._selector.register(self._listener, selectors.EVENT_READ)
        self._selector.register(self._stop_r, selectors.EVENT_READ)
        self._heads: dict[socket.socket, bytearray] = {}
        self._thread = threading.Thread(target=self._serve, name="bench-host", daemon=True)
        self._thread.start()
        self.url = f"http://127.0.0.1:{self._listener.getsockname()[1]}"

    def _serve(self) -> None:
        while True:
            for key, _ in self._selector.select():
                if key.fileobj is self._stop_r:
                    return
                if key.fileobj is self._listener:
                    self._accept()
                else:
                    self._read(key.fileobj)  # type: ignore[arg-type]  # only sockets are registered

    def _accept(self) -> None:
        while True:
            try:
                connection, _ = self._listener.accept()
            except OSError:  # none waiting (or a connection gone before it was taken): the next select
                return
            connection.setblocking(False)
            self._heads[connection] = bytearray()
            self._selector.register(connection, selectors.EVENT_READ)

    def _read(self, connection: socket.socket) -> None:
        head = self._heads[connection]
        try:
            data = connection.recv(4096)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        head += data
        if data and _HEAD_END not in head and len(head) < _HEAD_BYTES:
            return  # the rest of the head is still to come
        if data:
            status = self._answer(bytes(head), time.time()) if _HEAD_END in head else 400
            try:
                connection.send(_ANSWERS[status])  # a few bytes: the socket's buffer is empty
            except OSError:
                pass  # the caller has gone: its call was recorded as it arrived
        self._selector.unregister(connection)
        del self._heads[connection]
        connection.close()

    def _answer(self, head: bytes, arrived: float) -> int:
        method, _, rest = head.partition(b" ")
        target = rest.partition(b" ")[0].decode("latin-1")
        if method != b"GET" or not target.endswith("/wake"):
            return 400
        path = target.removesuffix("/wake")
        with self._lock:
            self.calls[path].append(arrived)
            first = len(self.calls[path]) == 1
        return 503 if first and path.startswith(FLAKY) else 200

    def wait_for(self, paths: Iterable[str], calls_each: int, deadline: float) -> bool:
        """Waits until every path has had `calls_each` calls, or `deadline` (monotonic) passes."""
        wanted = list(paths)
        while time.monotonic() < deadline:
            with self._lock:
                if all(len(self.calls.get(path, [])) >= calls_each for path in wanted):
                    return True
            time.sleep(0.02)
        return False

    def first_calls(self, paths: Iterable[str]) -> dict[str, float]:
        with self._lock:
            return {path: self.calls[path][0] for path in paths if self.calls.get(path)}

    def __enter__(self) -> Host:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self._stop_w.send(b"x")
        self._thread.join()
        for connection in self._heads:
            connection.close()
        for held in (self._selector, self._listener, self._stop_r, self._stop_w):
            held.close()


class Api:
    """The stack's HTTP API with one account's token; each call returns its duration in seconds.

    Each request opens a connection of its own (about 0.1 ms on loopback). On a kept-alive
    connection the local gateway's reply with a body stalls some 40 ms: it writes the headers and
    the body apart, and Nagle's algorithm holds the body until the client's delayed ACK of the
    headers. That stall belongs to neither the service nor API Gateway.
    """

    def __init__(self, url: str, account_token: str) -> None:
        self.url = url
        self._account = {"Authorization": f"Bearer {account_token}"}

    def register(self, host_url: str) -> tuple[str, str, float]:
        """A new instance at `host_url`: its id, its token, and the request's duration."""
        token = mint(TokenKind.INSTANCE)
        started = time.perf_counter()
        reply = requests.post(
            f"{self.url}/wakeup/instances",
            json={"url": host_url, "token": token},
            headers=self._account,
            timeout=REQUEST_TIMEOUT_S,
        )
        elapsed = time.perf_counter() - started
        if reply.status_code != 201:
            raise RuntimeError(f"POST /wakeup/instances answered {reply.status_code}: {reply.text}")
        return str(reply.json()["id"]), token, elapsed

    def try_register(self, host_url: str) -> tuple[int, float]:
        """A registration whatever its answer: the status (429 when throttled) and the duration."""
        started = time.perf_counter()
        reply = requests.post(
            f"{self.url}/wakeup/instances",
            json={"url": host_url, "token": mint(TokenKind.INSTANCE)},
            headers=self._account,
            timeout=REQUEST_TIMEOUT_S,
        )
        return reply.status_code, time.perf_counter() - started

    def get(self, instance_id: str) -> float:
        started = time.perf_counter()
        reply = requests.get(
            f"{self.url}/wakeup/instances/{instance_id}", headers=self._account, timeout=REQUEST_TIMEOUT_S
        )
        elapsed = time.perf_counter() - started
        if reply.status_code != 200:
            raise RuntimeError(f"GET /wakeup/instances/{{id}} answered {reply.status_code}: {reply.text}")
        return elapsed

    def wake(self, instance_token: str, at: str) -> float:
        started = time.perf_counter()
        reply = requests.put(
            f"{self.url}/wakeup/wake",
            json={"at": at},
            headers={"Authorization": f"Bearer {instance_token}"},
            timeout=REQUEST_TIMEOUT_S,
        )
        elapsed = time.perf_counter() - started
        if reply.status_code != 204:
            raise RuntimeError(f"PUT /wakeup/wake answered {reply.status_code}: {reply.text}")
        return elapsed
