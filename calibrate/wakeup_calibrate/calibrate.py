"""`python -m wakeup_calibrate` (`make calibrate`): the simulator against the local stack.

1. Measures the local stack's profile on this machine (`wakeup_calibrate.local_profile`).
2. For each size, runs a burst of near wakes due at one second on the local stack, as `make bench`
   does (the stack in a process of its own, Lambda's SQS scaling, a loopback host that answers at
   once), and measures how much of the machine's CPU other work took meanwhile.
3. Runs the same scenario in the simulator with the local profile, on the cores that were left.
4. Prints both side by side: p50 and p99 of the lateness must each agree within 25% or 100 ms,
   whichever is larger (issue 10).
"""

from __future__ import annotations

import os
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path

from bench.stack import NO_SWEEPS, BenchStack
from bench.workload import BURST_DELIVERY_TIMEOUT_S, SETTLE_S, Api, Host, due_at, iso, warm_up
from wakeup.arrival import QUEUE_LEAD_S
from wakeup_calibrate.local_profile import Measured, local_scaling, measure
from wakeup_calibrate.local_trace import TRACE_ENV
from wakeup_calibrate.timeline import WakeTimeline, cpu_table, local_timelines, simulated_timelines, stage_table, traced
from wakeup_cost.stats import percentile
from wakeup_local.lambda_.functions import CONCURRENCY_ENV, DEFAULT_CONCURRENCY
from wakeup_sim.deployment import Deployment, from_template
from wakeup_sim.profile import Profile
from wakeup_sim.scenarios import NEAR_LEAD_S, T0, Scenario, first_calls, run

# (wakes, the stack's bound on the caller's environments): bursts of 100 and 200 at the local
# stack's own bound (16), where the batching window decides how many batches, hence cold starts,
# there are; and 100 with 8 environments, where batches wait for an environment, and the event
# source's scaling decides when they run.
BURSTS = ((100, DEFAULT_CONCURRENCY), (200, DEFAULT_CONCURRENCY), (100, 8))
RELATIVE_TOLERANCE = 0.25
ABSOLUTE_TOLERANCE_S = 0.1
# Time to register a wake over HTTP (by PUT_CLIENTS at once), with margin: the wakes of a burst
# must all be registered before their first message can come (QUEUE_LEAD_S + 1 s ahead).
PUT_ALLOWANCE_S = 0.05
PUT_CLIENTS = 4
# The local stack has no DynamoDB throughput limit and bounds its functions, not the account.
UNLIMITED = 1e12
SAMPLE_EVERY_S = 0.25
# How often the sessions with work are counted: each count is a scan of /proc, so a few a second
# see a burst's second without the scans becoming work of their own.
RUNNABLE_EVERY_S = 0.05


@dataclass(frozen=True)
class LocalRun:
    wakes: int
    late_s: list[float]
    # The CPU the local stack had while the burst was under way (from its first message to its
    # last call: the stack is busy, so this is what the machine gave it), what other work used
    # meanwhile, in cores; and the load average after.
    stack_cores: float
    others_cores: float
    # How many sessions of other work had a process running or ready to, on average, meanwhile.
    other_sessions: float
    loadavg: tuple[float, float, float]
    timelines: list[WakeTimeline]
    # The CPU time each part used over that stretch (environments, moto, stack, host and client).
    cpu_s: dict[str, float]


@dataclass(frozen=True)
class Comparison:
    wakes: int
    environments: int
    local: LocalRun
    simulated: Simulated
    profile: Profile

    @property
    def local_p50_s(self) -> float:
        return percentile(self.local.late_s, 50)

    @property
    def local_p99_s(self) -> float:
        return percentile(self.local.late_s, 99)

    # Both sides' percentiles the same way (nearest rank): at a burst, a percentile can fall between
    # two batches.
    @property
    def simulated_p50_s(self) -> float:
        return percentile(self.simulated.late_s, 50)

    @property
    def simulated_p99_s(self) -> float:
        return percentile(self.simulated.late_s, 99)

    def agrees(self) -> bool:
        return within(self.simulated_p50_s, self.local_p50_s) and within(self.simulated_p99_s, self.local_p99_s)


