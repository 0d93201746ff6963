"""A rough cost per million wakes, from what the functions were counted doing per wake.

The counts are the local stack's (see `bench.stack`); the prices are AWS's list prices for
us-east-1, on-demand, without free tiers, as published in 2025: check the pricing pages before
relying on them. What is estimated rather than counted:

- DynamoDB units: a consistent `GetItem` of an item under 4 KB is 1 read unit; a write of an
  instance item costs what the caller says (`units_per_write`: `make bench` passes what
  `wakeup_sim.capacity` computes from DynamoDB's item-size and index rules for a near wake's writes,
  its registration, claim and outcome, on the indexes template.yaml defines); the simulator meters
  every write it makes by the same rules (`Usage.write_units`);
- SQS requests of Lambda's event source mapping: a receive and a delete per batch delivered (its
  empty long polls are a fixed cost, not a per-wake one);
- Lambda duration: the seconds the handlers ran here, at the template's memory size. Lambda bills
  what the handler runs (rounded up to the millisecond); the caller's wait for the last moment
  before a wake is part of it;
- CloudWatch Logs: the bytes the functions printed, plus about 350 bytes of Lambda's own START,
  END and REPORT lines per invocation;
- the history (`wakeup.table.history`): one put per call of an attempt item under 1 KB that no
  index holds, so 1 write unit, priced on a row of its own (its budget: $0.70 per million wakes);
  an invocation's puts go in one `BatchWriteItem` request, which bills each put as the `PutItem` it
  stands for, so the row counts puts, not requests; the few milliseconds of the request are in
  "Lambda duration";
- Secrets Manager: the caller reads the signing master key once per warm function per 15 minutes.

What a stack pays each month with no wake at all is `idle_month`'s (provisioned pollers, dashboard,
alarms, custom metrics, the secret, what runs every minute); `python -m bench.bill` (`make cost`,
`bench.bill`) prints it for a deployment's parameters. Not priced: raising the table's warm
throughput (a charge once per increase, "Understanding DynamoDB warm throughput": its price was not
found in the documentation searched).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from wakeup_awsfacts.lambda_logging import logs_system_lines
from wakeup_awsfacts.template import SERVERLESS_FUNCTION, Resolver, load_template
from wakeup_cost.stats import table

ROOT = Path(__file__).resolve().parents[2]


class Price(float):
    """USD per unit, with the AWS pricing page it was read from (us-east-1, list price, no free tier)."""

    page: str

    def __new__(cls, usd: float, page: str) -> Price:
        price = super().__new__(cls, usd)
        price.page = page
        return price


LAMBDA_PAGE = "AWS Lambda pricing, https://aws.amazon.com/lambda/pricing/"
CLOUDWATCH_PAGE = "Amazon CloudWatch pricing, https://aws.amazon.com/cloudwatch/pricing/"
DYNAMODB_PAGE = "Amazon DynamoDB pricing for on-demand capacity, https://aws.amazon.com/dynamodb/pricing/on-demand/"
SECRETS_PAGE = "AWS Secrets Manager pricing, https://aws.amazon.com/secrets-manager/pricing/"

# HTTP APIs, the first 300 million requests a month.
PRICE_API_REQUEST = Price(1.00 / 1e6, "Amazon API Gateway pricing, https://aws.amazon.com/api-gateway/pricing/")
PRICE_LAMBDA_REQUEST = Price(0.20 / 1e6, LAMBDA_PAGE)
PRICE_LAMBDA_GB_SECOND = Price(0.0000133334, LAMBDA_PAGE)  # Arm, the first tier
# "Provisioned Mode for Event Source Mapping (ESM) Pricing": billed on the minimum event pollers and
# those autoscaling adds; for SQS an event poller unit (EPU) is one poller, "$0.00925 per EPU-hour",
# counted per second with a one-minute minimum.
PRICE_EPU_HOUR = Price(0.00925, LAMBDA_PAGE)
PRICE_READ_UNIT = Price(0.125 / 1e6, DYNAMODB_PAGE)
PRICE_WRITE_UNIT = Price(0.625 / 1e6, DYNAMODB_PAGE)
# Standard queue, per 64 KB chunk of a request.
PRICE_SQS_REQUEST = Price(0.40 / 1e6, "Amazon SQS pricing, https://aws.amazon.com/sqs/pricing/")
# EventBridge Scheduler's invocations; its API calls are free. The sweeper's rule (`rate(1 minute)`)
# is an event of an AWS service (source aws.events), which EventBridge does not charge.
PRICE_SCHEDULER_INVOCATION = Price(
    1.00 / 1e6, "Amazon EventBridge pricing, https://aws.amazon.com/eventbridge/pricing/"
)
PRICE_LOG_GB = Price(0.50, CLOUDWATCH_PAGE)  # Logs ingestion, standard class (Lambda's logs: the first tier)
PRICE_LOG_GB_MONTH = Price(0.03, CLOUDWATCH_PAGE)  # Logs storage (archival), per GB-month
PRICE_DASHBOARD_MONTH = Price(3.00, CLOUDWATCH_PAGE)
PRICE_ALARM_METRIC_MONTH = Price(0.10, CLOUDWATCH_PAGE)  # a standard-resolution alarm, per metric it watches
PRICE_HIGH_RESOLUTION_ALARM_METRIC_MONTH = Price(0.30, CLOUDWATCH_PAGE)  # period under 60 s
PRICE_CUSTOM_METRIC_MONTH = Price(0.30, CLOUDWATCH_PAGE)  # the first 10,000; prorated by the hours published
PRICE_SECRET_MONTH = Price(0.40, SECRETS_PAGE)
PRICE_SECRETS_REQUEST = Price(0.05 / 1e4, SECRETS_PAGE)
PRICE_TRACE = Price(5.00 / 1e6, "AWS X-Ray pricing, https://aws.amazon.com/xray/pricing/")  # traces recorded

# AWS's pricing pages count a month as 730 hours.
MONTH_HOURS = 730
MONTH_S = MONTH_HOURS * 3600.0

# The history's attempt item: under 1 KB, in no index.
HISTORY_WRITE_UNITS = 1
# The functions' one BatchWriteItem is the history's: accounts and instances are written in
# transactions and updates (wakeup.table), so the requests counted by operation tell the two apart.
# It carries up to 25 puts (an invocation's calls), each billed as the PutItem it stands for: a
# write request unit per item up to 1 KB ("Amazon DynamoDB pricing for on-demand capacity",
# https://aws.amazon.com/dynamodb/pricing/on-demand/; "BatchWriteItem", DynamoDB API reference,
# https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_BatchWriteItem.html).
HISTORY_PUT = "dynamodb:BatchWriteItem"
# Where requests are counted rather than items metered (the local stack, `make bench`), a
# BatchWriteItem's puts are counted too, under this name (wakeup_local.aws.request_counter).
HISTORY_PUT_ITEMS = f"{HISTORY_PUT} PutRequest"
HISTORY_BUDGET_USD_PER_MILLION = 0.70

# The per-account rate on the account routes (wakeup.logic.rates): an admitted request adds one
# conditional write of the account's small count item (1 write unit); a refused one is its API
# request, its invocation and its token's consistent read (1 read unit), with neither the count's
# write (its environment knows the window is full: one refused write a window per environment
# aside) nor the route's own work.
RATE_COUNT_WRITE_UNITS = 1
RATE_TOKEN_READ_UNITS = 1


@dataclass(frozen=True)
class AccountRequestCosts:
    """USD per request on the account routes, with the per-account rate: what the count adds to an
    admitted request, what a refusal costs, and the cheapest request it can refuse (a `GET` of one
    instance: the token's read, the count, the instance's read), at `seconds` of an environment of
    `memory_gb` each."""

    count_usd: float
    refusal_usd: float
    cheapest_admitted_usd: float


def account_request_costs(memory_gb: float, seconds: float) -> AccountRequestCosts:
    """The per-account rate's prices; a refusal is timed as long as the request it refuses, which it
    never outlasts (it stops before the route's work)."""
    served = PRICE_API_REQUEST + PRICE_LAMBDA_REQUEST + memory_gb * seconds * PRICE_LAMBDA_GB_SECOND
    count = RATE_COUNT_WRITE_UNITS * PRICE_WRITE_UNIT
    refusal = served + RATE_TOKEN_READ_UNITS * PRICE_READ_UNIT
    return AccountRequestCosts(count, refusal, refusal + count + PRICE_READ_UNIT)


LAMBDA_OWN_LOG_BYTES = 350  # START, END and REPORT of an invocation
_WRITES = ("dynamodb:UpdateItem", "dynamodb:DeleteItem")
# The event source's receives and deletes, where counted (the simulator); the bench estimates them
# from its batches instead.
_SQS = ("sqs:SendMessage", "sqs:ReceiveMessage", "sqs:DeleteMessageBatch")


def memory_gb() -> dict[str, float]:
    """Each function's memory in GB by logical id, as template.yaml deploys it with its parameters'
    defaults (the caller has a size of its own, CallerMemorySize; the others take Globals')."""
    template = load_template(ROOT / "template.yaml")
    resolver = Resolver(template, stack_name="cost")
    default = resolver.resolve(template.function_globals.get("MemorySize", 128))
    return {
        logical_id: float(resolver.resolve((definition.get("Properties") or {}).get("MemorySize", default))) / 1024
        for logical_id, definition in template.of_type(SERVERLESS_FUNCTION)
    }


@dataclass
class Usage:
    """What one wake (or one of anything) costs in counted requests, invocations and bytes."""

    requests: Counter[str] = field(default_factory=Counter)
    invocations: Counter[str] = field(default_factory=Counter)
    seconds: Counter[str] = field(default_factory=Counter)
    log_bytes: float = 0.0
    api_requests: float = 0.0
    scheduler_invocations: float = 0.0
    sqs_batches: float = 0.0
    # DynamoDB units when metered item by item (the simulator); None: estimated from the requests.
    read_units: float | None = None
    write_units: float | None = None
    # The history's puts (its items), when metered one by one inside their batches (the simulator);
    # None: the `HISTORY_PUT_ITEMS` counted (the local stack counts each request's puts).
    history_puts: float | None = None

    @classmethod
    def per(cls, counted: Mapping[str, Any], count: int, **extra: float) -> Usage:
        """`counted` (a difference of the stack's meters) divided by `count`."""
        return cls(
            requests=Counter({k: v / count for k, v in counted["requests"].items()}),
            invocations=Counter({k: v / count for k, v in counted["invocations"].items()}),
            seconds=Counter({k: v / count for k, v in counted["seconds"].items()}),
            log_bytes=counted["log_bytes"] / count,
            **extra,
        )

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            requests=self.requests + other.requests,
            invocations=self.invocations + other.invocations,
            seconds=self.seconds + other.seconds,
            log_bytes=self.log_bytes + other.log_bytes,
            api_requests=self.api_requests + other.api_requests,
            scheduler_invocations=self.scheduler_invocations + other.scheduler_invocations,
            sqs_batches=self.sqs_batches + other.sqs_batches,
        )

    def __sub__(self, other: Usage) -> Usage:
        def minus(a: Counter[str], b: Counter[str]) -> Counter[str]:
            return Counter({k: a.get(k, 0) - b.get(k, 0) for k in set(a) | set(b)})

        return Usage(
            requests=minus(self.requests, other.requests),
            invocations=minus(self.invocations, other.invocations),
            seconds=minus(self.seconds, other.seconds),
            log_bytes=self.log_bytes - other.log_bytes,
            api_requests=self.api_requests - other.api_requests,
            scheduler_invocations=self.scheduler_invocations - other.scheduler_invocations,
            sqs_batches=self.sqs_batches - other.sqs_batches,
            # Metered units carry over when both sides have them.
            read_units=_minus(self.read_units, other.read_units),
            write_units=_minus(self.write_units, other.write_units),
            history_puts=_minus(self.history_puts, other.history_puts),
        )

    def __truediv__(self, count: float) -> Usage:
        def each(counter: Counter[str]) -> Counter[str]:
            return Counter({k: v / count for k, v in counter.items()})

        return Usage(
            requests=each(self.requests),
            invocations=each(self.invocations),
            seconds=each(self.seconds),
            log_bytes=self.log_bytes / count,
            api_requests=self.api_requests / count,
            scheduler_invocations=self.scheduler_invocations / count,
            sqs_batches=self.sqs_batches / count,
            read_units=None if self.read_units is None else self.read_units / count,
            write_units=None if self.write_units is None else self.write_units / count,
            history_puts=None if self.history_puts is None else self.history_puts / count,
        )


