"""moto's fork server and each moto it forks (moto_process.py starts the one, asks it for the others).

The fork server imports moto's server once, then reads requests on its stdin, a socket: each is a
moto's settings and the socket that moto answers on. It forks, answers the child's pid, and reads
the next; it ends when the socket closes. Each child serves moto on loopback until its own socket
closes.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import sys

from flask import Flask
from moto.backends import SERVICE_NAMES
from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app

from wakeup_local import moto_fixes
from wakeup_local.loopback_wsgi import LoopbackWsgiServer
from wakeup_local.moto_process import LOOPBACK
from wakeup_local.moto_shortcut import MotoShortcut
from wakeup_local.request_counter import RequestCounter


def serve(control: socket.socket, mapping_update_s: float) -> None:
    """Serves moto on loopback, answers `port=N` on `control`, and returns when `control` closes."""
    moto_fixes.apply(mapping_update_s=mapping_update_s)
    # moto's ThreadedMotoServer's application, with the functions' requests counted on the way
    # (request_counter.py) and DynamoDB's and SQS's past Flask (moto_shortcut.py), behind a lighter
    # server than werkzeug's (loopback_wsgi.py).
    app = RequestCounter(MotoShortcut(DomainDispatcherApplication(prepared_app)))
    server = LoopbackWsgiServer(LOOPBACK, 0, app)
    server.serve_in_thread("moto")
    control.sendall(f"port={server.port}\n".encode())
    while control.recv(64):
        pass


# The services the local stack calls. moto's server makes a service's Flask app on its first request
# to it, 0.15 s of CPU for these in each moto, and the suite starts some ninety: the fork server
# makes them once, before any state of moto's exists (they hold none; its backends do), for every
# moto it forks to start with a copy of its own.
SERVICES: tuple[SERVICE_NAMES, ...] = ("dynamodb", "sqs", "scheduler", "secretsmanager", "iam", "lambda")
_apps: dict[str, Flask] = {}


def prepared_app(service: SERVICE_NAMES) -> Flask:
    """The service's Flask app: the fork server's copy, or else a new one, as moto's server makes."""
    return _apps.get(service) or create_backend_app(service)


def main() -> int:
    """The fork server: one moto forked per request, until its stdin closes."""
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING)
    moto_fixes.apply()  # before the apps are made (each moto sets its own mapping_update_s again)
    _apps.update({service: create_backend_app(service) for service in SERVICES})
    requests = socket.socket(fileno=os.dup(0))
    # Its children are reaped as they end: nothing here waits for them.
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    while True:
        message, fds, _, _ = socket.recv_fds(requests, 64, 1)
        if not message or not fds:
            return 0
        pid = os.fork()
        if pid == 0:  # the child: a moto, which reads nothing of the fork server's requests
            requests.close()
            os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            code = 0
            try:
                serve(socket.socket(fileno=fds[0]), float(message))
            except BaseException:
                logging.exception("moto's server failed")
                code = 1
            os._exit(code)
        os.close(fds[0])
        requests.sendall(f"pid={pid}\n".encode())


if __name__ == "__main__":
    sys.exit(main())
