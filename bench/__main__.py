"""`python -m bench` (`make bench`): measures, then prints a Markdown report on stdout."""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from bench import cold_start, seen
from bench.at_size import SEED_THREADS, RegistrationRate, registration_rate, seed_instances
from bench.cpu import BurstResult, Rate, registrations_and_burst
from bench.stack import NO_SWEEPS, BenchStack, difference
from bench.workload import BURST_DELIVERY_TIMEOUT_S, FLAKY, SETTLE_S, Api, Host, due_at, iso, warm_up
from wakeup_cost import cost
from wakeup_cost.stats import percentile, table
from wakeup_local.lambda_.lambda_logs import Report
from wakeup_sim import capacity

# A wake "near" is within the SQS horizon (840 s by default), a far one beyond it.
NEAR = timedelta(minutes=10)
FAR = timedelta(days=1)
# The far-wake stack: schedules for anything past 5 s, firing 3 s early and on time.
FAR_STACK = {
    "WAKEUP_SQS_HORIZON_S": "5",
    "WAKEUP_SCHEDULE_LEAD_S": "3",
    "WAKEUP_LOCAL_EXACT_SCHEDULES": "1",
}
# The local developer's setting: SQS event sources start at their full concurrency, no throttles.
UNBOUNDED = {"WAKEUP_LOCAL_UNBOUNDED": "1"}
DELIVERY_TIMEOUT_S = 60
# Clients registering at once for the registration rate, each with connections of its own.
CONCURRENT_CLIENTS = 16
# The wakes due on a freshly started stack, this long after their PUTs (issue 36: seconds).
FRESH_AFTER_S = 5.0
# A burst registered this long before its second: the planner's runs see it, and none does.
SEEN_AHEAD_S = (120.0, 15.0)


def say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def machine() -> str:
    cpu = "unknown CPU"
    try:
        for line in open("/proc/cpuinfo").read().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    memory = ""
    try:
        kib = int(open("/proc/meminfo").readline().split()[1])
        memory = f", {kib / 1024 / 1024:.0f} GiB RAM"
    except (OSError, ValueError, IndexError):
        pass
    load = ", ".join(f"{value:.2f}" for value in os.getloadavg())
    return (
        f"{platform.system()} {platform.release()} ({platform.machine()}), {cpu}, {os.cpu_count()} CPUs{memory}; "
        f"load average at start {load}"
    )


@dataclass
class Latencies:
    name: str
    seconds: list[float]

    def row(self) -> list[object]:
        return [
            self.name,
            len(self.seconds),
            f"{percentile(self.seconds, 50) * 1000:.1f} ms",
            f"{percentile(self.seconds, 99) * 1000:.1f} ms",
            f"{max(self.seconds) * 1000:.1f} ms",
        ]


@dataclass
class Lateness:
    name: str
    wakes: int
    late_s: list[float]
    registered_by_s: float  # how long before the wakes' time the last one was registered
    duplicates: int

    def row(self) -> list[object]:
        missing = self.wakes - len(self.late_s)
        return [
            self.name,
            self.wakes,
            f"{percentile(self.late_s, 50) * 1000:.0f} ms",
            f"{percentile(self.late_s, 99) * 1000:.0f} ms",
            f"{max(self.late_s) * 1000:.0f} ms",
            f"{min(self.late_s) * 1000:.0f} ms",
            missing,
            self.duplicates,
            f"{self.registered_by_s:.1f} s",
        ]


def measured(before: dict[str, Any], stack: BenchStack) -> tuple[dict[str, Any], dict[str, Any]]:
    """What the stack counted since `before`, and the new snapshot."""
    after = stack.counts()
    return difference(after, before), after


@contextmanager
def running_stack(env: dict[str, str], results: Results, name: str) -> Iterator[tuple[BenchStack, Api]]:
    """A stack for one part of the benchmark; once stopped, its REPORT lines and memory are kept."""
    stack = BenchStack(env)
    api = Api(stack.url, stack.account_token)
    try:
        yield stack, api
    finally:
        stack.stop()
        results.reports += stack.reports
        if stack.memory:
            results.memory.append((name, stack.memory))