def within(simulated: float, measured: float) -> bool:
    return abs(simulated - measured) <= max(RELATIVE_TOLERANCE * measured, ABSOLUTE_TOLERANCE_S)


def _busy_s() -> float:
    """The machine's CPU time in use so far, all cores (from /proc/stat)."""
    fields = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    user, nice, system, _idle, _iowait, irq, softirq, steal = fields[:8]
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def _kind(pid: int) -> str:
    """Which part of the local stack a process of this tree is."""
    if pid == os.getpid():
        return "host and client"
    try:
        command = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return "other"
    for marker, kind in ((b"awslambdaric", "environments"), (b"moto_process", "moto"), (b"local_trace", "stack")):
        if marker in command:
            return kind
    return "other"


def _own() -> tuple[float, dict[int, tuple[str, float]]]:
    """The CPU time of this process and all its descendants (the stack, moto, the environments),
    those that ended included where their parent has reaped them; and each live process's own (its
    kind, its CPU time)."""
    parents: dict[int, int] = {}
    used: dict[int, float] = {}
    alone: dict[int, float] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fields = Path(f"/proc/{entry}/stat").read_text().rpartition(")")[2].split()
        except OSError:
            continue  # ended meanwhile
        parents[int(entry)] = int(fields[1])
        used[int(entry)] = sum(int(v) for v in fields[11:15]) / os.sysconf("SC_CLK_TCK")
        alone[int(entry)] = sum(int(v) for v in fields[11:13]) / os.sysconf("SC_CLK_TCK")
    ours = _descendants(parents, os.getpid())
    return sum(used[pid] for pid in ours), {pid: ("", alone[pid]) for pid in ours}


def _descendants(parents: dict[int, int], root: int) -> set[int]:
    """`root` and every process under it, from each process's parent."""
    children: dict[int, list[int]] = {}
    for pid, parent in parents.items():
        children.setdefault(parent, []).append(pid)
    found, todo = {root}, [root]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


