"""One execution environment: a process running Lambda's runtime interface client for one function.

`python -m awslambdaric module.function` is what Lambda's Python runtime runs: it imports the
handler (the init phase), then takes invocations one at a time from the Runtime API that the
environment's own `RuntimeApi` serves. Bootstrap, the context object, error shapes and the
handler's log format are then Lambda's own.

The environment's stdout and stderr go into one pipe whose write end the stack keeps too: it writes
`START`, `END` and `REPORT` into the same pipe, so they come out after whatever the handler printed
before it answered, as in CloudWatch. A reader thread copies the pipe into the `FunctionLog`.

The process runs in a session of its own: signals sent to the stack's process group (Ctrl-C) do not
reach it, and the stack stops it itself. Should the stack's process die without stopping it, its
next call to the Runtime API fails and the client exits.
"""

from __future__ import annotations

import json
import logging
import math
import os
import queue
import secrets
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from wakeup_local.lambda_.environment_process import RuntimeProcess, start_runtime
from wakeup_local.lambda_.lambda_logs import FunctionLog, Report, end_line, start_line, timeout_line
from wakeup_local.lambda_.runtime_api import Invocation, RuntimeApi, RuntimeSignal

log = logging.getLogger(__name__)

# Lambda's limit on the init phase of an on-demand function. When it runs over, Lambda tries the
# init again as part of the first invocation, under the function's timeout: the stack waits for
# both together. ("Lambda execution environment lifecycle", init phase:
# https://docs.aws.amazon.com/lambda/latest/dg/lambda-runtime-environment.html)
INIT_TIMEOUT_S = 10.0
STOP_TIMEOUT_S = 5.0


class EnvironmentGone(Exception):
    """Raised by `invoke` when the environment's process had exited before it was handed the
    invocation: nothing ran, so the pool hands the invocation to another environment, as Lambda
    does, which never routes an invocation to an environment that is gone."""


class FunctionError(Exception):
    """Raised when an invocation fails as Lambda reports it: the handler raised, ran past its
    timeout, its environment exited or could not start. `payload` is Lambda's error document."""

    def __init__(self, error_type: str, message: str, payload: dict[str, object] | None = None) -> None:
        super().__init__(f"{error_type}: {message}")
        self.error_type = error_type
        self.error_message = message
        self.payload = payload or {"errorType": error_type, "errorMessage": message}


@dataclass(frozen=True)
class EnvironmentSettings:
    """What an environment of one function needs to start: the function's name for the log, its
    handler, its folder (the working directory, as `/var/task` is on Lambda), and its variables."""

    logical_id: str
    function_arn: str
    handler: str
    code_dir: Path
    memory_mb: int
    timeout_s: float
    variables: dict[str, str]
    # Lambda's `START`, `END` and `REPORT`: printed unless LoggingConfig's SystemLogLevel is WARN.
    system_lines: bool = True


