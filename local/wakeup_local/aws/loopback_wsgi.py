"""A small HTTP/1.1 server for one WSGI application on loopback: moto's, in the local stack.

werkzeug's development server, which moto's own server runs, parses each request's headers with
the email package, builds its environment and reply through several layers, and writes a reply in
pieces: under a burst of wakes, a large share of moto's process's CPU, under the GIL the handlers'
requests share (docs/benchmark.md, "The local stack"). This server reads a request with a few
`readline`s, builds the same WSGI environment as werkzeug does (what moto reads of it: the method,
the raw path, the headers without underscores), gives the application the whole body at once, and
writes the whole reply in one `sendall`.

One thread per connection, as werkzeug's threaded server: the handlers' clients keep their
connections open, and a long poll (SQS's `ReceiveMessage`) holds its connection's thread while it
waits. Connections stay open between requests (HTTP/1.1), and replies always say their length.
"""

from __future__ import annotations

import io
import logging
import socket
import socketserver
import sys
import threading
from collections.abc import Callable, Iterable
from email.utils import formatdate
from http import HTTPStatus
from typing import IO, Any, cast
from urllib.parse import unquote

from werkzeug.serving import DechunkedInput

log = logging.getLogger(__name__)

StartResponse = Callable[..., Callable[[bytes], None]]
WsgiApp = Callable[[dict[str, Any], StartResponse], Iterable[bytes]]

# The longest request line or header line read; longer ones are refused (werkzeug's, via http.server).
MAX_LINE = 65536
MAX_HEADERS = 100
# The kernel's queue of connections not yet accepted: a burst of wakes opens more at once than
# the default of 5 (or werkzeug's 128), and a dropped connection is resent only after a second.
LISTEN_BACKLOG = 1024


class _BadRequest(Exception):
    """A request this server cannot read: answered 400, then the connection is closed."""


class LoopbackWsgiServer(socketserver.ThreadingTCPServer):
    """Serves `app` on `host`, port 0 for any free one (`port` once bound)."""

    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = LISTEN_BACKLOG

    def __init__(self, host: str, port: int, app: WsgiApp) -> None:
        self.app = app
        super().__init__((host, port), _Connection)

    @property
    def port(self) -> int:
        return int(self.server_address[1])

    def serve_in_thread(self, name: str) -> threading.Thread:
        thread = threading.Thread(target=self.serve_forever, name=name, daemon=True)
        thread.start()
        return thread


