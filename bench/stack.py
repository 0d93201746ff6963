"""The local stack in a process of its own, counting what the functions cost.

`python -m bench.stack` starts a `LocalStack` of `template.yaml` (settings from its environment),
then answers commands on stdin, one per line, with one JSON line on stdout:

- `counts`: the meters so far: AWS requests the functions made, by service and operation (counted
  in moto's process, which leaves out the local stack's own SQS poller and Scheduler), their
  invocations and seconds by function, and the bytes they printed (what CloudWatch Logs would
  ingest), all read from their log and its `REPORT` lines; and the stack's memory: all its
  processes (the stack, moto, the functions' environments) now, at rest after its start, and at
  its peak; and each SQS event source's batches and highest concurrency (the poller's counters);
- `sweep`: runs the sweeper once, then answers as `counts`;
- `quit` (or end of input): stops the stack.

The stack runs in a process of its own so that the benchmark's client and host do not share its
interpreter, as they would not share a Lambda's. The functions' log goes to a file, which the
benchmark reads for its REPORT lines; the local stack's own log goes to stderr.
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
import urllib.request
from collections import Counter, defaultdict
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Any

from bench.processes import family
from wakeup.settings import MAX_ACCOUNT_REQUESTS_PER_S
from wakeup_local.lambda_.functions import SYSTEM_LOG_LEVEL_ENV
from wakeup_local.lambda_.lambda_logs import Report, prefix

ROOT = Path(__file__).resolve().parents[1]
START_TIMEOUT_S = 60.0
COMMAND_TIMEOUT_S = 60.0
# A sample reads every process of the machine (to find the stack's): its CPU is the stack's own
# process's, which `bench.cpu` meters. Environments live for minutes; half a second finds a peak.
MEMORY_SAMPLE_S = 0.5
_PLATFORM = ("START RequestId:", "END RequestId:", "REPORT RequestId:")
# The sweeper is run on purpose, not every minute: its requests would blur the per-wake counts.
NO_SWEEPS = {"WAKEUP_LOCAL_SWEEP_S": "86400"}


# --- in the child ----------------------------------------------------------------------------------


def rss_mb(pid: int) -> float:
    """The resident memory of `pid` and its descendants (moto, the environments), in MB: each
    process's pages, those it shares with others (its fork server's) included."""
    total_kb = 0
    for member in family(pid):
        try:
            for line in Path(f"/proc/{member}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total_kb += int(line.split()[1])
        except (OSError, ValueError, IndexError):
            continue  # a process that ended meanwhile
    return total_kb / 1024


class Memory:
    """Samples the stack's memory: at rest (right after its start) and its peak since."""

    def __init__(self) -> None:
        self.rest_mb = self.peak_mb = rss_mb(os.getpid())
        self._stopping = threading.Event()
        threading.Thread(target=self._sample, daemon=True).start()

    def now(self) -> dict[str, float]:
        current = rss_mb(os.getpid())
        self.peak_mb = max(self.peak_mb, current)
        return {"now_mb": current, "rest_mb": self.rest_mb, "peak_mb": self.peak_mb}

    def stop(self) -> None:
        self._stopping.set()

    def _sample(self) -> None:
        while not self._stopping.wait(MEMORY_SAMPLE_S):
            self.peak_mb = max(self.peak_mb, rss_mb(os.getpid()))


class FunctionLogMeter:
    """Reads the functions' log as it grows: invocations and seconds from REPORT lines, and the
    bytes the functions printed themselves (Lambda's own lines and the prefixes left out)."""

    def __init__(self, path: Path, logical_ids: list[str]) -> None:
        self._path = path
        self._offset = 0
        self._prefixes = {prefix(logical_id): logical_id for logical_id in logical_ids}
        self.invocations: Counter[str] = Counter()
        self.seconds: dict[str, float] = defaultdict(float)
        self.log_bytes = 0

    def read(self) -> None:
        with self._path.open("rb") as log:
            log.seek(self._offset)
            data = log.read()
        complete = data[: data.rfind(b"\n") + 1]
        self._offset += len(complete)
        for line in complete.decode("utf-8", errors="replace").splitlines():
            for start, logical_id in self._prefixes.items():
                if line.startswith(start):
                    self._count(logical_id, line[len(start) :])
                    break

    def _count(self, logical_id: str, text: str) -> None:
        if not text.startswith(_PLATFORM):
            self.log_bytes += len(text.encode()) + 1
            return
        report = Report.parse(text)
        if report is not None:
            self.invocations[logical_id] += 1
            self.seconds[logical_id] += report.duration_ms / 1000


def _requests(endpoint_url: str) -> dict[str, int]:
    from wakeup_local.aws.request_counter import COUNTS_PATH

    with urllib.request.urlopen(endpoint_url + COUNTS_PATH, timeout=10) as reply:
        counts: dict[str, int] = json.load(reply)
    return counts


