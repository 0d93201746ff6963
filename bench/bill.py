"""`make cost` (`python -m bench.bill`): what a deployment of template.yaml costs, before it is deployed.

For the deployment's parameters (`--parameter-overrides Key=Value ...`, checked as CloudFormation
checks them), it prints:

- every charge the stack pays in a month with no wake at all (`bench.cost.idle_month`): what the
  template creates (pollers, dashboard, alarms, the secret) and what the simulator's idle stack does
  (the sweeper's runs and reads, the event source's empty long polls), with each price's page;
- the price of a million near and far wakes at a steady 100 a second, from the simulator
  (`wakeup_sim`) with the same parameters. A rate is a rate: a steady window of `STEADY_S` prices a
  wake as ten minutes do, once what the stack pays at rest meanwhile (the sweeper, the idle long
  polls, already in the month) is taken out, by subtracting a twin of the run with no wake;
- the month at 1,000, 1,000,000 and 100,000,000 wakes a day, and what a burst raises;
- last, `idle stack per month: $X`, then `total per million wakes: near $A, far $B`.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from collections.abc import Mapping, Sequence, Set
from dataclasses import dataclass, replace

from bench import cost
from bench.parameters import ParameterError, check, parse
from bench.stats import table
from wakeup.logic import planner
from wakeup.logic.sweeper import Sweep, publish
from wakeup.observability import metrics
from wakeup_awsfacts.template import SERVERLESS_FUNCTION, Resolver, load_template
from wakeup_sim import report
from wakeup_sim.deployment import TEMPLATE, Deployment, from_template
from wakeup_sim.grid import QUIET, SCENARIOS
from wakeup_sim.logs import counted_logs
from wakeup_sim.planner import settings_for
from wakeup_sim.scenarios import T0, Scenario, run
from wakeup_sim.world import World

STEADY_RATE = 100  # wakes a second
STEADY_S = 120  # seconds of wakes due at that rate (docs/operations.md, "What a deployment costs")
IDLE_S = 600.0  # simulated seconds of the stack at rest: ten sweeps
# What one sweep with nothing overdue logged on the local stack, its "sweep done" line and its metrics
# (EMF): `make bench`'s "one sweep" (docs/benchmark.md). The simulator runs the sweep's logic, not
# the handler's logging.
SWEEP_LOG_BYTES = 712
WAKES_A_DAY = (1_000, 1_000_000, 100_000_000)
# A burst's capacity, were it raised for the burst alone (DESIGN.md section 4): pollers this long.
BURST_MINUTES = 10
# The simulator's functions by the template's logical ids: the scheduled ones it can run at rest.
SIMULATED = {"SweeperFunction": "sweeper_function"}
XRAY = "X-Ray traces"


@dataclass(frozen=True)
class Wakes:
    """A million wakes of one kind, line by line (`bench.cost.lines`), and their total."""

    lines: list[cost.Line]
    # What X-Ray would add a million wakes with every function traced (`Tracing=Active`).
    xray_if_active_usd: float = 0.0

    @property
    def usd(self) -> float:
        return sum(line.usd_per_million for line in self.lines)

    @property
    def usd_if_active(self) -> float:
        """The total with every function traced (`Tracing=Active`)."""
        return sum(line.usd_per_million for line in self.lines if line.item != XRAY) + self.xray_if_active_usd


def at_rest(deployment: Deployment, planner_on: bool = True) -> cost.AtRest:
    """The simulator's stack with no wake for `IDLE_S`: its sweeps and its event source's long polls."""
    with counted_logs():
        world = World(deployment, start=T0)
        # A function run every minute stays warm; its rare cold starts are left out.
        world.sweeper_function.warm(1)
        world.engine.run(T0 + IDLE_S)
    runs = {}
    for logical_id, attribute in SIMULATED.items():
        function = getattr(world, attribute)
        n = function.invocations
        runs[logical_id] = cost.Usage(
            requests=Counter({k: v / n for k, v in world.store.metered.requests.items()}),
            invocations=Counter({logical_id: 1}),
            seconds=Counter({logical_id: function.billed_s / n}),
            log_bytes=SWEEP_LOG_BYTES,
            read_units=world.store.metered.read_units / n,
        )
    # The planner's run at rest is the sweeper's: the same keys-only query of each empty shard of
    # PendingWakes (wakeup.table.pending), and a GetEventSourceMapping, which Lambda does not bill
    # (AWS Lambda pricing bills requests to functions, not to its API). The simulator runs the
    # planner's decisions for a burst (wakeup_sim.planner), not its function at rest.
    sweep = runs["SweeperFunction"]
    runs["PlannerFunction"] = replace(
        sweep,
        invocations=Counter({"PlannerFunction": 1}),
        seconds=Counter({"PlannerFunction": sum(sweep.seconds.values())}),
    )
    return cost.AtRest(world.event_source.long_polls() / IDLE_S, runs, custom_metrics_at_rest(planner_on))


def custom_metrics_at_rest(planner_on: bool = True) -> int:
    """The metrics a sweep with nothing to do and a planner (when on) with no burst coming publish
    (each a custom metric CloudWatch charges)."""
    publish(Sweep(overdue=0, rearmed=0, failed=0))
    if planner_on:
        planner.publish(planner.Run(planner.Plan(None, None, 0), before=None, sent=False, busy=False))
    published = len(metrics.metric_set)
    metrics.clear_metrics()
    return published


def per_million(
    deployment: Deployment, path: str, traced: Set[str], seconds: float = STEADY_S, traceable: Set[str] = frozenset()
) -> Wakes:
    """A million wakes of `path` (near, far) at a steady `STEADY_RATE` a second, without what the
    stack pays at rest meanwhile: the run's usage less that of its twin with no wake. `traced`: the
    functions with active tracing, whose sampled invocations X-Ray charges as traces; `traceable`:
    those `Tracing=Active` would trace (priced aside, in `xray_if_active_usd`)."""
    scenario = Scenario(f"steady, {path}", round(STEADY_RATE * seconds), path=path, rate_per_s=STEADY_RATE, warm=True)
    return priced(scenario, deployment, traced, traceable)


def quiet_per_million(deployment: Deployment, path: str, traced: Set[str], traceable: Set[str] = frozenset()) -> Wakes:
    """A million wakes of `path` on a quiet stack: `make simulate`'s wake every 10 minutes, each
    meeting a cold caller at the memory the planner gives a quiet stack (wakeup.logic.planner)."""
    [scenario] = [s for s in SCENARIOS if s.name == QUIET]
    return priced(replace(scenario, path=path), deployment, traced, traceable)


def priced(scenario: Scenario, deployment: Deployment, traced: Set[str], traceable: Set[str]) -> Wakes:
    """`scenario`'s wakes priced line by line, less what its twin with no wake uses meanwhile."""
    rate = scenario.rate_per_s
    assert rate, "a scenario at a rate"
    outcome = run(scenario, deployment)
    with counted_logs() as logs:
        twin = World(deployment, start=T0, seed=scenario.seed, warm=scenario.warm)
        twin.engine.run(outcome.world.engine.now)
    marginal = report.world_usage(outcome.world, outcome.log_bytes) - report.world_usage(twin, logs.bytes)
    each = marginal / len(outcome.wakes)
    memory = {f.name: f.memory_mb / 1024 for f in outcome.world.functions}

    def traces(functions: Set[str]) -> float:
        a_second = [cost.traces_a_second(n * rate) for name, n in each.invocations.items() if name in functions]
        return sum(a_second) / rate

    xray = cost.Line(XRAY, traces(traced), "traces", traces(traced) * cost.PRICE_TRACE * 1e6)
    return Wakes(
        [*cost.lines(each, memory, deployment.quiet_functions), xray], traces(traceable) * cost.PRICE_TRACE * 1e6
    )