class CpuSampler:
    """Samples, every `every_s`, the machine's CPU time in use and this process tree's: what other
    work took of the machine over any stretch of the run."""

    def __init__(self, every_s: float = SAMPLE_EVERY_S) -> None:
        self.samples: list[tuple[float, float, float]] = []  # (epoch, machine busy, ours)
        # Each process's CPU time at each sample (by pid: its kind, its CPU time).
        self.processes: list[dict[int, tuple[str, float]]] = []
        self._kinds: dict[int, str] = {}
        # (epoch, how many sessions outside this process tree had a process running or ready to)
        self.runnable: list[tuple[float, int]] = []
        self._every_s = every_s
        self._stopping = threading.Event()
        self._threads = [threading.Thread(target=run, daemon=True) for run in (self._run, self._count_runnable)]

    def __enter__(self) -> CpuSampler:
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stopping.set()
        for thread in self._threads:
            thread.join()

    def _count_runnable(self) -> None:
        """Linux shares the cores among the sessions that have work (autogroups: each execution
        environment and moto run in a session of their own), so the other work's weight is how
        many other sessions have a process running or ready to run."""
        while not self._stopping.wait(RUNNABLE_EVERY_S):
            parents: dict[int, int] = {}
            running: dict[int, str] = {}  # pid -> its session, for processes running or ready to
            for entry in os.listdir("/proc"):
                if not entry.isdigit():
                    continue
                try:
                    fields = Path(f"/proc/{entry}/stat").read_text().rpartition(")")[2].split()
                except OSError:
                    continue
                parents[int(entry)] = int(fields[1])
                if fields[0] == "R" and fields[3] != "0":  # session 0: the kernel's threads
                    running[int(entry)] = fields[3]
            # This process tree's own, found at each count: an environment just started is the
            # stack's, not other work.
            ours = _descendants(parents, os.getpid())
            self.runnable.append((time.time(), len({s for pid, s in running.items() if pid not in ours})))

    def other_sessions(self, start: float, end: float) -> float:
        """How many other sessions had work, on average, between two moments (epoch seconds)."""
        counts = [count for when, count in self.runnable if start <= when <= end]
        return sum(counts) / len(counts) if counts else 0.0

    def _run(self) -> None:
        while True:
            ours, processes = _own()
            for pid in processes.keys() - self._kinds.keys():
                self._kinds[pid] = _kind(pid)
            self.samples.append((time.time(), _busy_s(), ours))
            self.processes.append({pid: (self._kinds[pid], used) for pid, (_, used) in processes.items()})
            if self._stopping.wait(self._every_s):
                return

    def cores_used(self, start: float, end: float) -> tuple[float, float]:
        """The CPU this process tree and other work used between two moments (epoch seconds), in
        cores (the meters taken between samples as growing evenly)."""
        if end <= start:
            return 0.0, 0.0
        first, last = self._at(start), self._at(end)
        ours = (last[1] - first[1]) / (end - start)
        return ours, max((last[0] - first[0]) / (end - start) - ours, 0.0)

    def _at(self, when: float) -> tuple[float, float]:
        """The machine's busy CPU time and this tree's at `when`, between the samples around it."""
        before = max((s for s in self.samples if s[0] <= when), default=self.samples[0])
        after = min((s for s in self.samples if s[0] >= when), default=self.samples[-1])
        share = (when - before[0]) / (after[0] - before[0]) if after[0] > before[0] else 0.0
        return before[1] + share * (after[1] - before[1]), before[2] + share * (after[2] - before[2])

    def cpu_by_kind(self, start: float, end: float) -> dict[str, float]:
        """The CPU time each part of the local stack used between two moments (epoch seconds)."""
        at = [sample[0] for sample in self.samples]
        before = max((i for i, t in enumerate(at) if t <= start), default=0)
        after = min((i for i, t in enumerate(at) if t >= end), default=len(at) - 1)
        used: dict[str, float] = {}
        for pid, (kind, cpu) in self.processes[after].items():
            earlier = self.processes[before].get(pid, (kind, 0.0))[1]
            used[kind] = used.get(kind, 0.0) + cpu - earlier
        return used


def local_burst(wakes: int, environments: int = DEFAULT_CONCURRENCY) -> LocalRun:
    """`wakes` near wakes due at one second on the local stack, as `make bench` runs a burst: the
    stack in a process of its own (`wakeup_calibrate.local_trace`: `bench.stack`, traced), a loopback host
    that answers at once, every wake registered before its message can come."""
    with Host() as host, CpuSampler() as sampler, tempfile.NamedTemporaryFile(suffix=".jsonl") as trace:
        env = {**NO_SWEEPS, TRACE_ENV: trace.name, CONCURRENCY_ENV: str(environments)}
        stack = BenchStack(env, module="wakeup_calibrate.local_trace")
        try:
            api = Api(stack.url, stack.account_token)
            warm_up(api, host)
            paths = [f"/burst{index}" for index in range(wakes)]
            with ThreadPoolExecutor(PUT_CLIENTS) as clients:
                registered = list(clients.map(lambda path: api.register(f"{host.url}{path}"), paths))
                at = due_at(QUEUE_LEAD_S + 2 + PUT_ALLOWANCE_S * wakes)
                list(clients.map(lambda instance: api.wake(instance[1], iso(at)), registered))
            if time.time() > at - (QUEUE_LEAD_S + 1):
                raise RuntimeError("registering the burst's wakes took longer than their lead")
            if not host.wait_for(paths, 1, time.monotonic() + (at - time.time()) + BURST_DELIVERY_TIMEOUT_S):
                print(f"  (not every wake was called within {BURST_DELIVERY_TIMEOUT_S} s)", file=sys.stderr)
            time.sleep(SETTLE_S)
        finally:
            stack.stop()
        instance_ids = [instance_id for instance_id, _, _ in registered]
        first = host.first_calls(paths)
        late = [first[path] - at for path in paths if path in first]
        timelines = local_timelines(
            Path(trace.name),
            dict.fromkeys(instance_ids, at),
            {i: first[p] for i, p in zip(instance_ids, paths, strict=True) if p in first},
        )
    # Other work on the machine from the first batch's hand-over to the last call: the stretch the
    # lateness depends on, while the stack has work for every core.
    busy_from, busy_to = min((t.handed for t in timelines), default=at - 2), at + max(late, default=0.0)
    ours, others = sampler.cores_used(busy_from, busy_to)
    sessions = sampler.other_sessions(busy_from, busy_to)
    cpu = sampler.cpu_by_kind(at - 2, busy_to)
    return LocalRun(wakes, late, ours, others, sessions, os.getloadavg(), timelines, cpu)


