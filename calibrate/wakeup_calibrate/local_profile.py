"""The local stack's profile for the simulator, measured on this machine.

`measure()` starts a real local stack (`wakeup_local.LocalStack`: moto in its process, the caller
in execution environments up to the stack's bound, the SQS poller) and a loopback host, and runs
five rounds: idle; one wake (a cold start); a burst at one second (cold starts, a batch each);
the same burst again (warm); wakes a second apart (small batches, warm). Around each round it
reads the CPU time each process used (`/proc/<pid>/stat` for moto and the environments,
`process_time` for the stack's own process, which also serves the host): CPU time, not wall time,
so that other work on the machine does not skew it (it does not: a process's CPU time counts only
while it runs). From them: each process's CPU at rest (the poller's polling); moto's CPU per
request it serves (the functions', counted by moto, and the poller's receive and delete per
batch); the caller's CPU per invocation and per wake (from the two warm rounds); a cold start's
CPU (what the cold rounds used beyond that, in the environment and in the stack's process).

What it returns is a `Profile` in the simulator's terms, with the machine's cores, the local
poller's polling interval, and the caller's event source as the local stack resolves template.yaml
(read from `wakeup_local`, the stack's own settings, not measured).
"""

from __future__ import annotations

import json
import os
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path

import numpy

from bench.workload import Api, Host
from wakeup.arrival import QUEUE_LEAD_S
from wakeup.times import format_time
from wakeup_awsfacts.sqs_scaling import Scaling
from wakeup_awsfacts.template import Resolver, load_template
from wakeup_local.aws.request_counter import COUNTS_PATH
from wakeup_local.event_sources.sqs_poller import scaling_of
from wakeup_local.lambda_.functions import CONCURRENCY_ENV, DEFAULT_CONCURRENCY
from wakeup_local.stack import SWEEP_PERIOD_ENV, LocalStack
from wakeup_sim.deployment import ROOT, TEMPLATE
from wakeup_sim.profile import Profile

CALLER = "CallerFunction"
SPREAD_WAKES = 10
SPREAD_EVERY_S = 1.0
BURST_WAKES = 100
IDLE_S = 3.0
# How long ahead the wakes of a round are due, and more for each wake to register (by PUT_CLIENTS
# at once): the PUTs must be over before the first message can come (QUEUE_LEAD_S + 1 s ahead of
# its wake), since the meters are read after them.
LEAD_S = 4.0
PUT_ALLOWANCE_S = 0.05
PUT_CLIENTS = 8
ROUND_TIMEOUT_S = 120.0
# After the last call: time for the caller to record it and the poller to delete its messages.
SETTLE_S = 1.5
_TICK = os.sysconf("SC_CLK_TCK")