def dollars(usd: float) -> str:
    """Dollars and cents; a charge under ten cents to the hundredth of a cent."""
    return f"${usd:,.2f}" if usd >= 0.1 or usd == 0 else f"${usd:.4f}"


def quantity(amount: float) -> str:
    return f"{amount:,.0f}" if amount >= 100 else f"{amount:.3g}"


def amount(count: float, unit: str) -> str:
    """`count` of `unit`: one of a counted thing in the singular ("1 dashboard"), a measure as it is."""
    if count == 1 and unit.islower() and unit.endswith("s"):
        unit = unit[:-1]
    return f"{quantity(count)} {unit}"


def idle_table(month: Sequence[cost.MonthLine]) -> str:
    rows = [[line.item, amount(line.quantity, line.unit), dollars(line.usd), line.price.page] for line in month]
    rows.append(["**sum**", "", f"**{dollars(sum(line.usd for line in month))}**", ""])
    return table(["charge (a month, no wake)", "quantity", "USD", "price from"], rows)


def wakes_table(near: Wakes, far: Wakes) -> str:
    rows: list[list[object]] = [
        [
            f"{n.item} ({n.unit})",
            f"{n.quantity:.3g} → ${n.usd_per_million:.2f}",
            f"{f.quantity:.3g} → ${f.usd_per_million:.2f}",
        ]
        for n, f in zip(near.lines, far.lines, strict=True)
    ]
    rows.append(["**sum**", f"**${near.usd:.2f}**", f"**${far.usd:.2f}**"])
    return table(["per wake → USD per million wakes", "near", "far"], rows)