def register_many(api: Api, host: Host, prefix: str, count: int) -> tuple[list[str], list[str]]:
    """`count` instances at `host`: their paths there, and their tokens."""
    paths, tokens = [], []
    for index in range(count):
        _, token, _ = api.register(f"{host.url}{prefix}{index}")
        paths.append(f"{prefix}{index}")
        tokens.append(token)
    return paths, tokens


def deliver(
    api: Api,
    host: Host,
    stack: BenchStack,
    name: str,
    paths: list[str],
    tokens: list[str],
    lead_s: float,
    calls: int,
    timeout_s: float = DELIVERY_TIMEOUT_S,
) -> tuple[Lateness, dict[str, Any], dict[str, Any]]:
    """Registers a wake for each instance, all at one second `lead_s` ahead at least, and waits for
    their calls: the lateness, and what the stack counted for the PUTs and for the delivery."""
    at = due_at(lead_s)
    before = stack.counts()
    for token in tokens:
        api.wake(token, iso(at))
    registered_by = at - time.time()
    puts, middle = measured(before, stack)
    delivered = host.wait_for(paths, calls, time.monotonic() + (at - time.time()) + timeout_s)
    if not delivered:
        say(f"{name}: not every wake was called within {timeout_s} s of its time")
    time.sleep(SETTLE_S)
    delivery, _ = measured(middle, stack)
    first = host.first_calls(paths)
    late = [first[path] - at for path in paths if path in first]
    duplicates = sum(1 for path in paths if len(host.calls.get(path, [])) > calls)
    return Lateness(name, len(paths), late, registered_by, duplicates), puts, delivery


def wake_usage(puts: dict[str, Any], delivery: dict[str, Any], count: int, scheduled: bool = False) -> cost.Usage:
    """What one wake cost, its PUT included. Each caller invocation is an SQS batch, but for the one
    its schedule made when `scheduled`."""
    invocations = delivery["invocations"].get("CallerFunction", 0) / count
    scheduler = 1.0 if scheduled else 0.0
    return cost.Usage.per(puts, count, api_requests=1) + cost.Usage.per(
        delivery, count, scheduler_invocations=scheduler, sqs_batches=invocations - scheduler
    )


def lead_for(count: int, put_s: float, minimum_s: float) -> float:
    """Time enough to register `count` wakes before they are due."""
    return minimum_s + 1.5 * count * put_s


@dataclass
class Burst:
    """A burst of wakes at one second, and what the caller's SQS event source did for it."""

    setting: str
    lateness: Lateness
    batches: int
    most_at_once: int

    def row(self) -> list[object]:
        late = self.lateness
        return [
            self.setting,
            late.wakes,
            f"{percentile(late.late_s, 50) * 1000:.0f} ms",
            f"{percentile(late.late_s, 99) * 1000:.0f} ms",
            f"{max(late.late_s) * 1000:.0f} ms",
            late.wakes - len(late.late_s),
            self.batches,
            self.most_at_once,
        ]


@dataclass
class Results:
    latencies: list[Latencies]
    lateness: list[Lateness]
    usages: dict[str, cost.Usage]
    reports: list[tuple[str, Report]] = field(default_factory=list)
    memory: list[tuple[str, dict[str, float]]] = field(default_factory=list)
    rates: list[RegistrationRate] = field(default_factory=list)
    bursts: list[Burst] = field(default_factory=list)
    seeded_s: float = 0.0
    cpu_rates: list[Rate] = field(default_factory=list)
    cpu_burst: BurstResult | None = None
    burst_timeouts: int = 0  # caller invocations of the burst that ran past their timeout
    seen: list[seen.Seen] = field(default_factory=list)  # bench.seen's rows