def cpu_s(pid: int) -> float:
    """The CPU time (user and system) a process has used, its threads that ended included."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / _TICK


@dataclass(frozen=True)
class Round:
    """A round of deliveries (or of nothing: the stack idle), and the CPU each process used."""

    wakes: int
    batches: int
    requests: int  # the functions' AWS requests (moto's counter)
    seconds: float
    moto_s: float
    caller_s: float
    stack_s: float
    cold_starts: int = 0


@dataclass(frozen=True)
class Measured:
    profile: Profile
    rounds: list[Round]
    loadavg: tuple[float, float, float]


def fit(rounds: list[Round], part: str, terms: list[str]) -> dict[str, float]:
    """The CPU per unit of each term (`batches`, `wakes`, `seconds`, `cold_starts`) that best
    explains each round's CPU in `part`, by least squares; a term that comes out negative (noise)
    is left out and the rest fitted again."""
    kept = list(terms)
    while True:
        matrix = numpy.array([[float(getattr(r, term)) for term in kept] for r in rounds])
        target = numpy.array([getattr(r, part) for r in rounds])
        solution = numpy.linalg.lstsq(matrix, target, rcond=None)[0]
        negative = [term for term, value in zip(kept, solution, strict=True) if value < 0]
        if not negative:
            fitted = dict(zip(kept, (float(value) for value in solution), strict=True))
            return {term: fitted.get(term, 0.0) for term in terms}
        kept.remove(negative[0])


def residual_per_cold_start(rounds: list[Round], part: str, per: dict[str, float]) -> float:
    """What `rounds` used in `part` beyond their batches, wakes and seconds, per cold start."""
    left = 0.0
    for r in rounds:
        left += float(getattr(r, part)) - sum(per.get(t, 0.0) * float(getattr(r, t)) for t in per)
    return max(left / max(sum(r.cold_starts for r in rounds), 1), 0.0)


class _Bench:
    """The local stack, one caller environment, a loopback host, and the meters read around a round."""

    def __init__(self, stack: LocalStack, host: Host) -> None:
        self.stack, self.host = stack, host
        self.api = Api(stack.url, stack.account_token)
        self.moto = stack.moto_pid
        self.made = 0

    def caller_s(self) -> float:
        pids = self.stack.functions.by_logical_id(CALLER).pool.pids()
        return sum(cpu_s(pid) for pid in pids)

    def counters(self) -> tuple[int, int]:
        found = self.stack.event_source_counters()
        return sum(c.batches for c in found.values()), sum(c.messages for c in found.values())

    def idle(self) -> Round:
        """The stack with nothing to do: its poller's polling."""
        moto, own, started = cpu_s(self.moto), time.process_time(), time.monotonic()
        time.sleep(IDLE_S)
        seconds = time.monotonic() - started
        return Round(0, 0, 0, seconds, cpu_s(self.moto) - moto, 0.0, time.process_time() - own)

    def deliver(self, dues: list[float]) -> Round:
        """Wakes due at `dues` (seconds from now): registered, then delivered, and what they cost."""
        paths, tokens = [], []
        for _ in dues:
            path = f"/m{self.made}"
            self.made += 1
            _, token, _ = self.api.register(f"{self.host.url}{path}")
            paths.append(path)
            tokens.append(token)
        start = time.time() + LEAD_S + PUT_ALLOWANCE_S * len(dues)
        with ThreadPoolExecutor(PUT_CLIENTS) as clients:
            list(clients.map(lambda token, due: self.api.wake(token, format_time_at(start + due)), tokens, dues))
        if time.time() > start + min(dues) - (QUEUE_LEAD_S + 1):
            raise RuntimeError("registering the round's wakes took longer than their lead: the meters would miss some")
        batches, _ = self.counters()
        environments = self.stack.functions.by_logical_id(CALLER).pool.size
        requests = functions_requests(self.stack.endpoint_url)
        moto, caller, own, began = cpu_s(self.moto), self.caller_s(), time.process_time(), time.monotonic()
        if not self.host.wait_for(paths, 1, time.monotonic() + (start - time.time()) + max(dues) + ROUND_TIMEOUT_S):
            raise RuntimeError("the measuring round's wakes were not all called")
        time.sleep(SETTLE_S)
        seconds = time.monotonic() - began
        return Round(
            wakes=len(dues),
            batches=self.counters()[0] - batches,
            requests=functions_requests(self.stack.endpoint_url) - requests,
            seconds=seconds,
            moto_s=cpu_s(self.moto) - moto,
            caller_s=self.caller_s() - caller,
            stack_s=time.process_time() - own,
            cold_starts=self.stack.functions.by_logical_id(CALLER).pool.size - environments,
        )


def format_time_at(epoch: float) -> str:
    return format_time(datetime.fromtimestamp(epoch, UTC))


def functions_requests(endpoint_url: str) -> int:
    """The AWS requests the functions have made so far (moto's counter)."""
    with urllib.request.urlopen(endpoint_url + COUNTS_PATH, timeout=10) as reply:
        return sum(json.load(reply).values())


@contextmanager
def _local_stack() -> Iterator[_Bench]:
    env = {SWEEP_PERIOD_ENV: "86400"}
    with tempfile.TemporaryFile("w+") as function_log, Host() as host:
        stack = LocalStack(ROOT / "template.yaml", env=env, function_log=function_log)
        with stack:
            yield _Bench(stack, host)


def concurrency() -> int:
    """The local stack's bound on a function's environments (`WAKEUP_LOCAL_CONCURRENCY`)."""
    return int(os.environ.get(CONCURRENCY_ENV) or DEFAULT_CONCURRENCY)


def local_scaling(bound: int | None = None) -> Scaling:
    """The caller's event source as the local stack runs template.yaml's: its mapping's scaling,
    bounded by the stack's concurrency (`wakeup_local.event_sources.sqs_poller.event_sources`), or `bound`."""
    template = load_template(TEMPLATE)
    events = Resolver(template, stack_name="sim").resolve(template.resources[CALLER]["Properties"]["Events"])
    for name, event in events.items():
        if event.get("Type") == "SQS":
            return scaling_of(f"{CALLER}.{name}", event["Properties"], bound or concurrency())
    raise ValueError("the caller has no SQS event")