def volumes_table(idle: float, busy: tuple[Wakes, Wakes], quiet: tuple[Wakes, Wakes], quiet_below: float) -> str:
    """The month at each of `WAKES_A_DAY`: a wake at the steady rate's price, or below `quiet_below` a
    day (the planner's quiet stack, its caller at its burst memory) at the quiet stack's."""
    days = cost.MONTH_HOURS / 24
    rows = []
    for per_day in WAKES_A_DAY:
        near, far = quiet if per_day < quiet_below else busy
        rows.append(
            [
                f"{per_day:,}",
                dollars(idle + per_day * days * near.usd / 1e6),
                dollars(idle + per_day * days * far.usd / 1e6),
            ]
        )
    return table(["wakes a day", "a month, all near", "a month, all far"], rows)


def quiet_below(resolver: Resolver, deployment: Deployment) -> float:
    """Wakes a day under which the planner keeps the caller at its burst memory (a quiet stack:
    fewer than `planner.QUIET_WAKES` in its window); 0 with the planner off or not setting memory."""
    settings = planner_settings(resolver, deployment)
    if not resolver.condition("PlannerOn") or not settings.burst_memory_mb:
        return 0.0
    start, end = planner.window(0, settings)
    return planner.QUIET_WAKES / (end - start) * 86400


def burst_note(pollers: int, resolver: Resolver, deployment: Deployment) -> str:
    if resolver.condition("PlannerOn"):
        settings = planner_settings(resolver, deployment)
        raised = planner.pollers_for(planner.invocations_for(10_000, settings), settings)
        # Raised by the run a lead before the burst, lowered by the first run after it, each update
        # assumed to take its delay to apply (wakeup.logic.planner): counted from the first update
        # sent to the second applied.
        minutes = (settings.lead_s + settings.period_s + settings.update_delay_s) / 60
        each = raised * minutes / 60 * cost.PRICE_EPU_HOUR
        return (
            f"A burst the schedule shows: the planner (PlannerEnabled) raises provisioned pollers for it, with "
            f"the caller's memory (CallerBurstMemorySize: {resolver.ref('CallerBurstMemorySize')} MB, "
            f"{resolver.ref('CallerMemorySize')} at rest), and lowers both after it. 10,000 wakes at one second "
            f"get {raised} pollers for "
            f"at most {minutes:g} minutes: {dollars(each)} a burst (EPU-hours by the second, a minute at least; "
            f"{cost.PRICE_EPU_HOUR.page}), on top of its wakes, priced per million above (a wake in those "
            f"minutes pays the caller's larger memory)."
            + (f" CallerMinimumPollers keeps {pollers} at all times, in the month above." if pollers else "")
        )
    if not pollers:
        return (
            "A burst: nothing is raised for it. Provisioned mode is off (CallerMinimumPollers=0) and the planner "
            "too (PlannerEnabled=false): a burst meets Lambda's default scaling (five batches at first, 300 more "
            "a minute) and pays only its wakes, priced per million above."
        )
    month = pollers * cost.MONTH_HOURS * cost.PRICE_EPU_HOUR
    raised_cost = pollers * BURST_MINUTES / 60 * cost.PRICE_EPU_HOUR
    return (
        f"A burst: nothing is raised for it, so each pays only its wakes (priced per million above): "
        f"template.yaml keeps {pollers} provisioned pollers (CallerMinimumPollers) ready all month, "
        f"{dollars(month)} of the month at rest. Raised for {BURST_MINUTES} minutes around each burst instead "
        f"(PlannerEnabled=true), the same {pollers} pollers would cost {dollars(raised_cost)} a burst."
    )


