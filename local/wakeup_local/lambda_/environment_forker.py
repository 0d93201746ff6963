"""The fork server of execution environments (environment_process.py starts it, asks it for each one).

Run by its path, not as a module of `wakeup_local`, so that its environments hold nothing of the
local stack's: it imports the packages that the functions' layer brings (`PRELOAD`), then reads
requests on its stdin, a socket of datagrams. Each request is one environment: its folder, its
variables, its handler, and two descriptors (the pipe for its output, a socket that hears its end).
It forks; the child becomes what `python -m awslambdaric <handler>` run in that folder with those
variables would be, and runs the runtime client, which imports the handler (the init phase). The
fork server answers the child's pid and a pidfd of it, reaps it when it ends, and writes its exit
code on its socket. A request may ask instead for a copy of the fork server, which serves another
stack's process on a socket of its own (shared_fork_servers.py).

It imports none of the functions' own code. What the preloaded imports did, every environment
starts with, as a new process that imported the same would: Powertools' user agent registered with
botocore, pydantic's plugins looked up (none), Powertools' parser models built; and botocore's data
for the layer's services read (`read_botocore_data`). Where that differs from a new process, the
README says (What it leaves out).
"""

from __future__ import annotations

import gc
import importlib
import importlib.abc
import json
import os
import runpy
import select
import signal
import socket
import sys
import traceback
from collections.abc import Sequence
from typing import Any

import setproctitle

# The layer's packages (layers/wakeup/requirements.txt) and the runtime client's JSON: their imports
# are most of a cold start's CPU (Powertools' batch utility builds its parser's models), so the fork
# server imports them once for every environment it forks (docs/benchmark.md, "The local stack").
# Each is checked to read no variable as it is imported but those the fork server is started with
# (tests/local/test_local_environment_process.py).
PRELOAD = (
    "boto3",
    "botocore.client",
    "botocore.session",
    "pydantic.main",
    "idna",
    "zoneinfo",
    "simplejson",
    "aws_lambda_powertools.logging",
    "aws_lambda_powertools.metrics",
    "aws_lambda_powertools.event_handler",
    "aws_lambda_powertools.utilities.batch",
    "aws_lambda_powertools.utilities.data_classes",
    "aws_lambda_powertools.utilities.parameters",
)
# The services whose botocore data (JSON files) the fork server reads for every environment: those the
# layer makes clients of (`wakeup.aws.client`). A client's making reads the service's model and
# endpoint rules, and the endpoints, partitions and defaults every client reads, through its session's
# loader, which keeps what it read. That reading was most of a caller environment's init
# (docs/benchmark.md, "The local stack"). Another service's files are read in the environment, as
# without it.
BOTOCORE_SERVICES = ("dynamodb", "secretsmanager", "sqs", "scheduler", "lambda", "cloudformation")
# A request is one datagram: the environment's variables make it a few kilobytes.
REQUEST_BYTES = 1 << 20
RUNTIME_CLIENT = "awslambdaric"


class MissedImports(importlib.abc.MetaPathFinder):
    """Last on the import path: records the modules that no finder found (botocore's optional
    `awscrt`, urllib3's `brotli`), which a function's folders might bring."""

    def __init__(self) -> None:
        self.names: set[str] = set()

    def find_spec(self, fullname: str, path: Sequence[str] | None, target: object = None) -> None:
        self.names.add(fullname.partition(".")[0])


def shadowed(folders: list[str], imported: set[str]) -> list[str]:
    """The modules of `imported` (imported here, or looked for in vain) that `folders` may hold: a new
    process might import the folder's, so an environment with these folders first on its path is
    not forked. Conservative: a folder that is no folder (a zip) counts as holding them all."""
    found = []
    for folder in folders:
        try:
            entries = os.listdir(folder)
        except NotADirectoryError:
            return ["(a path entry that is not a folder)"]
        except OSError:
            continue
        for entry in entries:
            stem = entry.partition(".")[0]
            if stem in imported and (entry == stem or entry.endswith((".py", ".pyc", ".so"))):
                found.append(stem)
    return sorted(set(found))