def _minus(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else a - b


@dataclass(frozen=True)
class Line:
    item: str
    quantity: float
    unit: str
    usd_per_million: float


def lines(
    usage: Usage,
    memory: float | Mapping[str, float],
    quiet: frozenset[str] = frozenset(),
    units_per_write: float | None = None,
) -> list[Line]:
    """The cost of `usage`, line by line; `memory`: each function's GB by logical id (or one for all);
    `quiet`: the functions whose `START`, `END` and `REPORT` Lambda does not log; `units_per_write`:
    the write units of one instance write, for a usage that counted its writes rather than metered
    their units (the simulator's `capacity.units_per_instance_write()`: the cost model stays beneath
    the simulator, so it is handed the figure rather than importing it)."""
    reads = usage.read_units
    if reads is None:
        reads = usage.requests.get("dynamodb:GetItem", 0) + 0.5 * usage.requests.get("dynamodb:Query", 0)
    puts = usage.history_puts if usage.history_puts is not None else usage.requests.get(HISTORY_PUT_ITEMS, 0)
    history = HISTORY_WRITE_UNITS * puts
    writes = usage.write_units
    if writes is None:
        counted = sum(usage.requests.get(name, 0) for name in _WRITES)
        if counted and units_per_write is None:
            raise ValueError("a usage with counted instance writes is priced with units_per_write")
        writes = (units_per_write or 0.0) * counted
    else:
        # Metered item by item, the units include the history's: priced on its own line below.
        writes -= history
    sqs = sum(usage.requests.get(name, 0) for name in _SQS) + 2 * usage.sqs_batches
    secrets = usage.requests.get("secretsmanager:GetSecretValue", 0)
    invocations = sum(usage.invocations.values())
    logged = sum(n for function, n in usage.invocations.items() if function not in quiet)
    gb = memory if isinstance(memory, Mapping) else dict.fromkeys(usage.seconds, memory)
    gb_seconds = sum(seconds * gb[function] for function, seconds in usage.seconds.items())
    log_gb = (usage.log_bytes + LAMBDA_OWN_LOG_BYTES * logged) / 1e9
    million = 1e6
    return [
        Line("API Gateway requests", usage.api_requests, "requests", usage.api_requests * PRICE_API_REQUEST * million),
        Line("Lambda invocations", invocations, "invocations", invocations * PRICE_LAMBDA_REQUEST * million),
        Line("Lambda duration", gb_seconds, "GB-s", gb_seconds * PRICE_LAMBDA_GB_SECOND * million),
        Line("DynamoDB reads", reads, "RRU", reads * PRICE_READ_UNIT * million),
        Line("DynamoDB writes", writes, "WRU", writes * PRICE_WRITE_UNIT * million),
        Line("SQS requests", sqs, "requests", sqs * PRICE_SQS_REQUEST * million),
        Line(
            "Scheduler invocations",
            usage.scheduler_invocations,
            "invocations",
            usage.scheduler_invocations * PRICE_SCHEDULER_INVOCATION * million,
        ),
        Line("CloudWatch Logs", log_gb * 1e6, "KB", log_gb * PRICE_LOG_GB * million),
        Line("Secrets Manager requests", secrets, "requests", secrets * PRICE_SECRETS_REQUEST * million),
        Line("Attempt history (DynamoDB writes)", history, "WRU", history * PRICE_WRITE_UNIT * million),
    ]


def report(
    usages: Mapping[str, Usage], memory: float | Mapping[str, float], units_per_write: float | None = None
) -> str:
    """One column per kind of wake: quantity per wake, and USD per million wakes (`units_per_write`:
    as `lines` takes it)."""
    names = list(usages)
    by_name = {name: lines(usage, memory, units_per_write=units_per_write) for name, usage in usages.items()}
    items = by_name[names[0]]
    rows: list[list[object]] = []
    for index, line in enumerate(items):
        row: list[object] = [f"{line.item} ({line.unit})"]
        for name in names:
            found = by_name[name][index]
            row.append(f"{found.quantity:.3g} → ${found.usd_per_million:.2f}")
        rows.append(row)
    totals: list[object] = ["**total per million wakes**"]
    totals += [f"**${sum(line.usd_per_million for line in by_name[name]):.2f}**" for name in names]
    rows.append(totals)
    return table(["per wake → USD per million wakes", *names], rows)


def requests_report(usages: Mapping[str, Usage]) -> str:
    """The AWS requests counted per operation (or per wake), by kind."""
    names = list(usages)
    operations = sorted({op for usage in usages.values() for op, n in usage.requests.items() if abs(n) > 1e-9})
    rows: list[list[object]] = []
    for operation in operations:
        rows.append([operation, *(f"{usages[name].requests.get(operation, 0):.2f}" for name in names)])
    rows.append(["Lambda invocations", *(f"{sum(usages[name].invocations.values()):.2f}" for name in names)])
    rows.append(["Lambda seconds", *(f"{sum(usages[name].seconds.values()) * 1000:.1f} ms" for name in names)])
    rows.append(["bytes logged", *(f"{usages[name].log_bytes:.0f}" for name in names)])
    return table(["counted per request or wake", *names], rows)


# --- the month at rest ----------------------------------------------------------------------------

ALARM = "AWS::CloudWatch::Alarm"
COMPOSITE_ALARM = "AWS::CloudWatch::CompositeAlarm"
PRICE_COMPOSITE_ALARM_MONTH = Price(0.50, CLOUDWATCH_PAGE)


@dataclass(frozen=True)
class MonthLine:
    """One charge of a month: how much of what, at which price (its page: `price.page`)."""

    item: str
    quantity: float
    unit: str
    price: Price

    @property
    def usd(self) -> float:
        return self.quantity * self.price


@dataclass(frozen=True)
class AtRest:
    """What a stack does with no wake (the simulator's idle stack): its event source's empty long polls
    a second, one run of each scheduled function by logical id (requests, billed seconds, read units,
    the bytes its handler logs), and the custom metrics those runs publish."""

    receives_per_s: float
    runs: Mapping[str, Usage]
    custom_metrics: int


def idle_month(resolver: Resolver, at_rest: AtRest) -> list[MonthLine]:
    """Every charge the stack `resolver` resolves (template.yaml with its parameters) pays in a month
    with no wake at all, line by line."""
    template = resolver.template
    created = [(lid, d) for lid, d in template.resources.items() if resolver.is_created(lid)]
    functions = {lid: function_properties(resolver, d) for lid, d in created if d.get("Type") == SERVERLESS_FUNCTION}
    pollers = sum(
        int(event.get("ProvisionedPollerConfig", {}).get("MinimumPollers", 0))
        for properties in functions.values()
        for event in _events(properties, "SQS")
    )
    standard, high_resolution = _alarm_metrics([d for _, d in created if d.get("Type") == ALARM], resolver)
    composite = sum(1 for _, d in created if d.get("Type") == COMPOSITE_ALARM)
    month = [
        MonthLine(
            "provisioned event pollers (CallerMinimumPollers)", pollers * MONTH_HOURS, "EPU-hours", PRICE_EPU_HOUR
        ),
        MonthLine("dashboards", _count(created, "AWS::CloudWatch::Dashboard"), "dashboards", PRICE_DASHBOARD_MONTH),
        MonthLine("alarms", standard, "alarm metrics", PRICE_ALARM_METRIC_MONTH),
        MonthLine("high-resolution alarms", high_resolution, "alarm metrics", PRICE_HIGH_RESOLUTION_ALARM_METRIC_MONTH),
        MonthLine("composite alarms", composite, "alarms", PRICE_COMPOSITE_ALARM_MONTH),
        MonthLine("custom metrics published at rest", at_rest.custom_metrics, "metrics", PRICE_CUSTOM_METRIC_MONTH),
        MonthLine("secrets", _count(created, "AWS::SecretsManager::Secret"), "secrets", PRICE_SECRET_MONTH),
        MonthLine(
            "idle receives (the event source's long polls)",
            at_rest.receives_per_s * MONTH_S,
            "requests",
            PRICE_SQS_REQUEST,
        ),
    ]
    logged_gb = stored_gb = 0.0
    for logical_id, properties in functions.items():
        runs = sum(MONTH_S / seconds for seconds in _schedule_periods(properties))
        if not runs:
            continue
        if logical_id not in at_rest.runs:
            raise ValueError(f"{logical_id} runs on a schedule, but the simulator does not run it at rest")
        run = at_rest.runs[logical_id]
        gb = float(properties.get("MemorySize", 128)) / 1024
        reads = run.read_units if run.read_units is not None else 0.0
        month += [
            MonthLine(f"{logical_id} invocations", runs, "invocations", PRICE_LAMBDA_REQUEST),
            MonthLine(f"{logical_id} duration", runs * sum(run.seconds.values()) * gb, "GB-s", PRICE_LAMBDA_GB_SECOND),
            MonthLine(f"{logical_id} reads ({_queries(run)} queries a run)", runs * reads, "RRU", PRICE_READ_UNIT),
        ]
        if properties.get("Tracing") == "Active":
            # The default sampling rule records the first request each second (`traces_a_second`): a
            # run a minute is always traced.
            month.append(MonthLine(f"{logical_id} X-Ray traces", runs, "traces", PRICE_TRACE))
        own = LAMBDA_OWN_LOG_BYTES if logs_system_lines(properties) else 0
        gb_logged = runs * (run.log_bytes + own) / 1e9
        logged_gb += gb_logged
        # What the log group holds once its retention is reached (logs are billed compressed; counted
        # here as ingested, so this is an upper bound).
        stored_gb += gb_logged * _retention_days(resolver, properties) * 24 / MONTH_HOURS
    month += [
        MonthLine("log ingestion of what runs at rest", logged_gb, "GB", PRICE_LOG_GB),
        MonthLine("log storage of what runs at rest (LogRetentionDays)", stored_gb, "GB-months", PRICE_LOG_GB_MONTH),
    ]
    return month


def traces_a_second(invocations_a_second: float) -> float:
    """Traces X-Ray records of a function with active tracing invoked this often: Lambda samples the
    first request each second and 5% of the others ("Visualize Lambda function invocations using
    AWS X-Ray", Lambda developer guide; X-Ray's default sampling rule)."""
    reservoir = min(invocations_a_second, 1.0)
    return reservoir + 0.05 * (invocations_a_second - reservoir)


def function_properties(resolver: Resolver, definition: Mapping[str, Any]) -> dict[str, Any]:
    """A function's properties as deployed: Globals' under its own, intrinsic functions resolved."""
    properties = {**resolver.template.function_globals, **(definition.get("Properties") or {})}
    resolved: dict[str, Any] = resolver.resolve(properties)
    return resolved


def _events(properties: Mapping[str, Any], kind: str) -> list[dict[str, Any]]:
    return [e.get("Properties") or {} for e in (properties.get("Events") or {}).values() if e.get("Type") == kind]


def _schedule_periods(properties: Mapping[str, Any]) -> list[float]:
    """Seconds between runs of each `rate(...)` schedule of a function (EventBridge's rate expressions)."""
    seconds = {"minute": 60, "minutes": 60, "hour": 3600, "hours": 3600, "day": 86400, "days": 86400}
    periods: list[float] = []
    for event in _events(properties, "Schedule"):
        found = re.fullmatch(r"rate\((\d+) (\w+)\)", str(event.get("Schedule", "")))
        if found is None:
            raise ValueError(f"a schedule this cost model cannot count: {event.get('Schedule')!r}")
        periods.append(int(found.group(1)) * seconds[found.group(2)])
    return periods


def _alarm_metrics(alarms: list[dict[str, Any]], resolver: Resolver) -> tuple[int, int]:
    """Metrics watched by standard- and high-resolution alarms: CloudWatch charges an alarm per metric
    it watches (a metric-math alarm for each metric of its expression), three times at a period under
    60 s."""
    standard = high = 0
    for alarm in alarms:
        properties = resolver.resolve(alarm.get("Properties") or {})
        metrics = [m for m in properties.get("Metrics", []) if "MetricStat" in m] or [properties]
        for metric in metrics:
            period = int((metric.get("MetricStat") or {}).get("Period", metric.get("Period", 60)))
            if period < 60:
                high += 1
            else:
                standard += 1
    return standard, high


def _count(created: list[tuple[str, dict[str, Any]]], resource_type: str) -> int:
    return sum(1 for _, definition in created if definition.get("Type") == resource_type)


def _queries(run: Usage) -> int:
    return round(run.requests.get("dynamodb:Query", 0))


def _retention_days(resolver: Resolver, properties: Mapping[str, Any]) -> float:
    """How long the function's log group (`LoggingConfig.LogGroup`, the template's) keeps events."""
    name = (properties.get("LoggingConfig") or {}).get("LogGroup")
    for logical_id, group in resolver.template.of_type("AWS::Logs::LogGroup"):
        if resolver.physical_name(logical_id) == name:
            retention = resolver.resolve((group.get("Properties") or {}).get("RetentionInDays"))
            if retention is not None:
                return float(retention)
    # A log group without retention keeps everything: a month's logs a month, growing.
    return MONTH_HOURS / 24