class _Connection(socketserver.StreamRequestHandler):
    server: LoopbackWsgiServer

    def setup(self) -> None:
        # A reply goes out in one write; without Nagle's algorithm it is not held back waiting for
        # the client's delayed ACK of the one before.
        self.request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        super().setup()

    def handle(self) -> None:
        try:
            while self._serve_one():
                pass
        except (ConnectionError, TimeoutError):
            pass  # the client went away
        except _BadRequest as error:
            self._write(_reply("400 Bad Request", [("Content-Type", "text/plain")], str(error).encode(), close=True))

    def _serve_one(self) -> bool:
        """Answers one request; whether the connection stays open for another."""
        request_line = self.rfile.readline(MAX_LINE + 1)
        if request_line in (b"\r\n", b"\n"):  # one empty line before a request is allowed (RFC 9112, 2.2)
            request_line = self.rfile.readline(MAX_LINE + 1)
        if not request_line:
            return False
        try:
            method, target, version = request_line.decode("latin-1").split()
        except ValueError:
            raise _BadRequest(f"bad request line {request_line[:100]!r}") from None
        if len(request_line) > MAX_LINE or not version.startswith("HTTP/1."):
            raise _BadRequest("request line too long or not HTTP/1.x")
        environ = self._environ(method, target, version)
        keep_alive = _keep_alive(version, environ.get("HTTP_CONNECTION", ""))
        status, headers, body = _call(self.server.app, environ)
        if any(name.lower() == "connection" and value.lower() == "close" for name, value in headers):
            keep_alive = False
        if method == "HEAD":
            body = b""
        elif not any(name.lower() == "content-length" for name, value in headers):
            headers.append(("Content-Length", str(len(body))))
        self._write(_reply(status, headers, body, close=not keep_alive))
        return keep_alive

    def _environ(self, method: str, target: str, version: str) -> dict[str, Any]:
        """The WSGI environment werkzeug's server builds (`WSGIRequestHandler.make_environ`)."""
        path, _, query = target.partition("?")
        host, port = self.server.server_address[:2]
        environ: dict[str, Any] = {
            "wsgi.version": (1, 0),
            "wsgi.url_scheme": "http",
            "wsgi.errors": sys.stderr,
            "wsgi.multithread": True,
            "wsgi.multiprocess": False,
            "wsgi.run_once": False,
            "SERVER_SOFTWARE": "wakeup-local",
            "REQUEST_METHOD": method,
            "SCRIPT_NAME": "",
            "PATH_INFO": _wsgi_string(unquote(path)),
            "QUERY_STRING": _wsgi_string(query),
            "REQUEST_URI": _wsgi_string(target),
            "RAW_URI": _wsgi_string(target),
            "REMOTE_ADDR": self.client_address[0],
            "REMOTE_PORT": self.client_address[1],
            "SERVER_NAME": str(host),
            "SERVER_PORT": str(port),
            "SERVER_PROTOCOL": version,
        }
        for _ in range(MAX_HEADERS + 1):
            line = self.rfile.readline(MAX_LINE + 1)
            if line in (b"\r\n", b"\n", b""):
                break
            name, colon, value = line.decode("latin-1").partition(":")
            if not colon or len(line) > MAX_LINE:
                raise _BadRequest(f"bad header line {line[:100]!r}")
            if "_" in name:  # werkzeug drops them: WSGI could not tell X_Foo from X-Foo
                continue
            key = name.strip().upper().replace("-", "_")
            if key not in ("CONTENT_TYPE", "CONTENT_LENGTH"):
                key = f"HTTP_{key}"
            value = value.strip()
            environ[key] = f"{environ[key]},{value}" if key in environ else value
        else:
            raise _BadRequest(f"more than {MAX_HEADERS} headers")
        if environ.get("HTTP_EXPECT", "").lower() == "100-continue" and version == "HTTP/1.1":
            self._write(b"HTTP/1.1 100 Continue\r\n\r\n")
        environ["wsgi.input"] = io.BytesIO(self._body(environ))
        return environ

    def _body(self, environ: dict[str, Any]) -> bytes:
        """The whole body, read now: the next request starts where it ends, read or not."""
        if environ.get("HTTP_TRANSFER_ENCODING", "").lower() == "chunked":
            try:
                body = DechunkedInput(cast(IO[bytes], self.rfile)).read() or b""
            except OSError as error:
                raise _BadRequest(str(error)) from None
            del environ["HTTP_TRANSFER_ENCODING"]
            environ["CONTENT_LENGTH"] = str(len(body))
            return body
        try:
            length = int(environ.get("CONTENT_LENGTH") or 0)
        except ValueError:
            raise _BadRequest("bad Content-Length") from None
        body = self.rfile.read(length) if length > 0 else b""
        if len(body) < length:
            raise ConnectionError("the client closed the connection in the body")
        return body

    def _write(self, data: bytes) -> None:
        self.request.sendall(data)


def _wsgi_string(text: str) -> str:
    """As werkzeug passes a request's path and query to the application (its `_wsgi_encoding_dance`)."""
    return text.encode().decode("latin-1")


def _keep_alive(version: str, connection: str) -> bool:
    tokens = {token.strip().lower() for token in connection.split(",")}
    return "keep-alive" in tokens if version == "HTTP/1.0" else "close" not in tokens


def _call(app: WsgiApp, environ: dict[str, Any]) -> tuple[str, list[tuple[str, str]], bytes]:
    """The application's status, headers and whole body; a 500 if it raised before answering."""
    answer: list[Any] = []
    written: list[bytes] = []

    def start_response(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Callable[[bytes], None]:
        answer[:] = [status, list(headers)]
        return written.append

    try:
        result = app(environ, start_response)
        try:
            written.extend(chunk for chunk in result if chunk)
        finally:
            close = getattr(result, "close", None)
            if close is not None:
                close()
    except Exception:
        log.exception("%s %s failed", environ["REQUEST_METHOD"], environ["RAW_URI"])
        return "500 Internal Server Error", [("Content-Type", "text/plain")], b"Internal Server Error"
    if not answer:
        return "500 Internal Server Error", [("Content-Type", "text/plain")], b"the application did not answer"
    return answer[0], answer[1], b"".join(written)


def _reply(status: str, headers: list[tuple[str, str]], body: bytes, close: bool) -> bytes:
    lines = [f"HTTP/1.1 {status}", f"Date: {formatdate(usegmt=True)}"]
    lines += [f"{name}: {value}" for name, value in headers]
    if close:
        lines.append("Connection: close")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


def status_line(code: int) -> str:
    """`200 OK` for 200: a WSGI status from an HTTP status code."""
    try:
        return f"{code} {HTTPStatus(code).phrase}"
    except ValueError:
        return f"{code} Unknown"