def cores() -> int:
    return len(os.sched_getaffinity(0))


def measure() -> Measured:
    """Measures the local stack on this machine (under a minute) and returns its profile."""
    loadavg = os.getloadavg()
    # The stack's own bound on the caller's environments, so that a burst runs as many at once,
    # each as busy, as the bursts it is compared with.
    with _local_stack() as bench:
        rounds = [
            bench.idle(),
            bench.deliver([0.0]),  # one cold start
            bench.deliver([0.0] * BURST_WAKES),  # more cold starts: a batch each
            bench.deliver([0.0] * BURST_WAKES),  # the same, on the environments now warm
            bench.deliver([i * SPREAD_EVERY_S for i in range(SPREAD_WAKES)]),  # a batch a wake, warm
        ]
    delivering = rounds[1:]
    warm = [r for r in rounds if not r.cold_starts]
    cold = [r for r in rounds if r.cold_starts]
    # The idle round gives each process's polling per second. moto serves the functions' requests
    # and, per batch, the poller's receive and delete: one CPU cost per request fits them all.
    # The caller's CPU per batch and per wake comes from the warm rounds; a cold start's CPU is
    # what the cold rounds used beyond that (in the environment, and in the stack's process, which
    # starts it).
    idle = rounds[0]
    moto_idle_per_s, stack_idle_per_s = idle.moto_s / idle.seconds, idle.stack_s / idle.seconds
    # moto's CPU per request from the bursts only: in the rounds of few wakes its idle polling is
    # most of what it used, and taking that off leaves mostly noise.
    bursts = [r for r in delivering if r.wakes >= BURST_WAKES]
    served = sum(r.requests + 2 * r.batches for r in bursts)
    moto_per_request = max(sum(r.moto_s - moto_idle_per_s * r.seconds for r in bursts) / served, 0.0)
    caller = fit([r for r in warm if r.wakes], "caller_s", ["batches", "wakes"])
    busy_stack = [replace(r, stack_s=r.stack_s - stack_idle_per_s * r.seconds) for r in delivering]
    stack = fit([r for r in busy_stack if not r.cold_starts], "stack_s", ["batches", "wakes"])
    caller["cold_starts"] = residual_per_cold_start(cold, "caller_s", caller)
    stack["cold_starts"] = residual_per_cold_start([r for r in busy_stack if r.cold_starts], "stack_s", stack)
    # The caller's AWS requests per wake, as moto counted them (the poller's are not counted), from
    # the warm rounds; what the cold rounds made beyond that, per cold start (its signing keys).
    warm_delivering = [r for r in warm if r.wakes]
    requests_per_wake = sum(r.requests for r in warm_delivering) / sum(r.wakes for r in warm_delivering)
    cold_start_requests = max(
        sum(r.requests - requests_per_wake * r.wakes for r in cold) / max(sum(r.cold_starts for r in cold), 1), 0.0
    )
    scaling = local_scaling()
    profile = Profile(
        "local",
        init_cpu_s=caller["cold_starts"] + stack["cold_starts"],
        invocation_cpu_s=caller["batches"],
        # The caller's CPU per wake, shared out over its requests and its host call.
        aws_request_cpu_s=caller["wakes"] / (requests_per_wake + 1),
        host_call_cpu_s=caller["wakes"] / (requests_per_wake + 1),
        dynamodb_latency_s=0.0,
        sqs_latency_s=0.0,
        scheduler_latency_s=0.0,
        receive_latency_s=0.0,
        host_median_s=0.0,
        host_sigma=0.0,
        cores=cores(),
        idle_cores=moto_idle_per_s + stack_idle_per_s,
        service_cpu_s=moto_per_request,
        cold_start_requests=cold_start_requests,
        batch_service_cpu_s=2 * moto_per_request,
        batch_cpu_s=stack["batches"],
        message_cpu_s=stack["wakes"],
        # The local poller long-polls as Lambda's does: a message is received as it comes due.
        poll_interval_s=0.0,
        scaling=scaling,
    )
    return Measured(profile, rounds, loadavg)
