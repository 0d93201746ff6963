"""Fixtures for the client's tests: the service under test (the fake or the local stack), and small
HTTP servers on loopback that misbehave in the ways a client must survive."""

from __future__ import annotations

import socket
import threading
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import requests

from wakeup_client import InstanceClient, WakeupClient
from wakeup_client.testing import FakeWakeupService


@dataclass
class ServiceUnderTest:
    """A wakeup service the contract suite runs against: the same assertions for both."""

    name: str
    url: str
    session: requests.Session
    mint_account: Callable[[], str]
    fake: FakeWakeupService | None = None

    def account(self, token: str | None = None) -> WakeupClient:
        """A client for a fresh account (or the account of ``token``)."""
        return WakeupClient(self.url, token or self.mint_account(), session=self.session)

    def host(self, token: str) -> InstanceClient:
        return InstanceClient(self.url, token, session=self.session)


@pytest.fixture(params=["fake", "stack"])
def service(request: pytest.FixtureRequest) -> Iterator[ServiceUnderTest]:
    """The fake, then the local stack (the ``stack`` fixture of tests/conftest.py)."""
    if request.param == "fake":
        fake = FakeWakeupService()
        session = fake.session()
        yield ServiceUnderTest("fake", fake.url, session, fake.mint_account, fake)
    else:
        stack = request.getfixturevalue("stack")
        session = requests.Session()
        yield ServiceUnderTest(
            "stack", stack.url, session, lambda: stack.mint_account(f"client-test-{uuid.uuid4().hex[:12]}")
        )
    session.close()


@pytest.fixture
def host_url() -> Callable[[], str]:
    """Makes host URLs on loopback that nothing listens on (port 9, discard): should the service
    ever call one, the call stays on this machine and is refused."""
    return lambda: f"http://127.0.0.1:9/host-{uuid.uuid4().hex[:12]}"


# --- misbehaving servers on loopback -----------------------------------------------------------


# What a loopback server answers: a status, headers and a body.
Answer = tuple[int, dict[str, str], bytes]


@dataclass(frozen=True)
class Received:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class LoopbackServer:
    """An HTTP server on 127.0.0.1 answering every request with ``answer``, recording each one."""

    url: str
    received: list[Received]
    server: ThreadingHTTPServer


def _serve(answer: Callable[[Received], Answer]) -> LoopbackServer:
    received: list[Received] = []

    class Handler(BaseHTTPRequestHandler):
        def _answer(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            request = Received(self.command, self.path, dict(self.headers.items()), self.rfile.read(length))
            received.append(request)
            status, headers, body = answer(request)
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = do_PUT = do_DELETE = _answer

        def log_message(self, format: str, *args: object) -> None:
            pass  # keep the test output clean

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    return LoopbackServer(f"http://127.0.0.1:{server.server_address[1]}", received, server)


@pytest.fixture
def loopback_server() -> Iterator[Callable[[Callable[[Received], Answer]], LoopbackServer]]:
    """Start servers answering as a function says; each is stopped at the end of the test."""
    started: list[LoopbackServer] = []

    def start(answer: Callable[[Received], Answer]) -> LoopbackServer:
        started.append(_serve(answer))
        return started[-1]

    yield start
    for running in started:
        running.server.shutdown()
        running.server.server_close()


@pytest.fixture
def silent_server() -> Iterator[str]:
    """The URL of a server that accepts connections and never answers."""
    listener = socket.create_server(("127.0.0.1", 0))
    # Never accepted: the kernel completes the handshake from its backlog, and nothing replies.
    yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    listener.close()


@pytest.fixture
def closed_port_url() -> Iterator[str]:
    """The URL of a loopback port bound but not listening, held for the test: a connection there is
    refused, and no other socket takes the port meanwhile."""
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        yield f"http://127.0.0.1:{held.getsockname()[1]}"
