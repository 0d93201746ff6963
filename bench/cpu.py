"""What the local stack costs in CPU, and how fast it takes registrations and a burst of wakes.

On two cores a burst's lateness is bounded by the CPU each wake costs the whole stack, so this part
of the benchmark reads CPU time, not wall time: every process of the stack (its own, moto's, the
functions' environments, those that ended included) from `/proc`. A process's CPU time counts only
while it runs, so other work on the machine barely changes it, as it changes any wall-clock rate.

`python -m bench.cpu` runs this part alone and prints its figures as one JSON line (to compare two
checkouts of the project in one sitting, each with its own `.venv`).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path

from bench.processes import family, stat_fields
from bench.stack import BenchStack
from bench.workload import Api, Host
from wakeup.times import format_time
from wakeup_cost.stats import percentile

_TICK = os.sysconf("SC_CLK_TCK")
CLIENTS = 16
# After the last call: time for the caller to record it and the poller to delete its messages.
SETTLE_S = 1.5
# PUTs from CLIENTS clients before any is measured: every environment of the wake function started.
WARM_UP = 3 * CLIENTS
NO_SWEEPS = {"WAKEUP_LOCAL_SWEEP_S": "86400"}
FAR_AHEAD_S = 86_400.0
# Seconds before the wakes' time when the burst's CPU starts counting: before their messages are
# visible (`wakeup.arrival.QUEUE_LEAD_S`, 1 s, ahead of the time).
DELIVERY_METER_LEAD_S = 3.0


class CpuMeter:
    """CPU seconds (user and system) of a process and all its descendants, by kind: "stack" (the
    process itself), "moto", each function's environments by handler module. A descendant that
    ended keeps, under its kind, the time it had when last read; what it used after that is
    "ended" (its time is then in its parent's cutime and cstime)."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self._last: dict[int, tuple[str, float]] = {}
        self._retired: defaultdict[str, float] = defaultdict(float)

    def read(self) -> dict[str, float]:
        current: dict[int, tuple[str, float]] = {}
        waited_for = 0.0
        for pid in family(self.pid):
            try:
                fields = stat_fields(pid)
                command = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            kind = "stack" if pid == self.pid else _kind(command)
            current[pid] = (kind, (int(fields[11]) + int(fields[12])) / _TICK)
            waited_for += (int(fields[13]) + int(fields[14])) / _TICK
        for pid, (kind, cpu) in self._last.items():
            if pid not in current:
                self._retired[kind] += cpu
        self._last = current
        found = defaultdict(float, self._retired)
        for kind, cpu in current.values():
            found[kind] += cpu
        found["ended"] = waited_for - sum(self._retired.values())
        return dict(found)


def _kind(command: list[bytes]) -> str:
    # A forked environment's command line is one string of words (set by its fork server).
    words = b" ".join(command).decode(errors="replace").split()
    # moto's fork server and the motos it forked (wakeup_local.aws.moto_child), or a moto of its own
    # (wakeup_local.aws.moto_process, before the fork server): a checkout before either compares too,
    # when the two were wakeup_local.moto_child and wakeup_local.moto_process
    if any(word.startswith(("wakeup_local.moto_", "wakeup_local.aws.moto_")) for word in words):
        return "moto"
    if any(word.endswith("environment_forker.py") for word in words):
        return "environments' fork server"
    return words[-1].split(".")[0] if words else "?"


@dataclass
class Rate:
    """Requests from `CLIENTS` clients at once: how many a second, and the stack's CPU for each."""

    name: str
    requests: int
    per_s: float
    cpu_ms: float
    by_process_ms: dict[str, float]


@dataclass
class BurstResult:
    wakes: int
    late_s: list[float]
    duplicates: int
    cpu_ms_per_wake: float
    registered_by_s: float
    by_process_ms: dict[str, float]

    @property
    def called(self) -> int:
        return len(self.late_s)

    @property
    def early(self) -> int:
        return sum(1 for late in self.late_s if late < 0)


def concurrently(name: str, meter: CpuMeter, count: int, request: Callable[[int], object]) -> Rate:
    """`count` requests from `CLIENTS` threads, each with its own connections."""
    before = meter.read()
    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=CLIENTS) as pool:
        list(pool.map(request, range(count)))
    wall = time.perf_counter() - started
    used = per_item_ms(meter.read(), before, count)
    return Rate(name, count, count / wall, sum(used.values()), used)


