"""The fork server of execution environments (environment_process.py starts it, asks it for each one).

Run by its path, not as a module of `wakeup_local`, so that its environments hold nothing of the
local stack's: it imports the packages that the functions' layer brings (`PRELOAD`), then reads
requests on its stdin, a socket of datagrams. Each request is one environment: its folder, its
variables, its handler, and two descriptors (the pipe for its output, a socket that hears its end).
It forks; the child becomes what `python -m awslambdaric <handler>` run in that folder with those
variables would be, and runs the runtime client, which imports the handler (the init phase). The
fork server answers the child's pid, reaps it when it ends, and writes its exit code on its socket.

It imports nothing of the functions' own code and makes no object of theirs: a child starts with
boto3's and pydantic's modules imported and nothing made, as a new process would after its first
imports. Its variables are only those the imports read (`STARTUP_VARIABLES`, given by the stack).
"""

from __future__ import annotations

import importlib
import json
import os
import runpy
import select
import signal
import socket
import sys
import traceback

import setproctitle

# The layer's packages (layers/wakeup/requirements.txt) and the runtime client's JSON: their imports
# were nine tenths of a cold start's CPU (Powertools' batch utility builds its parser's models).
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
REQUEST_BYTES = 1 << 20
RUNTIME_CLIENT = "awslambdaric"


def shadowed(folders: list[str]) -> list[str]:
    """The modules this process has imported that one of `folders` holds too: a new process would
    import the folder's, so an environment with these folders first on its path is not forked."""
    names = {name.partition(".")[0] for name in sys.modules}
    found = []
    for folder in folders:
        try:
            entries = os.listdir(folder)
        except OSError:
            continue
        for entry in entries:
            stem = entry.partition(".")[0]
            if stem in names and (entry == stem or entry.endswith((".py", ".pyc", ".so"))):
                found.append(stem)
    return sorted(set(found))


def become_environment(request: dict[str, object], variables: dict[str, str], output_fd: int) -> int:
    """In the child: its own session, stdio, folder, variables, path and arguments; then the runtime
    client, as `python -m awslambdaric <handler>` would run it. Returns its exit code."""
    # What `ps` and /proc/<pid>/cmdline show: the command a new process would have run (set before
    # the variables change: setproctitle makes room for it where the process's variables were).
    setproctitle.setproctitle(f"{sys.executable} -m {RUNTIME_CLIENT} {request['handler']}")
    os.setsid()
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(output_fd, 1)
    os.dup2(output_fd, 2)
    os.close(devnull)
    os.close(output_fd)
    folder = str(request["folder"])
    os.chdir(folder)
    os.environ.clear()
    os.environ.update(variables)
    # `python -m` puts the working folder first, then PYTHONPATH's, then the interpreter's own.
    python_path = [entry for entry in variables.get("PYTHONPATH", "").split(os.pathsep) if entry]
    sys.path[:] = [folder, *python_path, *sys.path[1:]]
    importlib.invalidate_caches()
    sys.argv = ["", str(request["handler"])]
    try:
        runpy.run_module(RUNTIME_CLIENT, run_name="__main__", alter_sys=True)
    except SystemExit as exit:
        return exit.code if isinstance(exit.code, int) else (0 if exit.code is None else 1)
    except BaseException:
        traceback.print_exc()
        return 1
    return 0


def main() -> int:
    # Its arguments name the variables it was started with: any other it has, the interpreter set as
    # it started (LC_CTYPE, coercing a C locale), and a new process would have too.
    started_with = set(sys.argv[1:])
    interpreters = {name: value for name, value in os.environ.items() if name not in started_with}
    for module in PRELOAD:
        importlib.import_module(module)
    requests = socket.socket(fileno=os.dup(0))
    os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
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
            while watchers:
                try:
                    pid, status = os.waitpid(-1, os.WNOHANG)
                except ChildProcessError:
                    break
                if pid == 0:
                    break
                watcher = watchers.pop(pid, None)
                if watcher is not None:
                    try:
                        watcher.sendall(f"exit={os.waitstatus_to_exitcode(status)}\n".encode())
                    except OSError:
                        pass  # the stack stopped watching it
                    watcher.close()
        if requests.fileno() not in ready:
            continue
        message, fds, _, _ = socket.recv_fds(requests, REQUEST_BYTES, 2)
        if not message:
            return 0  # the stack's process closed its socket, or ended
        request = json.loads(message)
        if len(fds) != 2:
            for fd in fds:
                os.close(fd)
            requests.sendall(b"error=two descriptors expected")
            continue
        output_fd, watcher_fd = fds
        found = shadowed([str(request["folder"]), *str(request["variables"].get("PYTHONPATH", "")).split(os.pathsep)])
        if found:
            os.close(output_fd)
            os.close(watcher_fd)
            requests.sendall(f"shadowed={','.join(found)}".encode())
            continue
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            # The child keeps nothing of the fork server's: its sockets, its signals, its pipe.
            signal.set_wakeup_fd(-1)
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            for held in (requests, *watchers.values(), socket.socket(fileno=watcher_fd)):
                held.close()
            os.close(ended_r)
            os.close(ended_w)
            return become_environment(request, {**interpreters, **request["variables"]}, output_fd)
        os.close(output_fd)
        watchers[pid] = socket.socket(fileno=watcher_fd)
        requests.sendall(f"pid={pid}".encode())


if __name__ == "__main__":
    sys.exit(main())