def path_of(folder: str, variables: dict[str, str]) -> list[str]:
    """The environment's folder and its PYTHONPATH's, absolute (relative ones from its folder)."""
    python_path = [entry for entry in variables.get("PYTHONPATH", "").split(os.pathsep) if entry]
    return [folder, *(os.path.join(folder, entry) for entry in python_path)]


def become_environment(request: dict[str, object], variables: dict[str, str], output_fd: int) -> None:
    """In the child: its own session, stdio, folder, variables, path, arguments and title; then the
    runtime client, as `python -m awslambdaric <handler>` would run it. Its exit and its uncaught
    exceptions go up to the interpreter, which ends the process as it would end a new one."""
    handler = str(request["handler"])
    # What `ps` and /proc/<pid>/cmdline show: the command a new process would have run (set before
    # the variables change: setproctitle makes room for it where the process's variables were).
    setproctitle.setproctitle(f"{sys.executable} -m {RUNTIME_CLIENT} {handler}")
    setproctitle.setthreadtitle(os.path.basename(sys.executable))
    os.setsid()
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(output_fd, 1)
    os.dup2(output_fd, 2)
    # Nothing of the fork server's descriptors: a new process has only its stdio.
    os.closerange(3, os.sysconf("SC_OPEN_MAX"))
    folder = str(request["folder"])
    os.chdir(folder)
    os.environ.clear()
    os.environ.update(variables)
    # `python -m`: the working folder first (unless PYTHONSAFEPATH), then PYTHONPATH's (absolute),
    # then the interpreter's own, each once, as site leaves them.
    first = [] if sys.flags.safe_path else [os.getcwd()]
    rest = [*(os.path.abspath(entry) for entry in path_of(folder, variables)[1:]), *sys.path[1:]]
    sys.path[:] = first + [entry for index, entry in enumerate(rest) if entry not in rest[:index]]
    importlib.invalidate_caches()
    sys.argv = ["", handler]
    runpy.run_module(RUNTIME_CLIENT, run_name="__main__", alter_sys=True)


def preload() -> set[str]:
    """Imports PRELOAD; returns the top-level names it imported or looked for in vain."""
    missed = MissedImports()
    sys.meta_path.append(missed)
    for module in PRELOAD:
        try:
            importlib.import_module(module)
        except ImportError:
            traceback.print_exc()  # the function's own import fails the same way, in its environment
    sys.meta_path.remove(missed)
    return {name.partition(".")[0] for name in sys.modules} | missed.names


def read_botocore_data() -> None:
    """Reads BOTOCORE_SERVICES' data with a loader of botocore's, and gives what it read to the loader
    of every botocore session made from then on (here and in every environment forked) without
    AWS_DATA_PATH: what a new process would read from the same files, read before it starts. Each
    session still has a loader of its own, as botocore makes (boto3 adds its own folder to a
    session's loader); a session given AWS_DATA_PATH reads its own, as botocore does. (botocore is
    imported here, after PRELOAD, whose imports `preload` records.)"""
    import botocore.loaders  # noqa: PLC0415
    import botocore.session  # noqa: PLC0415

    try:
        read: Any = botocore.loaders.create_loader()  # its `_cache`, which botocore's stubs leave out
        # As botocore's session and client ask for them: a loader keeps each read under the
        # arguments it was asked with (`instance_cache`, in the loader's `_cache`).
        read.load_data_with_path("endpoints")
        read.load_data("sdk-default-configuration")
        read.load_data("partitions")
        for service in BOTOCORE_SERVICES:
            for type_name in ("service-2", "endpoint-rule-set-1"):
                read.load_service_model(service, type_name, api_version=None)
        create_loader = botocore.session.create_loader
        kept = dict(read._cache)
    except Exception:  # a botocore that changed: every environment reads its own, as a new process
        traceback.print_exc()
        return

    def loader_for(search_path_string: str | None = None) -> Any:
        made: Any = create_loader(search_path_string)
        if search_path_string is None:
            made._cache.update(kept)
        return made

    botocore.session.create_loader = loader_for


