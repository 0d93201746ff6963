"""`python -m wakeup_calibrate.local_trace`: `python -m bench.stack`, with each SQS batch's timeline kept.

The calibration runs the local stack in a process of its own (as `make bench` does); this is that
process, with the local stack's SQS poller and execution environments wrapped so that every batch
of the caller's queue leaves one JSON line in the file `WAKEUP_TRACE` names: when the poller
handed it over and when its invocation ended; the environment (its pid; cold, with its start, or
warm) and when it took the invocation; and for each record, its message's `SentTimestamp` and
`ApproximateFirstReceiveTimestamp` (what SQS says of it) and its trigger. Nothing else changes:
the wrappers only read the clock around the calls they wrap.
"""

from __future__ import annotations

import json
import os
import threading
import time
from typing import Any

from bench import stack as bench_stack
from wakeup_local.event_sources.sqs_poller import SqsPoller
from wakeup_local.lambda_.environment import ExecutionEnvironment

TRACE_ENV = "WAKEUP_TRACE"


def install(path: str) -> None:
    out = open(path, "a", buffering=1, encoding="utf-8")  # noqa: SIM115 - open for the process's life
    lock = threading.Lock()
    invocation = threading.local()  # what the environment did for the batch this thread invokes

    def write(event: dict[str, Any]) -> None:
        with lock:
            out.write(json.dumps(event) + "\n")

    poller_invoke = SqsPoller._invoke
    environment_start = ExecutionEnvironment.start
    environment_invoke = ExecutionEnvironment.invoke

    def traced_invoke(self: SqsPoller, source: Any, messages: list[Any]) -> None:
        invocation.env = {}
        handed = time.time()
        try:
            poller_invoke(self, source, messages)
        finally:
            records = [
                {
                    "body": json.loads(message.get("Body", "{}")),
                    "sent": int(message["Attributes"]["SentTimestamp"]) / 1000,
                    "received": int(message["Attributes"]["ApproximateFirstReceiveTimestamp"]) / 1000,
                }
                for message in messages
            ]
            write({"source": source.name, "handed": handed, "done": time.time(), "records": records, **invocation.env})

    def traced_start(self: ExecutionEnvironment) -> None:
        began = time.time()
        environment_start(self)
        if getattr(invocation, "env", None) is not None:
            invocation.env["cold_start"] = [began, time.time()]

    def traced_environment_invoke(self: ExecutionEnvironment, payload: bytes) -> bytes:
        if getattr(invocation, "env", None) is not None:
            invocation.env.update(pid=self.pid, invoked=time.time())
        return environment_invoke(self, payload)

    SqsPoller._invoke = traced_invoke  # type: ignore[method-assign]
    ExecutionEnvironment.start = traced_start  # type: ignore[method-assign]
    ExecutionEnvironment.invoke = traced_environment_invoke  # type: ignore[method-assign]


if __name__ == "__main__":
    install(os.environ[TRACE_ENV])
    raise SystemExit(bench_stack._child())