def planner_settings(resolver: Resolver, deployment: Deployment) -> planner.PlannerSettings:
    """The planner's settings as the template gives them to it, for the deployment's event source."""
    return settings_for(
        deployment,
        update_delay_s=int(resolver.ref("PlannerUpdateDelaySeconds")),
        margin_s=int(resolver.ref("PlannerMarginSeconds")),
    )


def bill(parameters: Mapping[str, str], steady_s: float = STEADY_S) -> str:
    """Everything `make cost` prints for these parameters (already checked); `steady_s`: seconds of
    wakes at the steady rate."""
    template = load_template(TEMPLATE)
    resolver = Resolver(template, stack_name="cost", parameter_overrides=dict(parameters))
    deployment = from_template(TEMPLATE, parameters)
    rest = at_rest(deployment, resolver.condition("PlannerOn"))
    month = cost.idle_month(resolver, rest)
    idle = sum(line.usd for line in month)
    # The same stack with X-Ray on (`Tracing=Active`), priced beside it: an operator's choice.
    active = Resolver(template, stack_name="cost", parameter_overrides={**parameters, "Tracing": "Active"})
    idle_if_active = sum(line.usd for line in cost.idle_month(active, rest))

    def traced_by(resolver: Resolver) -> set[str]:
        return {
            logical_id
            for logical_id, definition in template.of_type(SERVERLESS_FUNCTION)
            if cost.function_properties(resolver, definition).get("Tracing") == "Active"
        }

    traced, traceable = traced_by(resolver), traced_by(active)
    near, far = (per_million(deployment, path, traced, steady_s, traceable) for path in ("near", "far"))
    quiet_near, quiet_far = (quiet_per_million(deployment, path, traced, traceable) for path in ("near", "far"))
    quiet, below = (quiet_near, quiet_far), quiet_below(resolver, deployment)
    xray = (
        f"X-Ray (Tracing={resolver.ref('Tracing')}): with Tracing=Active the stack at rest costs "
        f"${idle_if_active:.2f} a month, and a million wakes "
        f"${near.usd_if_active:.2f} near, ${far.usd_if_active:.2f} far "
        "(Lambda's sampling of an active function: the first request each second and 5% of the rest)."
    )
    pollers = deployment.minimum_pollers or 0
    given = ", ".join(f"{k}={v}" for k, v in parameters.items()) or "none (template.yaml's defaults)"
    return "\n\n".join(
        [
            f"Parameters overridden: {given}. Prices: us-east-1, list price, no free tier (bench/cost.py).",
            "## A month with no wake\n\n" + idle_table(month),
            f"## A million wakes, at a steady {STEADY_RATE} a second (the simulator, {steady_s:g} s of wakes; "
            "what the stack pays at rest meanwhile left out: it is in the month above)\n\n" + wakes_table(near, far),
            "## A month with wakes (the month at rest, and each wake at the steady rate's price; below "
            f"{below:,.0f} wakes a day at a quiet stack's, a wake every 10 minutes)\n\n"
            + volumes_table(idle, (near, far), quiet, below),
            burst_note(pollers, resolver, deployment),
            xray,
            f"idle stack per month: ${idle:.2f}\ntotal per million wakes: near ${near.usd:.2f}, far ${far.usd:.2f}",
        ]
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.bill", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--parameter-overrides",
        nargs="*",
        default=[],
        metavar="Key=Value",
        help="template.yaml's parameters, as sam deploy --parameter-overrides takes them",
    )
    args = parser.parse_args(argv)
    try:
        parameters = parse(args.parameter_overrides)
        check(load_template(TEMPLATE), parameters)
    except ParameterError as refused:
        print(f"parameter refused: {refused}", file=sys.stderr)
        return 2
    print(bill(parameters))
    return 0


if __name__ == "__main__":
    sys.exit(main())
