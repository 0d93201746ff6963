"""The least a wake can cost on AWS while the service keeps what DESIGN.md requires of it.

Issue 10 asks for at most $5 per million near wakes and $7 per million far ones. This module lists,
for each kind of wake, the AWS charges that DESIGN.md's architecture cannot avoid, each at its
smallest: no Lambda duration, no log byte, a caller invocation shared by as many wakes as one
receive can return. Priced with `wakeup_cost.cost`'s prices, the sum is a floor under any tuning of this
design; `python -m bench.cost_floor` prints it. `tests/unit/test_cost_floor.py` checks that the
simulator never measures less than the floor, line by line, so the floor is a true lower bound of
what the code does.

The rules behind the quantities:
- DynamoDB ("DynamoDB read and write operations"; "Global secondary indexes", "Provisioned
  throughput considerations"): a write of an item up to 1 KB is one write unit, a strongly
  consistent read up to 4 KB one read unit; an item entering a sparse index costs one more write,
  leaving it one more.
- SQS ("Amazon SQS pricing"; `ReceiveMessage`'s `MaxNumberOfMessages`, at most 10): a send per
  message, and at least one receive and one `DeleteMessageBatch` for each ten messages.
- EventBridge Scheduler ("EventBridge Scheduler pricing"): a charge per invocation; its API calls
  (`CreateSchedule`) are free.
- Lambda: a request charge per invocation. A caller batch (`BatchSize` up to 10,000 with a
  batching window) can share one invocation among many wakes: counted as none here.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

from wakeup_cost import cost
from wakeup_cost.stats import table

MILLION = 1e6
HISTORY_ITEM = "the call's history item"


@dataclass(frozen=True)
class Charge:
    """One charge a wake cannot avoid: what it is, why DESIGN.md needs it, how much a wake uses."""

    item: str
    why: str
    line: str  # the `wakeup_cost.cost.lines` item it is priced under
    quantity: float
    price: float  # USD per unit

    @property
    def usd_per_million(self) -> float:
        return self.quantity * self.price * MILLION


def _registration() -> list[Charge]:
    return [
        Charge(
            "PUT /wakeup/wake",
            "§4: the API is an API Gateway HTTP API",
            "API Gateway requests",
            1,
            cost.PRICE_API_REQUEST,
        ),
        Charge(
            "wake function invocation",
            "§4: a route runs a function",
            "Lambda invocations",
            1,
            cost.PRICE_LAMBDA_REQUEST,
        ),
        Charge("token lookup", "§4: one consistent read by key", "DynamoDB reads", 1, cost.PRICE_READ_UNIT),
        Charge("registration write", "§4: the table is the truth", "DynamoDB writes", 1, cost.PRICE_WRITE_UNIT),
        Charge(
            "its PendingWakes entry",
            "§4: a sparse index over pending wakes for the sweeper",
            "DynamoDB writes",
            1,
            cost.PRICE_WRITE_UNIT,
        ),
    ]


def _delivery() -> list[Charge]:
    return [
        Charge(
            "SQS message of the last approach",
            "§4: the caller waits out the seconds through an SQS delay",
            "SQS requests",
            1,
            cost.PRICE_SQS_REQUEST,
        ),
        Charge(
            "its receive and delete", "SQS: at most 10 messages a receive", "SQS requests", 0.2, cost.PRICE_SQS_REQUEST
        ),
        Charge(
            "claim",
            "§3: one call in flight (a conditional write with a lease)",
            "DynamoDB writes",
            1,
            cost.PRICE_WRITE_UNIT,
        ),
        Charge("outcome", "§3: outcome recorded for the registration", "DynamoDB writes", 1, cost.PRICE_WRITE_UNIT),
        Charge(
            "the entry's removal", "§4: the wake leaves the pending index", "DynamoDB writes", 1, cost.PRICE_WRITE_UNIT
        ),
        Charge(
            HISTORY_ITEM,
            "§3: every call kept 7 days (here a DynamoDB item; DESIGN.md does not say where)",
            "Attempt history (DynamoDB writes)",
            1,
            cost.PRICE_WRITE_UNIT,
        ),
    ]


def _schedule() -> list[Charge]:
    return [
        Charge(
            "Scheduler invocation",
            "§4: one one-time schedule per far wake",
            "Scheduler invocations",
            1,
            cost.PRICE_SCHEDULER_INVOCATION,
        ),
        Charge(
            "caller invocation by the schedule",
            "§4: the schedule's target is the caller",
            "Lambda invocations",
            1,
            cost.PRICE_LAMBDA_REQUEST,
        ),
    ]


def charges(path: str) -> list[Charge]:
    """What a `near` (SQS-armed) or `far` (Scheduler-armed) wake cannot avoid."""
    if path == "near":
        return _registration() + _delivery()
    if path == "far":
        return _registration() + _schedule() + _delivery()
    raise ValueError(f"no such path: {path}")


def usd_per_million(path: str, history_item: bool = True) -> float:
    return sum(c.usd_per_million for c in charges(path) if history_item or c.item != HISTORY_ITEM)


def by_line(path: str) -> dict[str, float]:
    """The floor's quantities per `wakeup_cost.cost.lines` item, to compare with what was metered."""
    totals: dict[str, float] = {}
    for charge in charges(path):
        totals[charge.line] = totals.get(charge.line, 0.0) + charge.quantity
    return totals


def report() -> str:
    rows: list[list[object]] = []
    near, far = charges("near"), charges("far")
    for charge in far:
        in_near = any(c.item == charge.item for c in near)
        rows.append(
            [
                charge.item,
                charge.why,
                f"${charge.usd_per_million:.3f}" if in_near else "",
                f"${charge.usd_per_million:.3f}",
            ]
        )
    for label, history_item in (("**least per million wakes**", True), ("without the history's item", False)):
        near_usd, far_usd = usd_per_million("near", history_item), usd_per_million("far", history_item)
        bold = "**" if history_item else ""
        rows.append([label, "", f"{bold}${near_usd:.3f}{bold}", f"{bold}${far_usd:.3f}{bold}"])
    return table(["charge", "why (DESIGN.md)", "near", "far"], rows)


if __name__ == "__main__":
    print(report())
    sys.exit(0)
