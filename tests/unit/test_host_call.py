"""`call_wake` against real HTTP servers on loopback, one per test."""

import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from urllib3.exceptions import NewConnectionError

from wakeup import __version__
from wakeup.host_call import CallOutcome, call_wake, describe_failure, outcome_of_status

INSTANCE_ID = "6f1c2a9e-3a55-4b8e-9a57-0d2f4e1f7c11"

Answer = Callable[[BaseHTTPRequestHandler], None]


@dataclass
class Host:
    """A loopback HTTP server that answers every request with `answer` and records the requests."""

    answer: Answer
    requests: list[tuple[str, dict[str, str]]] = field(default_factory=list)
    release: threading.Event = field(default_factory=threading.Event)
    url: str = ""


@pytest.fixture
def serve() -> Iterator[Callable[[Answer], Host]]:
    servers: list[tuple[ThreadingHTTPServer, Host]] = []

    def start(answer: Answer) -> Host:
        host = Host(answer)

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                host.requests.append((self.path, {k.lower(): v for k, v in self.headers.items()}))
                host.answer(self)

            def log_message(self, format: str, *args: object) -> None:
                pass

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        server.daemon_threads = True
        threading.Thread(target=server.serve_forever, daemon=True).start()
        host.url = f"http://127.0.0.1:{server.server_address[1]}"
        servers.append((server, host))
        return host

    yield start
    for server, host in servers:
        host.release.set()
        server.shutdown()
        server.server_close()


def status(code: int, **headers: str) -> Answer:
    def answer(handler: BaseHTTPRequestHandler) -> None:
        handler.send_response(code)
        for name, value in headers.items():
            handler.send_header(name, value)
        handler.send_header("Content-Length", "0")
        handler.end_headers()

    return answer


def test_a_2xx_is_success_and_the_request_names_the_service_and_the_instance(serve: Callable[[Answer], Host]) -> None:
    host = serve(status(204))

    outcome = call_wake(host.url + "/app", INSTANCE_ID, timeout_s=5)

    assert outcome == CallOutcome(status=204, error=None)
    assert outcome.ok
    [(path, headers)] = host.requests
    assert path == "/app/wake"
    assert headers["user-agent"] == f"wakeup/{__version__}"
    assert headers["wakeup-instance"] == INSTANCE_ID
    assert "authorization" not in headers


def test_a_5xx_is_a_failure_named_by_its_status(serve: Callable[[Answer], Host]) -> None:
    host = serve(status(503))

    outcome = call_wake(host.url, INSTANCE_ID, timeout_s=5)

    assert outcome == CallOutcome(status=503, error="HTTP 503")
    assert not outcome.ok


def test_a_redirect_is_a_failure_and_is_not_followed(serve: Callable[[Answer], Host]) -> None:
    host = serve(status(302, Location="/elsewhere"))

    outcome = call_wake(host.url, INSTANCE_ID, timeout_s=5)

    assert outcome.error == "HTTP 302 (redirects are not followed)"
    assert [path for path, _ in host.requests] == ["/wake"]


def test_a_host_that_does_not_answer_in_time_is_a_timeout(serve: Callable[[Answer], Host]) -> None:
    host = serve(lambda handler: host.release.wait(10) and None)

    started = time.monotonic()
    outcome = call_wake(host.url, INSTANCE_ID, timeout_s=0.5)
    elapsed = time.monotonic() - started

    assert outcome == CallOutcome(status=None, error="timed out after 0.5 s")
    assert 0.5 <= elapsed < 2


def test_the_body_is_not_waited_for(serve: Callable[[Answer], Host]) -> None:
    def endless_body(handler: BaseHTTPRequestHandler) -> None:
        handler.send_response(200)
        handler.send_header("Content-Length", "1000000")
        handler.end_headers()
        handler.wfile.write(b"x")
        handler.wfile.flush()
        host.release.wait(10)

    host = serve(endless_body)

    started = time.monotonic()
    outcome = call_wake(host.url, INSTANCE_ID, timeout_s=3)

    assert outcome.ok
    assert time.monotonic() - started < 1


def test_a_port_nobody_listens_on_is_connection_refused() -> None:
    # Bound but not listening: the kernel refuses connections, and no other test can take the port.
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]

        outcome = call_wake(f"http://127.0.0.1:{port}", INSTANCE_ID, timeout_s=5)

    assert outcome == CallOutcome(status=None, error="connection refused")


def test_a_connection_closed_without_a_reply_is_named_so(serve: Callable[[Answer], Host]) -> None:
    def hang_up(handler: BaseHTTPRequestHandler) -> None:
        handler.close_connection = True
        handler.connection.shutdown(socket.SHUT_RDWR)

    host = serve(hang_up)

    outcome = call_wake(host.url, INSTANCE_ID, timeout_s=5)

    assert outcome.error in {"connection closed without a reply", "connection reset"}


def test_an_unknown_host_name_is_named_so() -> None:
    # Built by hand: resolving a real name would send traffic off this machine.
    failure = NewConnectionError(None, "Failed to establish a new connection")  # type: ignore[arg-type]
    failure.__cause__ = socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    assert describe_failure(failure, 10) == "host name not found"


@pytest.mark.parametrize(
    ("code", "error"),
    [(200, None), (299, None), (301, "HTTP 301 (redirects are not followed)"), (404, "HTTP 404"), (500, "HTTP 500")],
)
def test_only_2xx_statuses_are_success(code: int, error: str | None) -> None:
    assert outcome_of_status(code) == CallOutcome(status=code, error=error)