def api_latency(host: Host, requests: int, results: Results) -> float:
    """(b) The API's latency, one request after the other; returns the median PUT's seconds."""
    with running_stack(NO_SWEEPS, results, "API latency") as (stack, api):
        warm_up(api, host)
        before = stack.counts()
        registered: list[tuple[str, str]] = []

        def register(index: int) -> float:
            instance_id, token, elapsed = api.register(f"{host.url}/api{index}")
            registered.append((instance_id, token))
            return elapsed

        def phase(name: str, count: int, action: Callable[[int], float], usage: str) -> None:
            nonlocal before
            results.latencies.append(Latencies(name, [action(index) for index in range(count)]))
            counted, before = measured(before, stack)
            results.usages[usage] = cost.Usage.per(counted, count, api_requests=1)

        near_at = iso(time.time() + NEAR.total_seconds())
        far_at = iso(time.time() + FAR.total_seconds())
        phase("POST /wakeup/instances", 2 * requests, register, "POST instance")
        phase("GET /wakeup/instances/{id}", requests, lambda i: api.get(registered[i][0]), "GET instance")
        # A first wake for each instance: near ones on the first half, far ones on the other.
        phase("PUT /wakeup/wake (near: SQS)", requests, lambda i: api.wake(registered[i][1], near_at), "PUT near")
        phase(
            "PUT /wakeup/wake (far: Scheduler)",
            requests,
            lambda i: api.wake(registered[requests + i][1], far_at),
            "PUT far",
        )
        before = stack.counts()
        results.usages["one sweep"] = cost.Usage.per(difference(stack.sweep(), before), 1)
    return percentile(results.latencies[2].seconds, 50)


def near_wakes(host: Host, wakes: int, few: int, put_s: float, results: Results) -> None:
    """(c) Many wakes due at one second through SQS, a few, and a few whose host fails once."""
    with running_stack(NO_SWEEPS, results, "near wakes") as (stack, api):
        warm_up(api, host)
        many = register_many(api, host, "/near", wakes)
        small = register_many(api, host, "/few", few)
        flaky = register_many(api, host, FLAKY, few)
        late, puts, delivery = deliver(api, host, stack, f"{wakes} near", *many, lead_for(wakes, put_s, 1), calls=1)
        results.lateness.append(late)
        results.usages["near wake"] = wake_usage(puts, delivery, wakes)
        late, puts, delivery = deliver(api, host, stack, f"{few} near", *small, lead_for(few, put_s, 1), calls=1)
        results.lateness.append(late)
        baseline = wake_usage(puts, delivery, few)
        late, puts, delivery = deliver(
            api, host, stack, f"{few} near, host fails once", *flaky, lead_for(few, put_s, 1), calls=2
        )
        results.lateness.append(late)
        results.usages["a retry (extra)"] = wake_usage(puts, delivery, few) - baseline


def far_wakes(host: Host, wakes: int, put_s: float, results: Results) -> None:
    """Far wakes: a schedule first (fired on time by the local Scheduler, `lead` early), then SQS."""
    with running_stack({**NO_SWEEPS, **FAR_STACK}, results, "far wakes") as (stack, api):
        warm_up(api, host)
        paths, tokens = register_many(api, host, "/far", wakes)
        minimum = float(FAR_STACK["WAKEUP_SQS_HORIZON_S"]) + 3
        late, puts, delivery = deliver(
            api, host, stack, f"{wakes} far", paths, tokens, lead_for(wakes, put_s, minimum), calls=1
        )
        results.lateness.append(late)
        results.usages["far wake"] = wake_usage(puts, delivery, wakes, scheduled=True)