def per_item_ms(after: dict[str, float], before: dict[str, float], count: int) -> dict[str, float]:
    used = {kind: (after.get(kind, 0.0) - before.get(kind, 0.0)) * 1000 / count for kind in after.keys() | before}
    return {kind: value for kind, value in sorted(used.items()) if value}


def iso(epoch: float) -> str:
    return format_time(datetime.fromtimestamp(epoch, UTC))


def registrations_and_burst(
    host: Host, stack: BenchStack, wakes: int, far: int, prefix: str = "/b"
) -> tuple[list[Rate], BurstResult]:
    """POST `wakes + far` instances, PUT a far wake on `far` of them, then a near wake due at one
    second on the `wakes` others (all from `CLIENTS` clients); then waits for the burst's calls.
    The instances are at `prefix` and a number on `host`."""
    api = Api(stack.url, stack.account_token)
    meter = CpuMeter(stack.pid)
    tokens: list[str] = [""] * (wakes + far)
    lock = threading.Lock()

    def register(index: int) -> None:
        _, token, _ = api.register(f"{host.url}{prefix}{index}")
        with lock:
            tokens[index] = token

    rates = [concurrently("POST /wakeup/instances", meter, wakes + far, register)]
    far_at = iso(time.time() + FAR_AHEAD_S)
    # The wake function's environments started (cold starts are a burst's, not a PUT's cost).
    concurrently("warm-up", meter, min(WARM_UP, far), lambda i: api.wake(tokens[wakes + i], far_at))
    rates.append(concurrently("PUT /wakeup/wake (far)", meter, far, lambda i: api.wake(tokens[wakes + i], far_at)))
    # Due once every PUT is surely over (at the far PUTs' rate, with room to spare), and whole.
    at = float(math.ceil(time.time() + 5 + 2 * wakes / rates[-1].per_s))
    rates.append(concurrently("PUT /wakeup/wake (near)", meter, wakes, lambda i: api.wake(tokens[i], iso(at))))
    registered_by = at - time.time()
    # The meter starts just before the first message can be received: the burst's delivery, not
    # the wait for it (whose length follows the PUTs' rate).
    time.sleep(max(0.0, at - DELIVERY_METER_LEAD_S - time.time()))
    before = meter.read()
    paths = [f"{prefix}{index}" for index in range(wakes)]
    host.wait_for(paths, 1, time.monotonic() + (at - time.time()) + 120)
    time.sleep(SETTLE_S)
    used = per_item_ms(meter.read(), before, wakes)
    first = host.first_calls(paths)
    late = [first[path] - at for path in paths if path in first]
    duplicates = sum(1 for path in paths if len(host.calls.get(path, [])) > 1)
    return rates, BurstResult(wakes, late, duplicates, sum(used.values()), registered_by, used)


def summary(rates: Sequence[Rate], burst: BurstResult) -> dict[str, object]:
    return {
        "rates": [asdict(rate) for rate in rates],
        "burst": {
            "wakes": burst.wakes,
            "called": burst.called,
            "duplicates": burst.duplicates,
            "early": burst.early,
            "p50_s": percentile(burst.late_s, 50) if burst.late_s else None,
            "p99_s": percentile(burst.late_s, 99) if burst.late_s else None,
            "max_s": max(burst.late_s, default=None),
            "cpu_ms_per_wake": burst.cpu_ms_per_wake,
            "registered_by_s": burst.registered_by_s,
            "by_process_ms": burst.by_process_ms,
        },
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.cpu", description=__doc__)
    parser.add_argument("--wakes", type=int, default=1_000, help="wakes due at one second")
    parser.add_argument("--far", type=int, default=300, help="far wakes (PUTs through the Scheduler)")
    args = parser.parse_args(argv)
    with Host() as host:
        stack = BenchStack(NO_SWEEPS)
        try:
            rates, burst = registrations_and_burst(host, stack, args.wakes, args.far)
        finally:
            stack.stop()
    print(json.dumps(summary(rates, burst)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