class ExecutionEnvironment:
    """Started with `start()` (the cold start), then `invoke()`d one invocation at a time."""

    def __init__(self, settings: EnvironmentSettings, function_log: FunctionLog) -> None:
        self.settings = settings
        self._log = function_log
        self._api = RuntimeApi()
        self._process: RuntimeProcess | None = None
        self._write_fd = -1
        self._reader: threading.Thread | None = None
        # Platform lines in the pipe start with this, which nothing the function prints will.
        self._marker = f"\x1e{secrets.token_hex(8)}\x1e".encode()
        self._init_ms: float | None = None
        self.alive = False
        self.last_used = time.monotonic()

    @property
    def pid(self) -> int:
        return self._process.pid if self._process is not None else 0

    def start(self) -> None:
        """Starts the process and waits for its init phase; raises FunctionError when it fails."""
        self._api.start()
        read_fd, self._write_fd = os.pipe()
        variables = {
            **self.settings.variables,
            "AWS_LAMBDA_RUNTIME_API": self._api.address,
            # One stream per environment, named as Lambda names them.
            "AWS_LAMBDA_LOG_STREAM_NAME": f"{time.strftime('%Y/%m/%d', time.gmtime())}/[$LATEST]{uuid.uuid4().hex}",
        }
        started = time.monotonic()
        try:
            self._process = start_runtime(self.settings.handler, self.settings.code_dir, variables, self._write_fd)
        except OSError:
            os.close(read_fd)
            self.stop()
            raise
        self.alive = True
        self._reader = threading.Thread(target=self._copy_output, args=(read_fd,), name="function-log", daemon=True)
        self._reader.start()
        threading.Thread(target=self._await_exit, args=(self._process,), name="function-exit", daemon=True).start()

        signal = self._next_signal(INIT_TIMEOUT_S + self.settings.timeout_s)
        if signal is not None and signal.kind == "ready":
            self._init_ms = (time.monotonic() - started) * 1000
            return
        self.stop()
        if signal is None:
            raise FunctionError("Runtime.InitTimeout", f"the init phase did not end within {INIT_TIMEOUT_S:.0f} s")
        if signal.kind == "init_error":
            payload = _error_document(signal.body, signal.error_type or "Runtime.InitError")
            raise FunctionError(str(payload["errorType"]), str(payload.get("errorMessage", "")), payload)
        raise FunctionError("Runtime.ExitError", f"Runtime exited during init: {signal.body.decode()}")

    def invoke(self, payload: bytes) -> bytes:
        """Runs one invocation and returns the handler's result (JSON); raises FunctionError, or
        EnvironmentGone when the process had already exited (killed while idle, say)."""
        if self._process is None or self._process.poll() is not None:
            self.alive = False
            raise EnvironmentGone(f"environment {self.pid} of {self.settings.logical_id} has exited")
        request_id = str(uuid.uuid4())
        timeout_s = self.settings.timeout_s
        self._system(start_line(request_id))
        started = time.monotonic()
        self._api.hand(
            Invocation(
                request_id=request_id,
                payload=payload,
                deadline_ms=int(time.time() * 1000 + timeout_s * 1000),
                function_arn=self.settings.function_arn,
                trace_id=_trace_id(),
            )
        )
        signal = self._next_signal(timeout_s, request_id)
        duration_ms = (time.monotonic() - started) * 1000
        init_ms, self._init_ms = self._init_ms, None
        memory_mb = self._max_memory_used_mb()
        self.last_used = time.monotonic()

        if signal is None:
            message = timeout_line(request_id, timeout_s)
            self._kill()
            # The timeout's own line is kept: it is no INFO line of Lambda's.
            self._platform(message)
            self._system(end_line(request_id))
            self._report(request_id, timeout_s * 1000, memory_mb, init_ms, status="timeout")
            raise FunctionError("Sandbox.Timedout", message)
        if signal.kind == "exit":
            self._system(end_line(request_id))
            self._report(request_id, duration_ms, memory_mb, init_ms, status="error", error_type="Runtime.ExitError")
            self.alive = False
            raise FunctionError(
                "Runtime.ExitError", f"RequestId: {request_id} Error: Runtime exited with error: {signal.body.decode()}"
            )
        self._system(end_line(request_id))
        self._report(request_id, duration_ms, memory_mb, init_ms)
        if signal.kind == "error":
            error = _error_document(signal.body, signal.error_type or "Unhandled")
            raise FunctionError(str(error.get("errorType")), str(error.get("errorMessage", "")), error)
        return signal.body

    def stop(self) -> None:
        """Ends the process (as Lambda ends an idle environment) and what serves it; idempotent."""
        self._kill()
        self._api.stop()
        if self._write_fd >= 0:
            os.close(self._write_fd)  # the reader then ends once it has copied everything
            self._write_fd = -1
        if self._reader is not None:
            self._reader.join(STOP_TIMEOUT_S)
            self._reader = None

    # --- inside ---------------------------------------------------------------------------------

    def _next_signal(self, timeout_s: float, request_id: str | None = None) -> RuntimeSignal | None:
        """The environment's next report (on this invocation), or None when `timeout_s` passed first."""
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                signal = self._api.signals.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                return None
            if request_id is None or signal.kind == "exit" or signal.request_id == request_id:
                return signal

    def _kill(self) -> None:
        self.alive = False
        process = self._process
        if process is not None and process.poll() is None:
            process.kill()
            process.wait(STOP_TIMEOUT_S)

    def _await_exit(self, process: RuntimeProcess) -> None:
        code = process.wait()
        self.alive = False  # the pool hands a dead environment no more work
        self._api.signal(RuntimeSignal("exit", body=f"exit status {code}".encode()))

    def _platform(self, *lines: str) -> None:
        """Puts Lambda's own lines into the environment's output, after what it printed so far."""
        if self._write_fd < 0:
            return
        data = b"".join(self._marker + line.encode() + b"\n" for line in lines)
        os.write(self._write_fd, data)

    def _system(self, line: str) -> None:
        """A system log line at INFO (`START`, `END`, `REPORT`), which SystemLogLevel WARN drops."""
        if self.settings.system_lines:
            self._platform(line)

    def _report(
        self,
        request_id: str,
        duration_ms: float,
        memory_mb: int,
        init_ms: float | None,
        status: str | None = None,
        error_type: str | None = None,
    ) -> None:
        report = Report.of(
            request_id, duration_ms, self.settings.memory_mb, memory_mb, init_ms, status=status, error_type=error_type
        )
        self._system(report.line())

    def _max_memory_used_mb(self) -> int:
        """The process's peak resident memory (what Lambda reports as Max Memory Used)."""
        try:
            status = Path(f"/proc/{self.pid}/status").read_text()
        except OSError:
            return 0
        for line in status.splitlines():
            if line.startswith("VmHWM:"):
                return math.ceil(int(line.split()[1]) / 1024)
        return 0

    def _copy_output(self, read_fd: int) -> None:
        name = self.settings.logical_id
        with os.fdopen(read_fd, "rb") as output:
            for raw in output:
                if raw.startswith(self._marker):
                    raw = raw[len(self._marker) :]
                self._log.write(name, raw.decode("utf-8", errors="replace"))


def _error_document(body: bytes, error_type: str) -> dict[str, object]:
    """The error the runtime client posted (`errorMessage`, `errorType`, `stackTrace`...)."""
    try:
        document = json.loads(body)
    except ValueError:
        document = None
    if not isinstance(document, dict):
        document = {"errorMessage": body.decode("utf-8", errors="replace")}
    document.setdefault("errorType", error_type)
    return document


def _trace_id() -> str:
    """An X-Ray trace header as Lambda passes it (`Lambda-Runtime-Trace-Id`), not sampled."""
    return f"Root=1-{int(time.time()):08x}-{secrets.token_hex(12)};Parent={secrets.token_hex(8)};Sampled=0"
