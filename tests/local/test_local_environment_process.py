"""An environment's process, forked from a fork server that imported the layer's packages: to the
function it is what a new `python -m awslambdaric` process would be, its own init runs in it, a
function whose folders hold one of those packages gets a new process, and its end is reported."""

import io
import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from support.waiting import wait_until
from wakeup_local import environment, environment_forker
from wakeup_local.environment import EnvironmentSettings, ExecutionEnvironment, FunctionError
from wakeup_local.environment_process import ForkedProcess, start_runtime, startup_variables
from wakeup_local.lambda_logs import FunctionLog

PROBE = textwrap.dedent(
    """
    import os, sys, time
    import boto3  # preloaded by the fork server: found in sys.modules, or imported here

    INIT_PID = os.getpid()

    def handler(event, context):
        return {
            "environ": dict(os.environ),
            "path": sys.path,
            "cwd": os.getcwd(),
            "argv": sys.argv,
            "session_leader": os.getsid(0) == os.getpid(),
            "init_here": INIT_PID == os.getpid(),
            "stack_modules": sorted(name for name in sys.modules if name.startswith("wakeup_local")),
            "main": sys.modules["__main__"].__spec__.name,
            "tzname": list(time.tzname),
            "stdout": [sys.stdout.encoding, sys.stdout.line_buffering],
            "stdin": os.read(0, 1).decode(),
            "idna": getattr(__import__("idna"), "MARK", "the layer's"),
        }
    """
)


def settings(folder: Path, **variables: str) -> EnvironmentSettings:
    return EnvironmentSettings(
        logical_id="Probe",
        function_arn="arn:aws:lambda:us-east-1:123456789012:function:probe",
        handler="probe.handler",
        code_dir=folder,
        memory_mb=128,
        timeout_s=30.0,
        variables={"LANG": "en_US.UTF-8", "TZ": ":UTC", "PYTHONPATH": str(folder / "layer"), **variables},
    )


def probe(folder: Path, **variables: str) -> tuple[dict[str, Any], ExecutionEnvironment]:
    started = ExecutionEnvironment(settings(folder, **variables), FunctionLog(io.StringIO()))
    started.start()
    try:
        return json.loads(started.invoke(b"{}")), started
    except BaseException:
        started.stop()
        raise


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    (tmp_path / "probe.py").write_text(PROBE)
    (tmp_path / "layer").mkdir()
    return tmp_path


def parent(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[1])


