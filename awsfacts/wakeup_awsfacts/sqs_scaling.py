"""How many batches Lambda's SQS event source mapping works at once, and how fast that grows.

From "Configuring scaling behavior for SQS event source mappings" (Lambda developer guide,
services-sqs-scaling, the edition with provisioned mode):

- Standard mode: five batches at once when messages appear, "up to 300 more concurrent invokes per
  minute" while they remain. "The maximum number of invokes that an event source mapping can process
  simultaneously is 1,250", but "when your account's concurrency quota is set to the default value
  of 1,000, an Amazon SQS event source mapping can scale to invoke function instances up to this
  value": the mapping stops at the lower of 1,250 and the account's concurrency. A mapping's
  `ScalingConfig.MaximumConcurrency` (2 to 1,000) caps it as well.
- Provisioned mode (`ProvisionedPollerConfig`, exclusive with `MaximumConcurrency`): dedicated
  event pollers, `MinimumPollers` (default 2) always ready and at most `MaximumPollers` (default
  200), each running up to 10 concurrent invokes, "quickly adding up to 1,000 concurrency per
  minute" (the same page).

The local stack's poller (`wakeup_local.event_sources.sqs_scaling`) and the simulator's event source
(`wakeup_sim.event_source`) both scale by this rule.
"""

from __future__ import annotations

from dataclasses import dataclass

from wakeup_awsfacts.quotas import ACCOUNT_CONCURRENCY

STANDARD_INITIAL = 5
STANDARD_PER_MINUTE = 300
STANDARD_MAXIMUM = 1250
PROVISIONED_INVOKES_PER_POLLER = 10
PROVISIONED_PER_MINUTE = 1000
DEFAULT_MINIMUM_POLLERS = 2
DEFAULT_MAXIMUM_POLLERS = 200
# What CreateEventSourceMapping accepts for an SQS mapping (AWS::Lambda::EventSourceMapping
# ScalingConfig; ProvisionedPollerConfig in the Lambda API reference).
MAXIMUM_CONCURRENCY_RANGE = (2, 1000)
MINIMUM_POLLERS_RANGE = (2, 200)
MAXIMUM_POLLERS_RANGE = (2, 2000)


@dataclass(frozen=True)
class Scaling:
    """`initial` batches at once when messages appear, and the floor it scales back to; up to
    `maximum`, growing by `per_minute` while messages remain."""

    initial: int
    maximum: int
    per_minute: float

    @classmethod
    def standard(
        cls,
        maximum_concurrency: int | None = None,
        function_bound: int | None = None,
        account_concurrency: int = ACCOUNT_CONCURRENCY,
    ) -> Scaling:
        maximum = _lowest(STANDARD_MAXIMUM, account_concurrency, maximum_concurrency, function_bound)
        return cls(min(STANDARD_INITIAL, maximum), maximum, STANDARD_PER_MINUTE)

    @classmethod
    def provisioned(
        cls, minimum_pollers: int | None, maximum_pollers: int | None, function_bound: int | None = None
    ) -> Scaling:
        least = (minimum_pollers or DEFAULT_MINIMUM_POLLERS) * PROVISIONED_INVOKES_PER_POLLER
        maximum = _lowest((maximum_pollers or DEFAULT_MAXIMUM_POLLERS) * PROVISIONED_INVOKES_PER_POLLER, function_bound)
        return cls(min(least, maximum), maximum, PROVISIONED_PER_MINUTE)

    def unbounded(self) -> Scaling:
        """The local developer's setting: everything at once, from the start."""
        return Scaling(self.maximum, self.maximum, self.per_minute)


def _lowest(*limits: int | None) -> int:
    return min(limit for limit in limits if limit is not None)
