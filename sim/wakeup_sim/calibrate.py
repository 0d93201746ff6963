"""`python -m wakeup_sim --calibrate` (`make calibrate`): the simulator against the local stack.

1. Measures the local stack's profile on this machine (`wakeup_sim.local_profile`).
2. For each size, runs a burst of near wakes due at one second on the local stack, as `make bench`
   does (the stack in a process of its own, Lambda's SQS scaling, a loopback host that answers at
   once), and measures how much of the machine's CPU other work took meanwhile.
3. Runs the same scenario in the simulator with the local profile, on the cores that were left.
4. Prints both side by side: p50 and p99 of the lateness must each agree within 25% or 100 ms,
   whichever is larger (issue 10).
"""

from __future__ import annotations

import math
import os
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path

from bench.__main__ import BURST_DELIVERY_TIMEOUT_S, NO_SWEEPS, deliver, warm_up
from bench.stack import BenchStack
from bench.stats import percentile
from bench.workload import Api, Host
from wakeup_sim.deployment import Deployment, from_template
from wakeup_sim.local_profile import Measured, measure
from wakeup_sim.local_trace import TRACE_ENV
from wakeup_sim.profile import Profile
from wakeup_sim.scenarios import NEAR_LEAD_S, T0, Scenario, first_calls, run
from wakeup_sim.timeline import WakeTimeline, cpu_table, local_timelines, simulated_timelines, stage_table, traced

SIZES = (100, 200)
RELATIVE_TOLERANCE = 0.25
ABSOLUTE_TOLERANCE_S = 0.1
# Time to register a wake over HTTP, with margin: the wakes of a burst must all be registered
# before their second.
PUT_ALLOWANCE_S = 0.15
# The local stack has no DynamoDB throughput limit and bounds its functions, not the account.
UNLIMITED = 1e12
SAMPLE_EVERY_S = 0.25


@dataclass(frozen=True)
class LocalRun:
    wakes: int
    late_s: list[float]
    registered_by_s: float
    # The CPU the local stack had while the burst was under way (from its first message to its
    # last call: the stack is busy, so this is what the machine gave it), what other work used
    # meanwhile, in cores; and the load average after.
    stack_cores: float
    others_cores: float
    loadavg: tuple[float, float, float]
    timelines: list[WakeTimeline]
    # The CPU time each part used over that stretch (environments, moto, stack, host and client).
    cpu_s: dict[str, float]


@dataclass(frozen=True)
class Comparison:
    wakes: int
    local: LocalRun
    simulated_late_s: list[float]
    simulated_timelines: list[WakeTimeline]
    simulated_cpu_s: dict[str, float]
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
        return percentile(self.simulated_late_s, 50)

    @property
    def simulated_p99_s(self) -> float:
        return percentile(self.simulated_late_s, 99)

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
    ours = {os.getpid()}
    grew = True
    while grew:
        found = {pid for pid, parent in parents.items() if parent in ours} - ours
        grew = bool(found)
        ours |= found
    return sum(used[pid] for pid in ours), {pid: ("", alone[pid]) for pid in ours}


class CpuSampler:
    """Samples, every `every_s`, the machine's CPU time in use and this process tree's: what other
    work took of the machine over any stretch of the run."""

    def __init__(self, every_s: float = SAMPLE_EVERY_S) -> None:
        self.samples: list[tuple[float, float, float]] = []  # (epoch, machine busy, ours)
        # Each process's CPU time at each sample (by pid: its kind, its CPU time).
        self.processes: list[dict[int, tuple[str, float]]] = []
        self._kinds: dict[int, str] = {}
        self._every_s = every_s
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> CpuSampler:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stopping.set()
        self._thread.join()

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


