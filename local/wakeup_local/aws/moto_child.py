"""moto's fork server and each moto it forks (moto_process.py starts the one, asks it for the others).

The fork server imports moto's server once, then reads requests on its stdin, a socket: each is a
moto's settings and the socket that moto answers on. It forks, answers the child's pid, and reads
the next; it ends when the socket closes. Each child serves moto on loopback until its own socket
closes. A request may ask instead for a copy of the fork server, which serves another stack's
process on a socket of its own (shared_fork_servers.py).
"""

from __future__ import annotations

import gc
import json
import logging
import os
import signal
import socket
import sys

from flask import Flask
from moto.backends import SERVICE_NAMES
from moto.core.routing import get_service_router
from moto.core.utils import get_service_model
from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app
from moto.scheduler.exceptions import ScheduleGroupNotFound, ScheduleNotFound
from moto.scheduler.models import scheduler_backends

from wakeup_local.aws import moto_fixes
from wakeup_local.aws.loopback_wsgi import LoopbackWsgiServer
from wakeup_local.aws.moto_process import COPY, LOOPBACK
from wakeup_local.aws.moto_shortcut import MotoShortcut
from wakeup_local.aws.request_counter import RequestCounter, UnplacedSchedule


def serve(control: socket.socket, mapping_update_s: float) -> None:
    """Serves moto on loopback, answers `port=N` on `control`, and returns when `control` closes."""
    moto_fixes.apply(mapping_update_s=mapping_update_s)
    # moto's ThreadedMotoServer's application, with the functions' requests counted on the way and
    # the Scheduler's changes read for the stack (request_counter.py), DynamoDB's, SQS's and the
    # Scheduler's requests past Flask (moto_shortcut.py), behind a lighter server than werkzeug's
    # (loopback_wsgi.py).
    app = RequestCounter(MotoShortcut(DomainDispatcherApplication(prepared_app)), read_schedule)
    keep_out_of_collections()
    server = LoopbackWsgiServer(LOOPBACK, 0, app)
    server.serve_in_thread("moto")
    control.sendall(f"port={server.port}\n".encode())
    while control.recv(64):
        pass


# How many collections of the middle generation before a full one is considered (Python's default
# 10). What lives long in a moto is the tables' items and the queues' messages, which no cycle
# holds (each is freed when its last reference goes, without the collector), and a full pass
# walks all of them: under a burst of 1,000 wakes, with some 2,000 instances in the table, a moto made
# three, 0.13 s of CPU each. The young generations' passes, which free the cycles a request makes
# (its parsed expressions), are as often as before.
FULL_COLLECTION_EVERY = 100


def keep_out_of_collections() -> None:
    """Everything made so far (moto's modules, its services' apps, models and backends: some 200,000
    objects) lives as long as the process does: kept out of the collector's passes (`gc.freeze`),
    and full passes made a tenth as often (FULL_COLLECTION_EVERY). Each full pass walks every object
    it tracks, and under a burst of wakes a moto made three, about 0.2 s of CPU each (0.7 ms a
    delivered wake), nearly half of it over these. Python's documentation suggests the freeze before
    a fork as well: a child's passes then leave the pages it shares with the fork server untouched.
    Their garbage is collected first, so that none of it is kept for good."""
    gc.collect()
    gc.freeze()
    young, middle, _ = gc.get_threshold()
    gc.set_threshold(young, middle, FULL_COLLECTION_EVERY)


def read_schedule(region: str, group: str, name: str) -> str | None:
    """The schedule's `GetSchedule` reply body in `region` (moto's `get_schedule` answers its
    `to_dict()` as JSON), None when it is gone; UnplacedSchedule when not one account alone has the
    group there (which account a reader's requests reach is moto's to tell from their keys)."""
    holding = []
    for regions in list(scheduler_backends.values()):
        backend = regions.get(region) if isinstance(regions, dict) else None
        if backend is not None and group in backend.schedule_groups:
            holding.append(backend)
    if len(holding) != 1:
        raise UnplacedSchedule(f"{region}/{group}/{name}")
    try:
        return json.dumps(holding[0].get_schedule(group, name).to_dict())
    except (ScheduleNotFound, ScheduleGroupNotFound):
        return None