def test_a_forked_environment_is_to_its_function_what_a_new_process_is(
    folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # given one environment forked (the default) and one started as a new process
    forked, forked_environment = probe(folder, COLOUR="green")
    with monkeypatch.context() as patch:
        patch.setattr(environment, "start_runtime", new_process)
        fresh, fresh_environment = probe(folder, COLOUR="green")
    try:
        # then the first was forked by the fork server, the second is this process's child
        assert parent(forked_environment.pid) != os.getpid() and parent(fresh_environment.pid) == os.getpid()
        # and its function sees the same: variables, path, folder, arguments, session, stdio, time zone
        per_environment = {"AWS_LAMBDA_RUNTIME_API", "AWS_LAMBDA_LOG_STREAM_NAME", "_X_AMZN_TRACE_ID"}
        variables = [
            {key: value for key, value in reply.pop("environ").items() if key not in per_environment}
            for reply in (forked, fresh)
        ]
        assert variables[0] == variables[1]
        assert variables[0].items() >= {**settings(folder).variables, "COLOUR": "green"}.items()
        assert forked == fresh
        assert forked["init_here"] and forked["session_leader"] and forked["stack_modules"] == []
        assert forked["main"] == "awslambdaric.__main__" and forked["stdin"] == ""
        assert forked["path"][:2] == [str(folder), str(folder / "layer")]
    finally:
        forked_environment.stop()
        fresh_environment.stop()


def new_process(handler: str, folder: Path, variables: dict[str, str], output_fd: int) -> subprocess.Popen[bytes]:
    """How an environment was started before its fork server: `python -m awslambdaric`."""
    return subprocess.Popen(
        [sys.executable, "-m", "awslambdaric", handler],
        cwd=folder,
        env=variables,
        stdin=subprocess.DEVNULL,
        stdout=output_fd,
        stderr=output_fd,
        start_new_session=True,
    )


def test_a_function_whose_folders_hold_a_package_the_fork_server_imported_gets_a_new_process(folder: Path) -> None:
    # given a layer that brings its own idna, which the fork server imported from the interpreter's
    (folder / "layer" / "idna.py").write_text("MARK = 'its own'\n")
    # when an environment starts
    reply, started = probe(folder)
    try:
        # then it is a new process, which imports the layer's idna, as on Lambda
        assert parent(started.pid) == os.getpid()
        assert reply["idna"] == "its own"
    finally:
        started.stop()


def test_the_preloaded_packages_read_no_variable_but_those_their_fork_server_is_started_with() -> None:
    # given a new interpreter that records every read of its variables while it imports PRELOAD
    script = textwrap.dedent(
        """
        import collections.abc, importlib, json, os, sys
        reads = set()
        class Recorder(collections.abc.MutableMapping):
            def __init__(self, real): self.real = real
            def __getitem__(self, key): reads.add(key); return self.real[key]
            def __setitem__(self, key, value): self.real[key] = value
            def __delitem__(self, key): del self.real[key]
            def __iter__(self): reads.add("(every variable)"); return iter(self.real)
            def __len__(self): return len(self.real)
            def copy(self): reads.add("(every variable)"); return dict(self.real)
        os.environ = Recorder(os.environ)
        for module in sys.argv[1:]:
            importlib.import_module(module)
        print(json.dumps(sorted(reads)))
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", script, *environment_forker.PRELOAD],
        env={"LANG": "en_US.UTF-8", "TZ": ":UTC"},
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    # then every variable they read is one the fork server is started with (and keyed by)
    read = json.loads(result.stdout)
    assert read and [name for name in read if not startup_variables({name: "a value"})] == []
    assert startup_variables({"POWERTOOLS_DEBUG": "1", "PYTHONPATH": "/x", "PYTHONHASHSEED": "0", "COLOUR": "g"}) == (
        ("POWERTOOLS_DEBUG", "1"),
        ("PYTHONHASHSEED", "0"),
    )


def test_a_killed_forked_environment_ends_its_invocation_with_its_exit_status(folder: Path) -> None:
    # given a forked environment whose handler kills its own process
    (folder / "probe.py").write_text("import os, signal\ndef handler(event, context):\n    os.kill(os.getpid(), 9)\n")
    started = ExecutionEnvironment(settings(folder), FunctionLog(io.StringIO()))
    started.start()
    try:
        assert isinstance(started._process, ForkedProcess)
        # when it is invoked, then the invocation fails as Lambda reports a runtime that exited
        with pytest.raises(FunctionError) as failed:
            started.invoke(b"{}")
        assert failed.value.error_type == "Runtime.ExitError"
        assert f"exit status {-signal.SIGKILL}" in failed.value.error_message
        assert not started.alive
    finally:
        started.stop()


def test_the_same_startup_variables_share_one_fork_server(folder: Path) -> None:
    # given two environments of functions that differ in their own variables only
    processes = []
    for colour in ("green", "blue"):
        output_r, output_w = os.pipe()
        variables = {**settings(folder).variables, "COLOUR": colour}
        processes.append(start_runtime("probe.handler", folder, variables, output_w))
        os.close(output_w)
        os.close(output_r)
    try:
        # then one fork server forked both
        assert all(isinstance(process, ForkedProcess) for process in processes)
        assert parent(processes[0].pid) == parent(processes[1].pid) != os.getpid()
    finally:
        for process in processes:
            process.kill()
            process.wait(10)


STARTER = """
import io, sys
from pathlib import Path
from wakeup_local.environment import ExecutionEnvironment, EnvironmentSettings
from wakeup_local.lambda_logs import FunctionLog
folder = Path(sys.argv[1])
started = ExecutionEnvironment(
    EnvironmentSettings("Probe", "arn:aws:lambda:us-east-1:123456789012:function:probe", "probe.handler", folder,
                        128, 30.0, {"LANG": "en_US.UTF-8", "TZ": ":UTC", "PYTHONPATH": str(folder / "layer")}),
    FunctionLog(io.StringIO()),
)
started.start()
print(started.pid, flush=True)
sys.stdin.read()
"""


def test_an_environment_and_its_fork_server_end_when_the_stacks_process_is_killed(folder: Path) -> None:
    # given a process that started an environment (its Runtime API, its fork server), then is killed
    with subprocess.Popen(
        [sys.executable, "-c", STARTER, str(folder)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    ) as starter:
        assert starter.stdout is not None
        forked = int(starter.stdout.readline())
        fork_server = parent(forked)
        assert fork_server != starter.pid and parent(fork_server) == starter.pid
        starter.send_signal(signal.SIGKILL)
    # then neither is left: the fork server's socket closed, the environment's Runtime API is gone
    wait_until(lambda: not alive(forked) and not alive(fork_server), timeout=30, message="the environment ending")


def alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] != "Z"
    except OSError:
        return False