def local_burst(wakes: int) -> LocalRun:
    """`wakes` near wakes due at one second on the local stack, as `make bench` runs a burst."""
    with Host() as host, CpuSampler() as sampler, tempfile.NamedTemporaryFile(suffix=".jsonl") as trace:
        stack = BenchStack({**NO_SWEEPS, TRACE_ENV: trace.name}, module="wakeup_sim.local_trace")
        try:
            api = Api(stack.url, stack.account_token)
            warm_up(api, host)
            paths, tokens, instance_ids = [], [], []
            for index in range(wakes):
                instance_id, token, _ = api.register(f"{host.url}/burst{index}")
                paths.append(f"/burst{index}")
                tokens.append(token)
                instance_ids.append(instance_id)
            late, _, _ = deliver(
                api,
                host,
                stack,
                f"{wakes} near",
                paths,
                tokens,
                2 + PUT_ALLOWANCE_S * wakes,
                calls=1,
                timeout_s=BURST_DELIVERY_TIMEOUT_S,
            )
        finally:
            stack.stop()
        first = host.first_calls(paths)
        due_at = {path: first[path] - lateness for path, lateness in zip(first, late.late_s, strict=True)}
        timelines = local_timelines(
            Path(trace.name),
            {i: due_at[p] for i, p in zip(instance_ids, paths, strict=True) if p in due_at},
            {i: first[p] for i, p in zip(instance_ids, paths, strict=True) if p in first},
        )
    # Other work's share of the machine from the first batch's hand-over to the last call: the
    # stretch the lateness depends on, while the stack has work for every core.
    due = min(first[path] for path in first) - min(late.late_s) if late.late_s else time.time()
    busy_from = min((t.handed for t in timelines), default=due - 2)
    ours, others = sampler.cores_used(busy_from, due + max(late.late_s, default=0.0))
    cpu = sampler.cpu_by_kind(due - 2, due + max(late.late_s, default=0.0))
    return LocalRun(wakes, late.late_s, late.registered_by_s, ours, others, os.getloadavg(), timelines, cpu)


def local_deployment() -> Deployment:
    return from_template().but(
        table_write_units_per_s=UNLIMITED, table_read_units_per_s=UNLIMITED, account_concurrency=10**6
    )


def simulate(wakes: int, profile: Profile) -> tuple[list[float], list[WakeTimeline], dict[str, float]]:
    """The burst in the simulator: each wake's lateness, its timeline, and the CPU each part used."""
    scenario = Scenario(f"{wakes} at one second, near, cold (local)", wakes)
    # The CPU each part used from two seconds before the wakes' time, as on the local stack.
    due = T0 + NEAR_LEAD_S[1] + 60
    with traced(since=due - 2) as trace:
        outcome = run(scenario, local_deployment(), profile)
    firsts = first_calls(outcome)
    late = [firsts[w.instance_id].started - (w.at or due) for w in outcome.wakes if w.instance_id in firsts]
    return late, simulated_timelines(trace, outcome), trace.cpu_by_kind(outcome.world, due + max(late, default=0.0))


def on_cores_left(profile: Profile, others_cores: float) -> Profile:
    """The profile on what the machine's other work left of its cores while the burst was under
    way. The stack's idle polling is not taken off as well: while a burst is under way its poller
    is not idle, and its receives and deletes are the profile's CPU per batch."""
    assert profile.cores is not None
    left = max(profile.cores - others_cores, 0.25 * profile.cores)
    return replace(profile, core_speed=left / profile.cores)


def compare(measured: Measured, wakes: int) -> Comparison:
    local = local_burst(wakes)
    profile = on_cores_left(measured.profile, local.others_cores)
    late, timelines, cpu = simulate(wakes, profile)
    return Comparison(wakes, local, late, timelines, cpu, profile)


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
        ("event source: initial, most, more a minute", f"{p.scaling}"),
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
    "| wakes at one second | local p50 | simulated p50 | local p99 | simulated p99 | within tolerance "
    "| cores left to the stack | cores the stack used | load average after |\n"
    "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"
)


def row(c: Comparison) -> str:
    assert c.profile.cores is not None
    return (
        f"| {c.wakes} | {c.local_p50_s * 1000:.0f} ms | {c.simulated_p50_s * 1000:.0f} ms "
        f"| {c.local_p99_s * 1000:.0f} ms | {c.simulated_p99_s * 1000:.0f} ms | {'yes' if c.agrees() else 'NO'} "
        f"| {c.profile.cores * c.profile.core_speed:.2f} of {c.profile.cores} | {c.local.stack_cores:.2f} "
        f"| {', '.join(f'{v:.2f}' for v in c.local.loadavg)} |"
    )


def main(sizes: tuple[int, ...] = SIZES) -> int:
    started = time.monotonic()
    measured = measure()
    print(parameters(measured) + "\n", flush=True)
    print(HEADER, flush=True)
    agreed = True
    for wakes in sizes:
        comparison = compare(measured, wakes)
        agreed &= comparison.agrees()
        print(row(comparison), flush=True)
        print("\n" + stage_table(comparison.local.timelines, comparison.simulated_timelines), flush=True)
        print(cpu_table(comparison.local.cpu_s, comparison.simulated_cpu_s) + "\n", flush=True)
        if not math.isfinite(comparison.local_p99_s) or len(comparison.local.late_s) < wakes:
            print(f"  ({wakes - len(comparison.local.late_s)} wakes not called on the local stack)", flush=True)
    print(f"\ncalibration in {time.monotonic() - started:.0f} s", file=sys.stderr)
    return 0 if agreed else 1
