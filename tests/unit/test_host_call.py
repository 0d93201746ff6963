"""`call_wake` against real HTTP servers on loopback, one per test."""

import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from urllib3.exceptions import NewConnectionError

from wakeup import __version__
from wakeup.addresses import HTTPS_ONLY, REFUSED_CALL, AddressPolicy
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


# -- the timeout bounds the whole call: lookup, every address, reply ----------------------------------
# A call must end within its timeout, or a second call could start while it runs (the claim's lease
# is only a little longer). The bounds below leave a loaded machine a second of slack; the calls they
# guard against run for 3 s (a lookup), 3 × 1 s (three silent addresses) and 6 s (a trickled reply).


def test_a_name_lookup_that_hangs_is_a_timeout_within_the_call_s_time() -> None:
    release = threading.Event()

    def hanging(host: str, port: int) -> list[str]:
        release.wait(3)
        return ["127.0.0.1"]

    started = time.monotonic()
    outcome = call_wake("http://slow-dns.test", INSTANCE_ID, timeout_s=0.5, resolver=hanging)
    elapsed = time.monotonic() - started
    release.set()

    assert outcome == CallOutcome(status=None, error="timed out after 0.5 s")
    assert elapsed < 1.5


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A port whose SYNs go unanswered: a listener that never accepts, its queue already full (Linux
    then drops further SYNs, as a firewall that drops packets would)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    port = listener.getsockname()[1]
    fillers = []
    for _ in range(4):  # the accept queue holds backlog + 1; the rest wait in vain
        filler = socket.socket()
        filler.setblocking(False)
        filler.connect_ex(("127.0.0.1", port))
        fillers.append(filler)
    time.sleep(0.1)  # the handshakes of the ones that fit complete
    yield port
    for sock in (*fillers, listener):
        sock.close()


def test_several_addresses_that_drop_packets_share_one_timeout(silent_port: int) -> None:
    started = time.monotonic()
    outcome = call_wake(
        f"http://silent.test:{silent_port}",
        INSTANCE_ID,
        timeout_s=1,
        resolver=lambda host, port: ["127.0.0.1", "127.0.0.1", "127.0.0.1"],
    )
    elapsed = time.monotonic() - started

    assert outcome.error is not None and outcome.status is None
    assert elapsed < 2


def test_a_reply_trickled_a_byte_at_a_time_is_cut_at_the_timeout(serve: Callable[[Answer], Host]) -> None:
    def trickle(handler: BaseHTTPRequestHandler) -> None:
        handler.wfile.write(b"HTTP/1.1 200 OK\r\n")
        for _ in range(60):  # each byte well within a socket read's timeout, the whole far past the call's
            handler.wfile.write(b"X")
            handler.wfile.flush()
            if host.release.wait(0.1):
                return

    host = serve(trickle)
    started = time.monotonic()
    outcome = call_wake(host.url, INSTANCE_ID, timeout_s=1)
    elapsed = time.monotonic() - started
    host.release.set()

    assert outcome == CallOutcome(status=None, error="timed out after 1 s")
    assert elapsed < 2


def test_the_body_is_not_waited_for(serve: Callable[[Answer], Host]) -> None:
    def endless_body(handler: BaseHTTPRequestHandler) -> None:
        handler.send_response(200)
        handler.send_header("Content-Length", "1000000")
        handler.end_headers()
        handler.wfile.write(b"x")
        handler.wfile.flush()
        host.release.wait(10)

    host = serve(endless_body)

    # then the call ends with the status line, well before the timeout a wait for the body would reach
    # (half of it: room for a loaded machine)
    timeout_s = 5
    started = time.monotonic()
    outcome = call_wake(host.url, INSTANCE_ID, timeout_s=timeout_s)

    assert outcome.ok
    assert time.monotonic() - started < timeout_s / 2


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


# -- addresses: resolved once, checked, connected to as checked ----------------------------------------

NAME = "rebind.test"