def local_deployment() -> Deployment:
    return from_template().but(
        table_write_units_per_s=UNLIMITED, table_read_units_per_s=UNLIMITED, account_concurrency=10**6
    )


@dataclass(frozen=True)
class Simulated:
    late_s: list[float]
    timelines: list[WakeTimeline]
    cpu_s: dict[str, float]  # each part's CPU time from 2 s before the wakes' time to the last call
    others_cores: float  # what the other work had of the cores, first hand-over to last call


def simulate(wakes: int, profile: Profile) -> Simulated:
    """The burst in the simulator: each wake's lateness and timeline, and the CPU each part used."""
    scenario = Scenario(f"{wakes} at one second, near, cold (local)", wakes)
    due = T0 + NEAR_LEAD_S[1] + 60
    with traced(since=due - 2) as trace:
        outcome = run(scenario, local_deployment(), profile)
    firsts = first_calls(outcome)
    late = [firsts[w.instance_id].started - (w.at or due) for w in outcome.wakes if w.instance_id in firsts]
    timelines = simulated_timelines(trace, outcome)
    busy_from, busy_to = min((t.handed for t in timelines), default=due - 2), due + max(late, default=0.0)
    return Simulated(
        late, timelines, trace.cpu_by_kind(outcome.world, busy_to), trace.background_cores(busy_from, busy_to)
    )


# The other work's weight is found by halving the interval this many times.
OTHER_WORK_STEPS = 8
MOST_OTHER_JOBS = 8.0


def with_other_work(profile: Profile, wakes: int, others_cores: float) -> tuple[Profile, Simulated]:
    """The profile on a machine that other work shares, as that many jobs always under way, each
    taking its share of the cores as each of the stack's processes does (Linux shares the cores
    among sessions with work: its autogroups), and the burst simulated on it. How many: as many as
    take, in the simulated burst, the cores the other work took while the local burst ran (a
    condition of the machine measured then, not a parameter of the stack; the sessions counted
    with work come out lower, since they wait on other things too). The stack's idle polling is
    not taken off as well: while a burst is under way its poller is not idle, and its receives and
    deletes are the profile's CPU per batch."""
    low, high = 0.0, MOST_OTHER_JOBS
    for _ in range(OTHER_WORK_STEPS):
        middle = (low + high) / 2
        if simulate(wakes, replace(profile, background_jobs=middle)).others_cores < others_cores:
            low = middle
        else:
            high = middle
    matched = replace(profile, background_jobs=(low + high) / 2)
    return matched, simulate(wakes, matched)


