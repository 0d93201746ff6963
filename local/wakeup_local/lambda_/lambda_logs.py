"""The functions' log: what their environments print, and the lines Lambda's service adds.

`START`, `END` and `REPORT` are printed by Lambda itself, not by the runtime client, so the local
stack prints them, in the format of "AWS Lambda function logging in Python"
(https://docs.aws.amazon.com/lambda/latest/dg/python-logging.html): tab-separated fields, `Init
Duration` on a cold start's first invocation, `Status: timeout` when Lambda stopped the handler.
Since Lambda bills the init phase of on-demand functions too, `Billed Duration` is the invocation's
and the init's milliseconds, rounded up (the page's example: Duration 2.75 ms, Init Duration
113.51 ms, Billed Duration 117 ms).
"""

from __future__ import annotations

import math
import re
import sys
import threading
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import IO

_REPORT = re.compile(
    r"REPORT RequestId: (?P<request_id>\S+)\tDuration: (?P<duration>\d+\.\d\d) ms"
    r"\tBilled Duration: (?P<billed>\d+) ms\tMemory Size: (?P<memory>\d+) MB"
    r"\tMax Memory Used: (?P<used>\d+) MB(?:\tInit Duration: (?P<init>\d+\.\d\d) ms)?"
    r"(?:\tStatus: (?P<status>\w+))?(?:\tError Type: (?P<error_type>[\w.]+))?\t"
)


def start_line(request_id: str) -> str:
    return f"START RequestId: {request_id} Version: $LATEST"


def end_line(request_id: str) -> str:
    return f"END RequestId: {request_id}"


def timeout_line(request_id: str, timeout_s: float) -> str:
    """What Lambda prints (and answers) when it stops a handler at its timeout."""
    now = datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    return f"{now} {request_id} Task timed out after {timeout_s:.2f} seconds"


@dataclass(frozen=True)
class Report:
    """One `REPORT` line's fields."""

    request_id: str
    duration_ms: float
    billed_duration_ms: int
    memory_size_mb: int
    max_memory_used_mb: int
    init_duration_ms: float | None = None
    status: str | None = None
    error_type: str | None = None

    @classmethod
    def of(
        cls,
        request_id: str,
        duration_ms: float,
        memory_size_mb: int,
        max_memory_used_mb: int,
        init_duration_ms: float | None = None,
        status: str | None = None,
        error_type: str | None = None,
    ) -> Report:
        billed = math.ceil(round(duration_ms + (init_duration_ms or 0.0), 2))
        return cls(
            request_id, duration_ms, billed, memory_size_mb, max_memory_used_mb, init_duration_ms, status, error_type
        )

    def line(self) -> str:
        fields = [
            f"REPORT RequestId: {self.request_id}",
            f"Duration: {self.duration_ms:.2f} ms",
            f"Billed Duration: {self.billed_duration_ms} ms",
            f"Memory Size: {self.memory_size_mb} MB",
            f"Max Memory Used: {self.max_memory_used_mb} MB",
        ]
        if self.init_duration_ms is not None:
            fields.append(f"Init Duration: {self.init_duration_ms:.2f} ms")
        if self.status is not None:
            fields.append(f"Status: {self.status}")
        if self.error_type is not None:
            fields.append(f"Error Type: {self.error_type}")
        return "\t".join(fields) + "\t"

    @classmethod
    def parse(cls, line: str) -> Report | None:
        """The report in a line of the stack's output (with or without its function prefix), else None."""
        match = _REPORT.search(line)
        if match is None:
            return None
        init = match.group("init")
        return cls(
            request_id=match.group("request_id"),
            duration_ms=float(match.group("duration")),
            billed_duration_ms=int(match.group("billed")),
            memory_size_mb=int(match.group("memory")),
            max_memory_used_mb=int(match.group("used")),
            init_duration_ms=float(init) if init is not None else None,
            status=match.group("status"),
            error_type=match.group("error_type"),
        )


def prefix(function: str) -> str:
    """What each line of a function's output starts with in the stack's log."""
    return f"[{function}] "


class FunctionLog:
    """Where the environments' output goes, each line prefixed with its function's logical id.

    By default the stack's stderr (looked up at each write, so a redirection made after the stack
    started holds): stdout is kept for the lines `wakeup-local` prints for scripts.
    """

    def __init__(self, stream: IO[str] | None = None) -> None:
        self._stream = stream
        self._lock = threading.Lock()

    def write(self, function: str, text: str) -> None:
        # The runtime client ends the lines of one log record with "\r" (so CloudWatch keeps them
        # in one event); a terminal would print them over each other.
        lines = text.replace("\r\n", "\n").replace("\r", "\n").rstrip("\n").split("\n")
        start = prefix(function)
        out = "".join(f"{start}{line}\n" for line in lines)
        stream = self._stream or sys.stderr
        with self._lock:
            stream.write(out)
            stream.flush()