class ChangingDns:
    """A resolver whose answer for NAME changes after the first question (DNS rebinding). It stands
    in for `socket.getaddrinfo` too, so that a second lookup by anyone would get the second answer;
    addresses are passed to the real resolver, which looks nothing up for them."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, *answers: list[str]) -> None:
        self.answers = list(answers)
        self.questions = 0
        real = socket.getaddrinfo

        def getaddrinfo(host: str, port: object, *args: object, **kwargs: object) -> object:
            if host != NAME:
                return real(host, port, *args, **kwargs)  # type: ignore[arg-type]
            self.questions += 1
            answer = self.answers[min(self.questions, len(self.answers)) - 1]
            return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (address, port)) for address in answer]

        monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)


def serve_on(address: str, port: int, host: Host, start: bool = True) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            host.requests.append((self.path, {k.lower(): v for k, v in self.headers.items()}))
            host.answer(self)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer((address, port), Handler)
    if start:
        threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    return server


@pytest.fixture
def two_loopback_hosts() -> Iterator[tuple[Host, Host, int]]:
    """Hosts on 127.0.0.1 and 127.0.0.2, one port: the allowed one and the 'internal' one."""

    def ok(handler: BaseHTTPRequestHandler) -> None:
        handler.send_response(204)
        handler.end_headers()

    allowed, internal = Host(ok), Host(ok)
    first = serve_on("127.0.0.1", 0, allowed)
    port = first.server_address[1]
    second = serve_on("127.0.0.2", port, internal)
    yield allowed, internal, port
    for server in (first, second):
        server.shutdown()
        server.server_close()


# Only 127.0.0.1 is allowed back, so 127.0.0.2 stands for an internal range: no test ever leaves loopback.
INTERNAL_ONLY = AddressPolicy.of(allowed="127.0.0.1/32")


def test_a_name_that_rebinds_after_the_check_is_called_at_the_address_checked(
    monkeypatch: pytest.MonkeyPatch, two_loopback_hosts: tuple[Host, Host, int]
) -> None:
    allowed, internal, port = two_loopback_hosts
    dns = ChangingDns(monkeypatch, ["127.0.0.1"], ["127.0.0.2"])

    outcome = call_wake(f"http://{NAME}:{port}", INSTANCE_ID, timeout_s=5, addresses=INTERNAL_ONLY)

    assert outcome == CallOutcome(status=204, error=None)
    assert dns.questions == 1  # resolved once: the connection went to the address checked
    assert internal.requests == []
    [(path, headers)] = allowed.requests
    assert path == "/wake" and headers["host"] == f"{NAME}:{port}"  # the request still names the host


def test_a_name_that_resolves_to_a_denied_address_is_not_called(
    monkeypatch: pytest.MonkeyPatch, two_loopback_hosts: tuple[Host, Host, int]
) -> None:
    allowed, internal, port = two_loopback_hosts
    ChangingDns(monkeypatch, ["127.0.0.2"], ["127.0.0.1"])

    outcome = call_wake(f"http://{NAME}:{port}", INSTANCE_ID, timeout_s=5, addresses=INTERNAL_ONLY)

    assert outcome == CallOutcome(status=None, error=REFUSED_CALL, refused_address="127.0.0.2")
    assert outcome.refused
    assert allowed.requests == [] and internal.requests == []


def test_a_name_with_any_denied_address_among_its_answers_is_not_called(
    monkeypatch: pytest.MonkeyPatch, two_loopback_hosts: tuple[Host, Host, int]
) -> None:
    allowed, internal, port = two_loopback_hosts
    ChangingDns(monkeypatch, ["127.0.0.1", "127.0.0.2"])

    outcome = call_wake(f"http://{NAME}:{port}", INSTANCE_ID, timeout_s=5, addresses=INTERNAL_ONLY)

    assert outcome.error == REFUSED_CALL
    assert allowed.requests == [] and internal.requests == []


def test_a_denied_literal_address_is_not_called(two_loopback_hosts: tuple[Host, Host, int]) -> None:
    allowed, internal, port = two_loopback_hosts

    outcome = call_wake(f"http://127.0.0.2:{port}", INSTANCE_ID, timeout_s=5, addresses=INTERNAL_ONLY)

    assert outcome.refused and internal.requests == []


@pytest.mark.parametrize(
    ("policy", "error"),
    [
        (AddressPolicy.of(allowed="127.0.0.1/32", https_only=True), HTTPS_ONLY),
        (
            AddressPolicy.of(allowed="127.0.0.1/32", ports="443"),
            "url's port is not one this service calls: it calls ports 443",
        ),
    ],
)
def test_a_scheme_or_port_the_operator_narrowed_away_is_not_called(
    two_loopback_hosts: tuple[Host, Host, int], policy: AddressPolicy, error: str
) -> None:
    # Registered before the operator narrowed the settings: the call itself refuses it.
    allowed, _, port = two_loopback_hosts

    outcome = call_wake(f"http://127.0.0.1:{port}", INSTANCE_ID, timeout_s=5, addresses=policy)

    assert outcome == CallOutcome(status=None, error=error)
    assert allowed.requests == []


def test_a_name_that_does_not_resolve_is_named_so(monkeypatch: pytest.MonkeyPatch) -> None:
    def unknown(host: str, port: int) -> list[str]:
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    outcome = call_wake(f"http://{NAME}", INSTANCE_ID, timeout_s=5, addresses=INTERNAL_ONLY, resolver=unknown)

    assert outcome == CallOutcome(status=None, error="host name not found")


# -- HTTPS to a pinned address: SNI and the certificate check keep the host name -------------------------


def self_signed(tmp_path: Path, name: str) -> tuple[Path, Path]:
    """A certificate for `name` (its own CA) and its key, as PEM files."""
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    start = datetime.now(UTC) - timedelta(minutes=1)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(start + timedelta(hours=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(name)]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = tmp_path / f"{name}.pem", tmp_path / f"{name}.key"
    cert_path.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return cert_path, key_path


@pytest.fixture
def tls_host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Host, int, list[str]]]:
    """An HTTPS host on 127.0.0.1 with a certificate for NAME, trusted here (SSL_CERT_FILE, which
    OpenSSL's default paths follow), recording the server name each handshake asked for."""
    cert_path, key_path = self_signed(tmp_path, NAME)
    monkeypatch.setenv("SSL_CERT_FILE", str(cert_path))
    server_names: list[str] = []

    def ok(handler: BaseHTTPRequestHandler) -> None:
        handler.send_response(204)
        handler.end_headers()

    host = Host(ok)
    server = serve_on("127.0.0.1", 0, host, start=False)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert_path, key_path)
    context.sni_callback = lambda sock, name, ctx: server_names.append(name or "") and None
    server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    yield host, server.server_address[1], server_names
    server.shutdown()
    server.server_close()