def main() -> int:
    # Its arguments name the variables it was started with: any other it has, the interpreter set as
    # it started (LC_CTYPE, coercing a C locale), and a new process would have too.
    started_with = set(sys.argv[1:])
    set_by_interpreter = {name: value for name, value in os.environ.items() if name not in started_with}
    imported = preload()
    read_botocore_data()
    # What the imports made and kept lives as long as an environment does: kept out of the
    # collector's passes (gc.freeze, which Python's documentation suggests before fork), which would
    # otherwise walk it in every environment and copy each page they touch. Their garbage is
    # collected first, so that none of it is kept for good.
    gc.collect()
    gc.freeze()
    requests = socket.socket(fileno=os.dup(0))
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    return serve(requests, set_by_interpreter, imported)


def serve(requests: socket.socket, set_by_interpreter: dict[str, str], imported: set[str]) -> int:
    """Forks an environment for each request on `requests`, until it closes; or, asked for a copy
    (`{"copy": true}`, with the socket it serves and the stderr it writes to), a copy of this fork
    server that serves another stack's process alone (shared_fork_servers.py)."""
    # A child that ends wakes the loop below, which reaps it and tells its socket how it ended.
    ended_r, ended_w = os.pipe()
    os.set_blocking(ended_w, False)
    signal.set_wakeup_fd(ended_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    watchers: dict[int, socket.socket] = {}
    while True:
        ready = select.select([requests.fileno(), ended_r], [], [])[0]
        if ended_r in ready:
            os.read(ended_r, 4096)
            reap(watchers)
        if requests.fileno() not in ready:
            continue
        message, fds, _, _ = socket.recv_fds(requests, REQUEST_BYTES, 2)
        if not message:
            return 0  # the stack's process closed its socket, or ended
        try:
            request = json.loads(message)
            output_fd, watcher_fd = fds
            copy = request.get("copy") is True
            variables = {} if copy else {**set_by_interpreter, **request["variables"]}
            found = [] if copy else shadowed(path_of(str(request["folder"]), request["variables"]), imported)
            if found:
                raise LookupError(f"shadowed={','.join(found)}")
            sys.stdout.flush()
            sys.stderr.flush()
            pid = os.fork()
        except (ValueError, KeyError, TypeError, LookupError, OSError) as refused:
            for fd in fds:
                os.close(fd)
            requests.sendall(f"refused={refused}".encode())
            continue
        if pid == 0:
            signal.set_wakeup_fd(-1)
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            if copy:  # its requests the copy's socket (first descriptor), its stderr the second
                for held in (requests, *watchers.values()):
                    held.close()
                os.close(ended_r)
                os.close(ended_w)
                os.dup2(watcher_fd, 2)
                os.close(watcher_fd)
                return serve(socket.socket(fileno=output_fd), set_by_interpreter, imported)
            for held in (requests, *watchers.values()):
                held.detach()  # closed with every descriptor but stdio, in become_environment
            become_environment(request, variables, output_fd)
            return 0
        # Opened before the child can have been reaped (only this loop reaps): its pid is still its.
        pidfd = os.pidfd_open(pid)
        os.close(output_fd)
        if copy:
            os.close(watcher_fd)  # a copy's end is reaped, and told to no one
        else:
            watchers[pid] = socket.socket(fileno=watcher_fd)
        socket.send_fds(requests, [f"pid={pid}".encode()], [pidfd])
        os.close(pidfd)


def reap(watchers: dict[int, socket.socket]) -> None:
    """Reaps the children that ended (copies of this fork server too) and writes each environment's
    exit code on its socket."""
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        watcher = watchers.pop(pid, None)
        if watcher is not None:
            try:
                watcher.sendall(f"exit={os.waitstatus_to_exitcode(status)}\n".encode())
            except OSError:
                pass  # the stack stopped watching it
            watcher.close()


if __name__ == "__main__":
    sys.exit(main())
