"""The local stack in a process of its own, counting what the functions cost.

`python -m bench.stack` starts a `LocalStack` of `template.yaml` (settings from its environment)
with three meters, then answers commands on stdin, one per line, with one JSON line on stdout:

- `counts`: the meters so far: AWS requests the functions made, by service and operation (a
  `before-call` hook on boto3's default session, from which the functions' clients are made; the
  local stack's own clients, its SQS poller's and Scheduler's, have sessions of their own and are
  not counted), invocations and seconds by function, and the bytes the functions printed (what
  CloudWatch Logs would ingest);
- `sweep`: runs the sweeper once, then answers as `counts`;
- `quit` (or end of input): stops the stack.

The stack runs in a process of its own so that the benchmark's client and host do not share its
interpreter, as they would not share a Lambda's. The functions print to a file; the local stack's
own log goes to stderr.
"""

from __future__ import annotations

import json
import logging
import os
import queue
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import IO, Any

ROOT = Path(__file__).resolve().parents[1]
START_TIMEOUT_S = 60.0
COMMAND_TIMEOUT_S = 60.0


# --- in the child ----------------------------------------------------------------------------------


class Meters:
    """What the functions did: AWS requests, invocations and their seconds (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.requests: Counter[str] = Counter()
        self.invocations: Counter[str] = Counter()
        self.seconds: dict[str, float] = defaultdict(float)

    def count_request(self, event_name: str, **kwargs: Any) -> None:
        # `before-call.dynamodb.GetItem`: once per API call, whatever its retries.
        _, service, operation = event_name.split(".", 2)
        with self._lock:
            self.requests[f"{service}:{operation}"] += 1

    def timed(self, name: str, handler: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
        def invoke(event: Any, context: Any) -> Any:
            started = time.perf_counter()
            try:
                return handler(event, context)
            finally:
                with self._lock:
                    self.invocations[name] += 1
                    self.seconds[name] += time.perf_counter() - started

        return invoke

    def snapshot(self, log_bytes: int) -> dict[str, Any]:
        with self._lock:
            return {
                "requests": dict(self.requests),
                "invocations": dict(self.invocations),
                "seconds": dict(self.seconds),
                "log_bytes": log_bytes,
            }


def _child() -> int:
    import boto3

    from wakeup_local.stack import LocalStack

    logging.basicConfig(stream=sys.stderr, level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    # The protocol keeps the real stdout; what the functions print goes to a file, to be measured.
    protocol = os.fdopen(os.dup(sys.stdout.fileno()), "w", buffering=1)
    function_output = Path(os.environ["BENCH_FUNCTION_OUTPUT"])
    sink = os.open(function_output, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    sys.stdout.flush()
    os.dup2(sink, sys.stdout.fileno())

    meters = Meters()
    boto3.setup_default_session()
    assert boto3.DEFAULT_SESSION is not None
    boto3.DEFAULT_SESSION.events.register("before-call", meters.count_request)

    stack = LocalStack(ROOT / "template.yaml", port=0)
    stack.start()
    try:
        for function in stack.functions:
            function.handler = meters.timed(function.spec.logical_id, function.handler)
        info = {"url": stack.url, "account_token": stack.account_token, "table": stack.table_name}
        protocol.write(json.dumps(info) + "\n")
        for line in sys.stdin:
            command = line.strip()
            if command == "quit":
                break
            if command == "sweep":
                stack.run_sweeper()
            elif command != "counts":
                protocol.write(json.dumps({"error": f"unknown command {command!r}"}) + "\n")
                continue
            sys.stdout.flush()
            protocol.write(json.dumps(meters.snapshot(function_output.stat().st_size)) + "\n")
    finally:
        stack.stop()
    return 0


# --- in the benchmark ------------------------------------------------------------------------------


class BenchStack:
    """The child above, started with `env` added to this process's environment."""

    def __init__(self, env: Mapping[str, str]) -> None:
        self._output = tempfile.NamedTemporaryFile(prefix="wakeup-bench-functions-", suffix=".log", delete=False)
        self._output.close()
        # The stack's own log, kept when it fails.
        self._stderr: IO[str] = tempfile.NamedTemporaryFile(
            "w", prefix="wakeup-bench-stack-", suffix=".log", delete=False
        )
        environment = {**os.environ, **env, "BENCH_FUNCTION_OUTPUT": self._output.name}
        self._process = subprocess.Popen(
            [sys.executable, "-m", "bench.stack"],
            cwd=ROOT,
            env=environment,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            text=True,
        )
        self._lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        info = self._answer(START_TIMEOUT_S)
        self.url = str(info["url"])
        self.account_token = str(info["account_token"])

    def _read(self) -> None:
        assert self._process.stdout is not None
        for line in self._process.stdout:
            self._lines.put(line)
        self._lines.put(None)

    def _answer(self, timeout_s: float) -> dict[str, Any]:
        try:
            line = self._lines.get(timeout=timeout_s)
        except queue.Empty:
            raise RuntimeError(f"the bench stack did not answer; see {self._stderr.name}") from None
        if line is None:
            raise RuntimeError(f"the bench stack stopped; see {self._stderr.name}")
        answer: dict[str, Any] = json.loads(line)
        if "error" in answer:
            raise RuntimeError(answer["error"])
        return answer

    def _command(self, command: str) -> dict[str, Any]:
        assert self._process.stdin is not None
        self._process.stdin.write(command + "\n")
        self._process.stdin.flush()
        return self._answer(COMMAND_TIMEOUT_S)

    def counts(self) -> dict[str, Any]:
        return self._command("counts")

    def sweep(self) -> dict[str, Any]:
        return self._command("sweep")

    def stop(self) -> None:
        if self._process.poll() is None:
            assert self._process.stdin is not None
            self._process.stdin.write("quit\n")
            self._process.stdin.close()
            try:
                self._process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self._process.terminate()
                self._process.wait(timeout=10)
        self._stderr.close()
        Path(self._output.name).unlink(missing_ok=True)
        if self._process.returncode == 0:
            Path(self._stderr.name).unlink(missing_ok=True)


def difference(after: dict[str, Any], before: dict[str, Any]) -> dict[str, Any]:
    """What the meters counted between two snapshots."""

    def minus(key: str) -> dict[str, float]:
        keys = set(after[key]) | set(before[key])
        changed = {k: after[key].get(k, 0) - before[key].get(k, 0) for k in keys}
        return {k: v for k, v in changed.items() if v}

    return {
        "requests": minus("requests"),
        "invocations": minus("invocations"),
        "seconds": minus("seconds"),
        "log_bytes": after["log_bytes"] - before["log_bytes"],
    }


if __name__ == "__main__":
    sys.exit(_child())
