"""A rough cost per million wakes, from what the functions were counted doing per wake.

The counts are the local stack's (see `bench.stack`); the prices are AWS's list prices for
us-east-1, on-demand, without free tiers, as published in 2025: check the pricing pages before
relying on them. What is estimated rather than counted:

- DynamoDB units: a consistent `GetItem` of an item under 4 KB is 1 read unit; a write of an
  instance item costs what `wakeup_sim.capacity` computes from DynamoDB's item-size and index rules
  for a near wake's writes (its registration, claim and outcome) on the indexes template.yaml
  defines; the simulator meters every write it makes by the same rules (`Usage.write_units`);
- SQS requests of Lambda's event source mapping: a receive and a delete per batch delivered (its
  empty long polls are a fixed cost, not a per-wake one);
- Lambda duration: the seconds the handlers ran here, at the template's memory size. Lambda bills
  what the handler runs (rounded up to the millisecond); the caller's wait for the last moment
  before a wake is part of it;
- CloudWatch Logs: the bytes the functions printed, plus about 350 bytes of Lambda's own START,
  END and REPORT lines per invocation;
- the history (`wakeup.history`): one `PutItem` per call of an attempt item under 1 KB that no
  index holds, so 1 write unit, priced on a row of its own (its budget: $0.70 per million wakes);
  the few milliseconds of the request are in "Lambda duration";
- Secrets Manager: the caller reads the signing master key once per warm function per 15 minutes.

Not priced: the caller's provisioned event pollers (billed per event poller unit and hour, "AWS
Lambda pricing") and raising the table's warm throughput (a charge per increase, "Understanding
DynamoDB warm throughput"). Neither price was found in the documentation searched; both are fixed
costs of a stack, not of a wake (docs/operations.md, "Sizing for bursts").
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.stats import table
from wakeup_awsfacts.template import SERVERLESS_FUNCTION, Resolver, load_template
from wakeup_sim import capacity

ROOT = Path(__file__).resolve().parents[1]

# USD per unit.
PRICE_API_REQUEST = 1.00 / 1e6  # HTTP API, first 300 million requests a month
PRICE_LAMBDA_REQUEST = 0.20 / 1e6
PRICE_LAMBDA_GB_SECOND = 0.0000133334  # arm64
PRICE_READ_UNIT = 0.125 / 1e6  # DynamoDB on-demand
PRICE_WRITE_UNIT = 0.625 / 1e6
PRICE_SQS_REQUEST = 0.40 / 1e6  # standard queue, per 64 KB chunk
PRICE_SCHEDULER_INVOCATION = 1.00 / 1e6  # EventBridge Scheduler; its API calls are free
PRICE_LOG_GB = 0.50  # CloudWatch Logs ingestion, standard class
PRICE_SECRETS_REQUEST = 0.05 / 1e4  # Secrets Manager API calls

# The history's attempt item: under 1 KB, in no index.
HISTORY_WRITE_UNITS = 1
# The functions' one PutItem is the history's: accounts and instances are written in transactions
# and updates (wakeup.store), so the requests counted by operation tell the two apart.
HISTORY_PUT = "dynamodb:PutItem"
HISTORY_BUDGET_USD_PER_MILLION = 0.70

LAMBDA_OWN_LOG_BYTES = 350
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
        )


@dataclass(frozen=True)
class Line:
    item: str
    quantity: float
    unit: str
    usd_per_million: float


def lines(usage: Usage, memory: float | Mapping[str, float]) -> list[Line]:
    """The cost of `usage`, line by line; `memory`: each function's GB by logical id (or one for all)."""
    reads = usage.read_units
    if reads is None:
        reads = usage.requests.get("dynamodb:GetItem", 0) + 0.5 * usage.requests.get("dynamodb:Query", 0)
    history = HISTORY_WRITE_UNITS * usage.requests.get(HISTORY_PUT, 0)
    writes = usage.write_units
    if writes is None:
        writes = capacity.units_per_instance_write() * sum(usage.requests.get(name, 0) for name in _WRITES)
    else:
        # Metered item by item, the units include the history's: priced on its own line below.
        writes -= history
    sqs = sum(usage.requests.get(name, 0) for name in _SQS) + 2 * usage.sqs_batches
    secrets = usage.requests.get("secretsmanager:GetSecretValue", 0)
    invocations = sum(usage.invocations.values())
    gb = memory if isinstance(memory, Mapping) else dict.fromkeys(usage.seconds, memory)
    gb_seconds = sum(seconds * gb[function] for function, seconds in usage.seconds.items())
    log_gb = (usage.log_bytes + LAMBDA_OWN_LOG_BYTES * invocations) / 1e9
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


def report(usages: Mapping[str, Usage], memory: float | Mapping[str, float]) -> str:
    """One column per kind of wake: quantity per wake, and USD per million wakes."""
    names = list(usages)
    by_name = {name: lines(usage, memory) for name, usage in usages.items()}
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