def compare(measured: Measured, wakes: int, environments: int = DEFAULT_CONCURRENCY) -> Comparison:
    local = local_burst(wakes, environments)
    bounded = replace(measured.profile, scaling=local_scaling(environments))
    profile, simulated = with_other_work(bounded, wakes, local.others_cores)
    return Comparison(wakes, environments, local, simulated, profile)


def parameters(measured: Measured) -> str:
    p = measured.profile
    rows = [
        ("cores", f"{p.cores}"),
        ("caller's cold start (init CPU)", f"{p.init_cpu_s * 1000:.0f} ms"),
        ("caller's AWS requests per cold start", f"{p.cold_start_requests:.1f}"),
        ("caller's CPU per invocation", f"{p.invocation_cpu_s * 1000:.1f} ms"),
        ("caller's CPU per AWS request and per host call", f"{p.aws_request_cpu_s * 1000:.2f} ms"),
        ("moto's CPU per request", f"{(p.service_cpu_s or 0) * 1000:.2f} ms"),
        ("moto's CPU per batch (receive, delete)", f"{p.batch_service_cpu_s * 1000:.2f} ms"),
        (
            "stack process's CPU per batch, per message",
            f"{p.batch_cpu_s * 1000:.2f} / {p.message_cpu_s * 1000:.2f} ms",
        ),
        ("idle polling (moto and the stack; taken off the rest)", f"{p.idle_cores:.3f} cores"),
        ("poller's polling interval", f"{p.poll_interval_s * 1000:.0f} ms"),
        ("event source", f"{p.scaling}"),
    ]
    load = ", ".join(f"{v:.2f}" for v in measured.loadavg)
    return "\n".join(
        [
            f"Local profile, measured (CPU time) with the load average at {load}:",
            "",
            "| parameter | measured |",
            "| --- | --- |",
            *(f"| {name} | {value} |" for name, value in rows),
        ]
    )


HEADER = (
    "| wakes at one second | caller's environments | local p50 | simulated p50 | local p99 | simulated p99 "
    "| within tolerance | cores other work used (simulated) | as jobs | other sessions with work "
    "| cores the stack used | load average after |\n"
    "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
)


def row(c: Comparison) -> str:
    return (
        f"| {c.wakes} | {c.environments} | {c.local_p50_s * 1000:.0f} ms | {c.simulated_p50_s * 1000:.0f} ms "
        f"| {c.local_p99_s * 1000:.0f} ms | {c.simulated_p99_s * 1000:.0f} ms | {'yes' if c.agrees() else 'NO'} "
        f"| {c.local.others_cores:.2f} ({c.simulated.others_cores:.2f}) | {c.profile.background_jobs:.2f} "
        f"| {c.local.other_sessions:.2f} | {c.local.stack_cores:.2f} "
        f"| {', '.join(f'{v:.2f}' for v in c.local.loadavg)} |"
    )


def details(c: Comparison) -> str:
    """Where the two sides part: each stage, and the CPU each part used."""
    missing = c.wakes - len(c.local.late_s)
    return "\n".join(
        [
            f"{c.wakes} wakes, {c.environments} environments:",
            "",
            stage_table(c.local.timelines, c.simulated.timelines),
            "",
            cpu_table(c.local.cpu_s, c.simulated.cpu_s),
            *([f"({missing} wakes not called on the local stack)"] if missing else []),
        ]
    )


def main(bursts: tuple[tuple[int, int], ...] = BURSTS) -> int:
    started = time.monotonic()
    measured = measure()
    print(parameters(measured) + "\n", flush=True)
    print(HEADER, flush=True)
    comparisons = []
    for wakes, environments in bursts:
        comparisons.append(compare(measured, wakes, environments))
        print(row(comparisons[-1]), flush=True)
    for comparison in comparisons:
        print("\n" + details(comparison), flush=True)
    print(f"\ncalibration in {time.monotonic() - started:.0f} s", file=sys.stderr)
    return 0 if all(c.agrees() for c in comparisons) else 1