def registration_at_size(host: Host, seed: int, requests: int, results: Results) -> None:
    """POST /wakeup/instances with `seed` instances already in the table: one client, then many."""
    # The account's instance limit (10,000 by default) raised above the seeded table and the new ones.
    limit = {"WAKEUP_MAX_INSTANCES_PER_ACCOUNT": str(seed + 10 * requests + 1_000)}
    with running_stack({**NO_SWEEPS, **limit}, results, "registration at size") as (stack, api):
        warm_up(api, host)
        say(f"seeding {seed} instances ...")
        results.seeded_s = seed_instances(stack, seed)
        table_size = f"{seed:,} in the table"
        results.rates.append(registration_rate(api, table_size, 1, requests))
        per_client = max(1, 4 * requests // CONCURRENT_CLIENTS)
        results.rates.append(registration_rate(api, table_size, CONCURRENT_CLIENTS, per_client))


def cpu_and_rates(host: Host, wakes: int, far: int, results: Results) -> None:
    """On a stack with template.yaml's defaults: registrations from many clients and their CPU, then
    `wakes` near wakes due at one second on a caller idle until then, and their CPU (bench/cpu.py)."""
    setting = "AWS-like (default)"
    with running_stack(NO_SWEEPS, results, f"burst, {setting}") as (stack, _):
        rates, burst = registrations_and_burst(host, stack, wakes, far, prefix="/cpu")
        sources = stack.counts()["event_sources"].values()
        batches = sum(source["batches"] for source in sources)
        most = max((source["max_in_flight"] for source in sources), default=0)
    results.cpu_rates, results.cpu_burst = rates, burst
    results.burst_timeouts = sum(1 for _, report in stack.reports if report.status == "timeout")
    late = Lateness(f"{wakes} near ({setting})", wakes, burst.late_s, burst.registered_by_s, burst.duplicates)
    results.bursts.append(Burst(setting, late, batches, most))


def burst_of_wakes(host: Host, wakes: int, put_s: float, results: Results) -> None:
    """`wakes` near wakes due at one second with the local SQS scaling lifted (the AWS-like row is
    `cpu_and_rates`')."""
    for setting, env in (("`WAKEUP_LOCAL_UNBOUNDED=1`", UNBOUNDED),):
        with running_stack({**NO_SWEEPS, **env}, results, f"burst, {setting}") as (stack, api):
            warm_up(api, host)
            paths, tokens = register_many(api, host, f"/burst{len(results.bursts)}-", wakes)
            late, _, _ = deliver(
                api,
                host,
                stack,
                f"{wakes} near ({setting})",
                paths,
                tokens,
                lead_for(wakes, put_s, 1),
                calls=1,
                timeout_s=BURST_DELIVERY_TIMEOUT_S,
            )
            sources = stack.counts()["event_sources"].values()
            batches = sum(source["batches"] for source in sources)
            most = max((source["max_in_flight"] for source in sources), default=0)
            results.bursts.append(Burst(setting, late, batches, most))


def run(api_requests: int, wakes: int, few: int, far: int, seed: int, burst: int, far_puts: int, fresh: int) -> str:
    started = time.monotonic()
    header = f"Measured {datetime.now(UTC).strftime('%Y-%m-%d %H:%M UTC')} on {machine()}."
    say("cold start ...")
    interpreter, cold = cold_start.measure()
    results = Results([], [], {})
    with Host() as host:
        say("API latency ...")
        put_s = api_latency(host, api_requests, results)
        say("near wakes ...")
        near_wakes(host, wakes, few, put_s, results)
        say("far wakes ...")
        far_wakes(host, far, put_s, results)
        say(f"registration with {seed} instances ...")
        registration_at_size(host, seed, api_requests, results)
        say(f"CPU, registration rates and a burst of {burst} wakes ...")
        cpu_and_rates(host, burst, far_puts, results)
        for ahead_s in SEEN_AHEAD_S:
            say(f"a burst of {burst} wakes registered {ahead_s:.0f} s ahead, as make run starts ...")
            results.seen.append(seen.burst(host, burst, ahead_s, f"{burst:,} registered {ahead_s:.0f} s ahead"))
        say(f"{fresh} wakes on a stack started seconds before ...")
        results.seen.append(seen.fresh(host, fresh, FRESH_AFTER_S))
        say(f"a burst of {burst} wakes, unbounded ...")
        burst_of_wakes(host, burst, put_s, results)
    memory = cost.memory_gb()
    priced = {name: results.usages[name] for name in ("near wake", "far wake", "a retry (extra)")}
    sections = [
        header,
        "",
        "## CPU and registration rates on the local stack",
        "",
        cpu_report(results),
        "",
        "## Cold start",
        "",
        cold_start.report(interpreter, cold),
        "",
        "## Invocations on the local stack (its REPORT lines)",
        "",
        "Every invocation of the benchmark, by function, as the local stack's REPORT lines give it: a cold "
        "start's Init Duration (a new execution environment: a process forked from the environments' fork "
        "server, importing the handler), and the "
        "Duration of the invocations that found a warm environment.",
        "",
        invocations_report(results.reports),
        "",
        "## Memory of the local stack",
        "",
        "Resident memory of all the stack's processes (the stack, moto, the functions' environments): at "
        "rest right after its start (no environment runs before its function's first invocation), at its "
        "peak, and at the end of its part of the benchmark (environments idle for a minute are stopped). "
        "Each process's resident memory counts the pages it shares too: the environments share their fork "
        "server's imported packages, counted once for each.",
        "",
        memory_report(results.memory),
        "",
        "## API latency on the local stack",
        "",
        f"{api_requests} requests of each kind ({2 * api_requests} POSTs), one after the other, each on a "
        "connection of its own, after a warm-up: the local stack's gateway, the functions' warm environments "
        "and moto.",
        "",
        table(["request", "n", "p50", "p99", "max"], [latency.row() for latency in results.latencies]),
        "",
        "## Wake lateness on the local stack",
        "",
        "When the host received the (first) call, less the wake's time. The wakes of a row are all due at "
        "the same whole second; near ones go through a delayed SQS message, far ones through a one-time "
        "schedule (fired on time here) and then SQS.",
        "",
        table(
            ["wakes", "n", "p50", "p99", "max", "min", "not called", "called twice", "last PUT before due"],
            [late.row() for late in results.lateness],
        ),
        "",
        "## Registration with a full table",
        "",
        f"{seed:,} instances of one account seeded straight into the table first (the service's `Store`, "
        f"{seed / max(results.seeded_s, 1e-9):.0f} a second from {SEED_THREADS} threads), then new "
        "registrations over HTTP: one client after the other, then "
        f"{CONCURRENT_CLIENTS} clients at once, each request on a connection of its own. The rate counts "
        "201s over the phase's wall time; 429s are API Gateway's route throttle (template.yaml).",
        "",
        table(
            ["table", "clients", "requests", "rate", "p50", "p99", "429", "other"],
            [rate.row() for rate in results.rates],
        ),
        "",
        "## A burst of wakes at one second",
        "",
        f"{burst:,} near wakes due at the same whole second, through the caller's SQS event source: with "
        "Lambda's scaling as template.yaml sets it (provisioned pollers, bounded by the local stack's "
        "environments per function; five batches, 300 more a minute, when CallerMinimumPollers is 0) and with the "
        "local developer's setting that starts it at full concurrency. Batches and the most batches at once "
        "are the poller's own counters.",
        "",
        table(
            ["event source", "wakes", "p50", "p99", "max", "not called", "batches", "most batches at once"],
            [burst_row.row() for burst_row in results.bursts],
        ),
        "",
        "## A burst seen coming, and the same burst unseen",
        "",
        f"{burst:,} near wakes due at one second on a stack of their own as `make run` starts it (the sweeper "
        "and the planner every minute), registered from 16 clients 2 minutes ahead (the planner's runs see "
        "them) and 15 s ahead (none does); then "
        f"{fresh} wakes due at one second {FRESH_AFTER_S:.0f} s after their PUTs on a stack started seconds "
        "before. The planner sends no change that could land during its burst: its column says what its "
        "runs did (`held: late`: a change that could not apply before the burst's second on "
        "`PlannerUpdateDelaySeconds`). Bound (issue 36): p99 8 s for each burst, 1.5 s for the fresh stack.",
        "",
        table(seen.HEADERS, [row.row() for row in results.seen]),
        "",
        "## AWS requests counted",
        "",
        requests_note(),
        "",
        cost.requests_report(results.usages),
        "",
        "## Cost per million wakes (rough)",
        "",
        "Lambda memory (template.yaml): "
        + ", ".join(f"{name} {gb * 1024:.0f} MB" for name, gb in memory.items())
        + ". Prices and assumptions: `cost/wakeup_cost/cost.py`.",
        "",
        cost.report(priced, memory, units_per_write=capacity.units_per_instance_write()),
        "",
        f"The benchmark took {time.monotonic() - started:.0f} s.",
    ]
    return "\n".join(sections)


def cpu_report(results: Results) -> str:
    """The CPU that a registration and a delivered wake cost the whole stack, and the rates."""
    burst = results.cpu_burst
    if burst is None:
        return "(not measured)"
    rows = [
        [rate.name, rate.requests, f"{rate.per_s:.1f}/s", f"{rate.cpu_ms:.1f} ms", by_process(rate.by_process_ms)]
        for rate in results.cpu_rates
    ]
    late = burst.late_s
    rows.append(
        [
            f"{burst.wakes:,} wakes due at one second, delivered",
            burst.wakes,
            f"p50 {percentile(late, 50):.2f} s, p99 {percentile(late, 99):.2f} s late" if late else "none called",
            f"{burst.cpu_ms_per_wake:.1f} ms",
            by_process(burst.by_process_ms),
        ]
    )
    return "\n".join(
        [
            f"On a stack with template.yaml's defaults, {CONCURRENT_CLIENTS} clients at once, each request on a "
            "connection of its own. CPU is user and system time summed over every process of the stack (its "
            "own, moto's, the functions' environments, those that ended included), read from /proc: it counts "
            "only while a process runs, so a loaded machine changes it far less than it changes the rates. The "
            "PUTs follow a warm-up of the wake function; the burst's CPU runs from just before its messages are "
            "due (its caller idle until then, so its cold starts are in it) until its last call was recorded.",
            "",
            table(["requests", "n", "rate or lateness", "CPU each", "by process"], rows),
            "",
            f"The burst: {burst.called} of {burst.wakes} called, {burst.duplicates} called twice, "
            f"{burst.early} early, {results.burst_timeouts} caller invocations past their timeout; "
            f"the last PUT {burst.registered_by_s:.1f} s before the wakes' time.",
        ]
    )


def by_process(milliseconds: dict[str, float]) -> str:
    return ", ".join(f"{kind} {value:.1f}" for kind, value in sorted(milliseconds.items()) if abs(value) >= 0.05)


def invocations_report(reports: list[tuple[str, Report]]) -> str:
    rows = []
    for name in sorted({name for name, _ in reports}):
        own = [report for function, report in reports if function == name]
        cold = [report.init_duration_ms for report in own if report.init_duration_ms is not None]
        warm = [report.duration_ms for report in own if report.init_duration_ms is None]
        rows.append(
            [
                name,
                len(own),
                len(cold),
                f"{percentile(cold, 50):.0f} ms" if cold else "-",
                f"{max(cold):.0f} ms" if cold else "-",
                f"{percentile(warm, 50):.1f} ms" if warm else "-",
                f"{percentile(warm, 99):.1f} ms" if warm else "-",
                f"{max(report.max_memory_used_mb for report in own)} MB",
            ]
        )
    header = ["function", "invocations", "cold starts", "init p50", "init max", "warm p50", "warm p99", "max memory"]
    return table(header, rows)


def memory_report(memory: list[tuple[str, dict[str, float]]]) -> str:
    rows = [[name, f"{m['rest_mb']:.0f} MB", f"{m['peak_mb']:.0f} MB", f"{m['now_mb']:.0f} MB"] for name, m in memory]
    return table(["stack", "at rest", "peak", "at the end"], rows)


def requests_note() -> str:
    return (
        "Per request, per wake or per sweep, as the functions made them (the local stack's SQS poller and "
        "Scheduler are not counted). A `near wake` and a `far wake` include the `PUT /wakeup/wake` that "
        "registered them; `a retry (extra)` is what a host failing once adds to a wake; `one sweep` is the "
        "sweeper's minute, whatever the number of wakes."
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--requests", type=int, default=100, help="requests of each kind for the API latency")
    parser.add_argument("--wakes", type=int, default=200, help="wakes due at one second, through SQS")
    parser.add_argument("--few", type=int, default=20, help="wakes in the small near rows (one with a failing host)")
    parser.add_argument("--far", type=int, default=30, help="wakes through the Scheduler")
    parser.add_argument("--seed", type=int, default=10_000, help="instances in the table for the registration rate")
    parser.add_argument("--burst", type=int, default=1_000, help="wakes due at one second for the scaling rows")
    parser.add_argument("--far-puts", type=int, default=300, help="far wakes registered for the PUT rate and CPU")
    parser.add_argument("--fresh", type=int, default=100, help="wakes due seconds after a stack started")
    args = parser.parse_args(argv)
    print(run(args.requests, args.wakes, args.few, args.far, args.seed, args.burst, args.far_puts, args.fresh))
    return 0


if __name__ == "__main__":
    sys.exit(main())
