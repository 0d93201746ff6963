"""What a scenario came to: lateness, wakes lost and called twice, concurrency, requests and cost.

The cost is `wakeup_cost.cost`'s, the one model `make bench` prices a wake with: the simulator hands it
every request, invocation, billed second and log byte it counted, and the DynamoDB units it metered
item by item.
"""

from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from wakeup_cost import cost
from wakeup_cost.stats import table
from wakeup_sim.api_gateway import ACCEPTED, FAILED, THROTTLED
from wakeup_sim.scenarios import Outcome, first_calls
from wakeup_sim.world import World


def percentile(values: list[float], p: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


@dataclass(frozen=True)
class Figures:
    name: str
    wakes: int
    p50_s: float
    p99_s: float
    max_s: float
    lost: int
    called_twice: int
    overlapping_calls: int
    peak_concurrency: int
    requests_per_wake: float
    usd_per_million: float
    # The scenario's whole price: its wakes at `usd_per_million`, and its provisioned pollers'
    # EPU-hours (`Outcome.epu_s`: those the deployment keeps and those the planner raised).
    usd_scenario: float
    sweeper_rearmed: int
    stopped_by_loop_detection: int
    throttled_requests: int
    registrations: "RegistrationFigures"
    # The p99 the scenario is held to (`Scenario.bound_s`; None: reported only).
    bound_s: float | None = None
    # What a wake cost, line by line (`wakeup_cost.cost.lines`): `make simulate --costs` prints them.
    costs: tuple[cost.Line, ...] = ()


@dataclass(frozen=True)
class RegistrationFigures:
    """How the hosts' `PUT /wakeup/wake` went: API Gateway's answers, and the time from each host's
    first request to its registration accepted (its client's retries included)."""

    hosts: int
    accepted: int
    first_time: int  # accepted at the first request
    throttled: int  # 429s: API Gateway's account or route throttle
    failed: int  # 500s: the function throttled by Lambda, or failed
    p50_s: float
    p99_s: float
    max_s: float
    most_attempts: int


def registration_figures(outcome: Outcome) -> RegistrationFigures:
    registrations = outcome.world.registrations
    took = [r.accepted_at - r.started for r in registrations if r.accepted_at is not None]
    statuses = outcome.world.api.statuses
    return RegistrationFigures(
        hosts=len(registrations),
        accepted=len(took),
        first_time=sum(1 for r in registrations if r.statuses[:1] == [ACCEPTED]),
        throttled=statuses[THROTTLED],
        failed=statuses[FAILED],
        p50_s=percentile(took, 50),
        p99_s=percentile(took, 99),
        max_s=max(took, default=float("nan")),
        most_attempts=max((len(r.statuses) for r in registrations), default=0),
    )


def usage(outcome: Outcome) -> cost.Usage:
    """Everything the scenario cost, per wake."""
    return world_usage(outcome.world, outcome.log_bytes, len(outcome.wakes))


def world_usage(world: World, log_bytes: float, count: int = 1) -> cost.Usage:
    """Everything a simulated stack cost so far (`log_bytes`: what its functions logged), per `count`."""
    requests: Counter[str] = Counter()
    requests.update(world.store.metered.requests)
    requests.update(world.queue.requests)
    requests.update(world.scheduler.requests)
    requests["sqs:ReceiveMessage"] += round(world.event_source.long_polls())
    metered = world.store.metered
    return cost.Usage(
        requests=Counter({k: v / count for k, v in requests.items()}),
        invocations=Counter({f.name: f.invocations / count for f in world.functions}),
        seconds=Counter({f.name: f.billed_s / count for f in world.functions}),
        log_bytes=log_bytes / count,
        api_requests=world.api_requests / count,
        scheduler_invocations=world.scheduler.invocations / count,
        read_units=metered.read_units / count,
        write_units=(metered.write_units + sum(metered.index_write_units.values())) / count,
        history_puts=metered.batch_puts / count,
    )


def cost_lines(outcome: Outcome) -> list[cost.Line]:
    """What a wake cost, line by line, each function's duration at its own memory."""
    memory = {f.name: f.memory_mb / 1024 for f in outcome.world.functions}
    return cost.lines(usage(outcome), memory, outcome.world.deployment.quiet_functions)


def usd_per_million(outcome: Outcome) -> float:
    return sum(line.usd_per_million for line in cost_lines(outcome))


def usd_scenario(outcome: Outcome, usd_per_million: float) -> float:
    """What the scenario cost in all: its wakes, and its pollers' EPU-hours (by the second)."""
    return usd_per_million * len(outcome.wakes) / 1e6 + outcome.epu_s / 3600 * cost.PRICE_EPU_HOUR


def figures(outcome: Outcome) -> Figures:
    world = outcome.world
    due = {w.instance_id: w.at for w in outcome.wakes}
    firsts = first_calls(outcome)
    late = [firsts[i].started - (due[i] or 0) for i in outcome.healthy if i in firsts]
    calls = world.hosts.calls
    lost = sum(1 for i in outcome.healthy if not any(c.ok for c in calls.get(i, [])))
    twice = 0
    for made in calls.values():
        answered = [c.ended for c in made if c.ok]
        if answered and any(c.started > min(answered) for c in made):
            twice += 1
    requests = usage(outcome)
    costs = cost_lines(outcome)
    usd = sum(line.usd_per_million for line in costs)
    per_wake = sum(requests.requests.values()) + sum(requests.invocations.values()) + requests.api_requests
    return Figures(
        name=outcome.scenario.name,
        wakes=len(outcome.wakes),
        p50_s=percentile(late, 50),
        p99_s=percentile(late, 99),
        max_s=max(late, default=float("nan")),
        lost=lost,
        called_twice=twice,
        overlapping_calls=world.hosts.overlaps,
        peak_concurrency=world.account.peak,
        requests_per_wake=per_wake,
        usd_per_million=usd,
        usd_scenario=usd_scenario(outcome, usd),
        sweeper_rearmed=outcome.sweeper_rearmed,
        stopped_by_loop_detection=world.event_source.stopped_loops,
        throttled_requests=world.store.metered.throttled,
        registrations=registration_figures(outcome),
        bound_s=outcome.scenario.bound_s,
        costs=tuple(costs),
    )


def costs_table(scenarios: list[Figures]) -> str:
    """Each scenario's cost per wake line by line, a column each (as `wakeup_cost.cost.report` prints)."""
    rows: list[list[object]] = []
    for index, first in enumerate(scenarios[0].costs):
        row: list[object] = [f"{first.item} ({first.unit})"]
        row += [f"{f.costs[index].quantity:.3g} → ${f.costs[index].usd_per_million:.2f}" for f in scenarios]
        rows.append(row)
    rows.append(["**total per million wakes**", *(f"**${f.usd_per_million:.2f}**" for f in scenarios)])
    return table(["per wake → USD per million wakes", *(f.name for f in scenarios)], rows)


HEADER = (
    "| scenario | wakes | p50 | p99 | max | p99 bound | lost | called twice | peak concurrency | AWS requests/wake "
    "| USD per million | USD for this scenario | sweeper re-arms | stopped loops | DynamoDB throttles |\n"
    "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
)


def over_bound(f: Figures) -> bool:
    """Its p99 past its bound (a scenario without one is reported only)."""
    return f.bound_s is not None and not f.p99_s <= f.bound_s


def bound_cell(f: Figures) -> str:
    if f.bound_s is None:
        return "reported"
    return f"{f.bound_s:.1f} s{' **over**' if over_bound(f) else ''}"


def row(f: Figures) -> str:
    return (
        f"| {f.name} | {f.wakes:,} | {f.p50_s * 1000:.0f} ms | {f.p99_s * 1000:.0f} ms | {f.max_s * 1000:.0f} ms "
        f"| {bound_cell(f)} | {f.lost} | {f.called_twice} | {f.peak_concurrency} | {f.requests_per_wake:.2f} "
        f"| ${f.usd_per_million:.2f} | ${f.usd_scenario:.2f} "
        f"| {f.sweeper_rearmed} | {f.stopped_by_loop_detection} | {f.throttled_requests} |"
    )


REGISTRATION_HEADER = (
    "| scenario | hosts | accepted | at the first request | 429 (API Gateway) | 500 (Lambda) "
    "| accepted after, p50 | p99 | max | most requests by a host |\n"
    "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
)


def registration_row(f: Figures) -> str:
    r = f.registrations
    return (
        f"| {f.name} | {r.hosts:,} | {r.accepted:,} | {r.first_time:,} | {r.throttled:,} | {r.failed:,} "
        f"| {r.p50_s * 1000:.0f} ms | {r.p99_s * 1000:.0f} ms | {r.max_s * 1000:.0f} ms | {r.most_attempts} |"
    )


Points = tuple[tuple[float, float], ...]


def points(outcome: Outcome) -> Points:
    """Each healthy wake's first call: when it was made (after the first wake's time) and how late,
    at most 4,000 of them (every n-th) for a plot."""
    due = {w.instance_id: w.at for w in outcome.wakes}
    firsts = first_calls(outcome)
    made = [
        (c.started - outcome.first_due, c.started - (due[i] or 0)) for i, c in firsts.items() if i in outcome.healthy
    ]
    return tuple(made[:: max(1, len(made) // 4000)])


def plot(points: Points, title: str, path: Path) -> None:
    """Lateness of each (healthy) wake's first call against when it was made: a small PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    xs, ys = zip(*points, strict=True) if points else ((), ())
    figure, axes = plt.subplots(figsize=(6.4, 3.2), dpi=80)
    axes.scatter(xs, ys, s=2, alpha=0.4)
    axes.set_xlabel("call made, seconds after the first wake's time")
    axes.set_ylabel("lateness (s)")
    axes.set_title(title, fontsize=10)
    axes.grid(alpha=0.3)
    figure.tight_layout()
    figure.savefig(path)
    plt.close(figure)