def _child() -> int:
    from wakeup_local.stack import LocalStack

    logging.basicConfig(stream=sys.stderr, level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    protocol = os.fdopen(os.dup(sys.stdout.fileno()), "w", buffering=1)
    function_output = Path(os.environ["BENCH_FUNCTION_OUTPUT"])

    with function_output.open("w", encoding="utf-8") as function_log:
        stack = LocalStack(ROOT / "template.yaml", port=0, function_log=function_log)
        stack.start()
        memory = Memory()
        meter = FunctionLogMeter(function_output, [function.spec.logical_id for function in stack.functions])
        try:
            info = {
                "url": stack.url,
                "account_token": stack.account_token,
                "table": stack.table_name,
                "endpoint": stack.endpoint_url,
            }
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
                function_log.flush()
                meter.read()
                snapshot = {
                    "requests": _requests(stack.endpoint_url),
                    "invocations": dict(meter.invocations),
                    "seconds": dict(meter.seconds),
                    "log_bytes": meter.log_bytes,
                    "memory": memory.now(),
                    "event_sources": {
                        name: {
                            "batches": found.batches,
                            "messages": found.messages,
                            "max_in_flight": found.max_in_flight,
                        }
                        for name, found in stack.event_source_counters().items()
                    },
                }
                protocol.write(json.dumps(snapshot) + "\n")
        finally:
            memory.stop()
            stack.stop()
    return 0


# --- in the benchmark ------------------------------------------------------------------------------


class BenchStack:
    """The child above, started with `env` added to this process's environment."""

    def __init__(self, env: Mapping[str, str], module: str = "bench.stack") -> None:
        """`module`: the child's module (`wakeup_calibrate.local_trace` runs this one, traced)."""
        self._output = tempfile.NamedTemporaryFile(prefix="wakeup-bench-functions-", suffix=".log", delete=False)
        self._output.close()
        # The stack's own log, kept when it fails.
        self._stderr: IO[str] = tempfile.NamedTemporaryFile(
            "w", prefix="wakeup-bench-stack-", suffix=".log", delete=False
        )
        # The REPORT lines the meters read, whatever the template's SystemLogLevel.
        # The benchmark measures what the stack serves, not an account's rate: its one account may
        # send as many requests as an account may be allowed (wakeup.settings).
        environment = {
            **os.environ,
            SYSTEM_LOG_LEVEL_ENV: "INFO",
            "WAKEUP_ACCOUNT_REQUESTS_PER_S": str(MAX_ACCOUNT_REQUESTS_PER_S),
            **env,
            "BENCH_FUNCTION_OUTPUT": self._output.name,
        }
        self._process = subprocess.Popen(
            [sys.executable, "-m", module],
            cwd=ROOT,
            env=environment,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            text=True,
        )
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        info = self._answer(START_TIMEOUT_S)
        self.url = str(info["url"])
        self.account_token = str(info["account_token"])
        self.table = str(info["table"])
        self.endpoint_url = str(info["endpoint"])
        # Once stopped: the stack's memory (at rest, peak) and every invocation's REPORT, by function.
        self.memory: dict[str, float] = {}
        self.reports: list[tuple[str, Report]] = []
        self.functions_log = ""  # once stopped: what the functions printed

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

    @property
    def pid(self) -> int:
        """The stack's process, the parent of all its others (moto, the environments)."""
        return self._process.pid

    def counts(self) -> dict[str, Any]:
        return self._command("counts")

    def sweep(self) -> dict[str, Any]:
        return self._command("sweep")

    def stop(self) -> None:
        if self._process.poll() is None:
            self.memory = self.counts()["memory"]
            assert self._process.stdin is not None
            self._process.stdin.write("quit\n")
            self._process.stdin.close()
            try:
                self._process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self._process.terminate()
                self._process.wait(timeout=10)
        # The reader ends at the pipe's end, once the process has exited; then the pipe is closed.
        self._reader.join(timeout=10)
        if self._process.stdout is not None and not self._reader.is_alive():
            self._process.stdout.close()
        self._stderr.close()
        self.reports = read_reports(Path(self._output.name))
        self.functions_log = Path(self._output.name).read_text(errors="replace")
        Path(self._output.name).unlink(missing_ok=True)
        if self._process.returncode == 0:
            Path(self._stderr.name).unlink(missing_ok=True)


def read_reports(path: Path) -> list[tuple[str, Report]]:
    """Each REPORT line of the functions' log, with its function's logical id."""
    reports = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        if line.startswith("[") and "] REPORT RequestId:" in line:
            report = Report.parse(line)
            if report is not None:
                reports.append((line[1 : line.index("]")], report))
    return reports


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