# The services the local stack calls, by the names moto's server gives their backends
# (moto.backend_index). On a service's first request moto makes its Flask app (and with it the
# service's backend for the default account in us-east-1, the stack's), reads its model and builds
# the map of its operations' URLs, most of a new moto's start, and the suite starts dozens of motos.
# The fork server makes them once; each moto it forks starts with a copy of its own,
# as it would have made them (no thread, clock or random id in them). CloudFormation (the stack's
# record, which the planner reads) is the dearest: moto's imports every service's backend with it,
# to parse their resource types.
SERVICES = ("dynamodb", "sqs", "scheduler", "secretsmanager", "iam", "awslambda", "cloudformation")
MODELS = ("dynamodb", "sqs", "scheduler", "secretsmanager", "iam", "lambda", "cloudformation")  # botocore's names
_apps: dict[str, Flask] = {}


def prepared_app(service: SERVICE_NAMES) -> Flask:
    """The service's Flask app: the fork server's copy, or else a new one, as moto's server makes."""
    return _apps.get(service) or create_backend_app(service)


def prepare_apps() -> None:
    """Makes SERVICES' apps, their URL maps built (werkzeug builds one on its first match), and
    reads their models."""
    for service in SERVICES:
        try:
            app = create_backend_app(service)  # type: ignore[arg-type]  # the names moto's server uses
        except Exception:  # a moto that changed: that service's app is made on its first request
            logging.warning("moto changed: its %s app is made in each moto", service, exc_info=True)
            continue
        app.url_map.update()
        _apps[service] = app
    # And what moto's handlers read on a service's first request: the service's model, and the map
    # from its operations' URLs to them (Lambda's, the largest model, is the slowest to build).
    for model_name in MODELS:
        try:
            model = get_service_model(model_name)
            get_service_router(model_name)._get_router(model.protocol)
        except Exception:  # a moto that changed: made on the first request, in each moto
            logging.warning("moto changed: its %s model is read in each moto", model_name, exc_info=True)


def main() -> int:
    """The fork server: one moto forked per request, until its stdin closes."""
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING)
    moto_fixes.apply()  # its patches once for every moto (each sets its own mapping_update_s again)
    prepare_apps()
    keep_out_of_collections()
    # Its children are reaped as they end: nothing here waits for them.
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    return serve_forks(socket.socket(fileno=os.dup(0)))


def serve_forks(requests: socket.socket) -> int:
    """Forks what each request on `requests` asks for, until it closes: a moto (the request is its
    `mapping_update_s`, with the socket it answers on), or a copy of this fork server (`copy`, with
    the socket it serves and the stderr it writes to: shared_fork_servers.py)."""
    while True:
        message, fds, _, _ = socket.recv_fds(requests, 64, 2)
        if not message or not fds:
            return 0
        pid = os.fork()
        if pid == 0:  # the child, which reads nothing of the fork server's requests
            requests.close()
            os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
            if message == COPY:
                os.dup2(fds[1], 1)
                os.dup2(fds[1], 2)
                os.close(fds[1])
                os._exit(serve_forks(socket.socket(fileno=fds[0])))
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            code = 0
            try:
                serve(socket.socket(fileno=fds[0]), float(message))
            except BaseException:
                logging.exception("moto's server failed")
                code = 1
            os._exit(code)
        for fd in fds:
            os.close(fd)
        requests.sendall(f"pid={pid}\n".encode())


if __name__ == "__main__":
    status = main()
    # Leave without the interpreter's teardown of every module and object (moto's services, their
    # apps and models), which the stack's stop would wait for: the fork server has nothing left to
    # close but its standard streams. (Each moto it forks leaves the same way.)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)