def test_https_to_the_checked_address_sends_the_host_name_and_verifies_the_certificate_for_it(
    monkeypatch: pytest.MonkeyPatch, tls_host: tuple[Host, int, list[str]]
) -> None:
    host, port, server_names = tls_host
    dns = ChangingDns(monkeypatch, ["127.0.0.1"], ["127.0.0.2"])

    outcome = call_wake(f"https://{NAME}:{port}", INSTANCE_ID, timeout_s=5, addresses=INTERNAL_ONLY)

    assert outcome == CallOutcome(status=204, error=None)
    assert dns.questions == 1
    assert server_names == [NAME]
    [(_, headers)] = host.requests
    assert headers["host"] == f"{NAME}:{port}"


def test_https_to_a_host_whose_certificate_names_another_host_is_not_trusted(
    monkeypatch: pytest.MonkeyPatch, tls_host: tuple[Host, int, list[str]]
) -> None:
    host, port, _ = tls_host
    other = "other.test"
    real = socket.getaddrinfo

    def resolve_other(name: str, *args: Any, **kwargs: Any) -> Any:
        return real("127.0.0.1" if name == other else name, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", resolve_other)

    outcome = call_wake(f"https://{other}:{port}", INSTANCE_ID, timeout_s=5, addresses=INTERNAL_ONLY)

    assert outcome == CallOutcome(status=None, error="TLS certificate not trusted")
    assert host.requests == []
