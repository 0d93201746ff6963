"""An environment's process, forked from a fork server that imported the layer's packages: to the
function it is what a new `python -m awslambdaric` process would be, its own init runs in it, a
function whose folders hold one of those packages gets a new process, and its end is reported."""

import io
import json
import os
import re
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from support.waiting import wait_until
from wakeup_local.lambda_ import environment, environment_forker
from wakeup_local.lambda_.environment import EnvironmentSettings, ExecutionEnvironment, FunctionError
from wakeup_local.lambda_.environment_process import ForkedProcess, new_process, startup_variables
from wakeup_local.lambda_.lambda_logs import FunctionLog

PROBE = textwrap.dedent(
    """
    import os, sys, time
    PRELOADED = "boto3" in sys.modules  # by the fork server: before this module imports it
    import boto3

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
            "pydantic": getattr(__import__("pydantic"), "MARK", "the layer's"),
            "preloaded": PRELOADED,
            "frozen": __import__("gc").get_freeze_count() > 0,
            "descriptors": sorted(os.listdir("/proc/self/fd")),
            "comm": open("/proc/self/comm").read(),
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
        # (but for the packages it found imported: what the fork server is for)
        assert forked.pop("preloaded") and not fresh.pop("preloaded")
        assert forked.pop("frozen") and not fresh.pop("frozen")
        assert forked == fresh
        assert forked["init_here"] and forked["session_leader"] and forked["stack_modules"] == []
        assert forked["main"] == "awslambdaric.__main__" and forked["stdin"] == ""
        assert forked["path"][:2] == [str(folder), str(folder / "layer")]
    finally:
        forked_environment.stop()
        fresh_environment.stop()


@pytest.mark.parametrize(
    "where, module",
    [
        ("layer", "idna.py"),  # a module the fork server imported
        (".", "pydantic/__init__.py"),  # a package of it, in the function's own folder
        ("layer", "awscrt/__init__.py"),  # one botocore looked for in vain (its optional CRT)
    ],
)
def test_a_function_whose_folders_hold_a_module_the_fork_server_imported_or_missed_gets_a_new_process(
    folder: Path, where: str, module: str
) -> None:
    # given a folder of the function's that brings its own module, which the fork server has imported
    # from the interpreter's packages (or found nowhere)
    path = folder / where / module
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("MARK = 'its own'\n")
    # when an environment starts
    reply, started = probe(folder)
    try:
        # then it is a new process, which imports the function's module, as on Lambda
        assert parent(started.pid) == os.getpid()
        if module.startswith(("idna", "pydantic")):
            assert reply[module.partition("/")[0].removesuffix(".py")] == "its own"
    finally:
        started.stop()


# A function that makes a DynamoDB client in its handler, and answers the files of botocore's data
# that its process opened from its init on.
DATA_PROBE = textwrap.dedent(
    """
    import os, sys
    import boto3, botocore

    DATA = os.path.join(os.path.dirname(botocore.__file__), "data")
    opened = []

    def watch(event, args):
        if event == "open" and str(args[0]).startswith(DATA):
            opened.append(os.path.relpath(str(args[0]), DATA))

    sys.addaudithook(watch)

    def handler(event, context):
        boto3.client("dynamodb", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")
        return opened
    """
)


def test_a_forked_environment_makes_its_clients_from_the_botocore_data_its_fork_server_read(
    folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (folder / "probe.py").write_text(DATA_PROBE)
    (folder / "models").mkdir()
    # when a forked environment, a new process, and a forked environment given AWS_DATA_PATH each
    # make a DynamoDB client
    forked, forked_environment = probe(folder)
    with monkeypatch.context() as patch:
        patch.setattr(environment, "start_runtime", new_process)
        fresh, fresh_environment = probe(folder)
    own_path, own_path_environment = probe(folder, AWS_DATA_PATH=str(folder / "models"))
    try:
        # then the forked one read none of botocore's files: the fork server had read them
        assert parent(forked_environment.pid) != os.getpid() and forked == []
        # while a new process reads the service's model and the endpoints, as on Lambda
        assert any(name.startswith("dynamodb/") for name in fresh) and any("endpoints" in name for name in fresh)
        # and a session given other folders to read makes its own loader, as botocore does
        assert parent(own_path_environment.pid) != os.getpid()
        assert any(name.startswith("dynamodb/") for name in own_path)
    finally:
        for started in (forked_environment, fresh_environment, own_path_environment):
            started.stop()


def test_the_fork_server_reads_the_botocore_data_of_every_service_the_layer_calls() -> None:
    layer = Path(__file__).parents[2] / "layers/wakeup/wakeup"
    called = {
        service
        for source in layer.rglob("*.py")
        for service in re.findall(r"""(?:aws\.client|_client)\("([a-z-]+)"\)""", source.read_text())
    }
    assert called and called <= set(environment_forker.BOTOCORE_SERVICES)


def test_the_preloaded_packages_and_data_read_no_variable_but_those_their_fork_server_is_started_with() -> None:
    # given a new interpreter that records every read of its variables while it imports PRELOAD and
    # reads botocore's data as the fork server does
    script = textwrap.dedent(
        """
        import collections.abc, importlib, importlib.util, json, os, sys
        spec = importlib.util.spec_from_file_location("forker", sys.argv[1])
        forker = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(forker)
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
        for module in forker.PRELOAD:
            importlib.import_module(module)
        forker.read_botocore_data()
        print(json.dumps(sorted(reads)))
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", script, environment_forker.__file__],
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


def test_functions_that_differ_in_their_own_variables_share_a_fork_server_and_not_in_startup_ones(
    folder: Path,
) -> None:
    # given environments of functions that differ in a variable of their own, and one in Powertools'
    # debug switch, which Powertools reads as it is imported
    started = [probe(folder, COLOUR=colour)[1] for colour in ("green", "blue")]
    started.append(probe(folder, COLOUR="green", POWERTOOLS_DEBUG="1")[1])
    try:
        # then the first two were forked by one fork server, the third by another
        servers = [parent(environment.pid) for environment in started]
        assert servers[0] == servers[1] != servers[2] and os.getpid() not in servers
    finally:
        for environment in started:
            environment.stop()


@pytest.mark.parametrize(
    "exit_call, expected",
    [("sys.exit(3)", "exit status 3"), ("sys.exit('the config is gone')", "exit status 1")],
)
def test_an_init_that_exits_fails_as_a_new_process_would(
    folder: Path, monkeypatch: pytest.MonkeyPatch, exit_call: str, expected: str
) -> None:
    # given a handler's module that exits as it is imported
    (folder / "probe.py").write_text(f"import sys\n{exit_call}\n")
    outcomes = []
    for start in ("forked", "new process"):
        log = io.StringIO()
        with monkeypatch.context() as patch:
            if start == "new process":
                patch.setattr(environment, "start_runtime", new_process)
            with pytest.raises(FunctionError) as failed:
                ExecutionEnvironment(settings(folder), FunctionLog(log)).start()
        outcomes.append((failed.value.error_type, failed.value.error_message, log.getvalue()))
    # then the environment's start fails with its exit status, and what it printed, either way
    assert outcomes[0] == outcomes[1]
    assert outcomes[0][:2] == ("Runtime.ExitError", f"Runtime exited during init: {expected}")
    if "config" in exit_call:
        assert "the config is gone" in outcomes[0][2]


def test_a_killed_fork_server_leaves_its_environments_serving_and_is_started_again(folder: Path) -> None:
    # given a forked environment, whose fork server is then killed
    reply, first = probe(folder)
    try:
        server = parent(first.pid)
        os.kill(server, signal.SIGKILL)
        wait_until(lambda: not alive(server), timeout=30, message="the fork server ending")
        # then the environment still serves, and its end is still seen
        assert json.loads(first.invoke(b"{}"))["init_here"]
        first._kill()
        assert not first.alive
        # and the next environment is forked by a new fork server
        _, second = probe(folder)
        try:
            assert parent(second.pid) not in (server, os.getpid())
        finally:
            second.stop()
    finally:
        first.stop()


STARTER = """
import io, sys
from pathlib import Path
from wakeup_local.lambda_.environment import ExecutionEnvironment, EnvironmentSettings
from wakeup_local.lambda_.lambda_logs import FunctionLog
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
