"""The deployment the simulation runs: template.yaml's settings, and the quotas in force.

Every figure the template sets (memory, batch size and window, the event source's scaling, the
API's throttling, the schedule lead, the table's indexes ...) is read from template.yaml, so the
simulation runs what `sam deploy` would deploy; a scenario may override any of them to try a lever.
AWS's quotas are `wakeup_awsfacts`'s; what this service's own code costs in time is here.
"""

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from wakeup.settings import Settings
from wakeup_awsfacts.dynamodb import TABLE_READ_UNITS_PER_S, TABLE_WRITE_UNITS_PER_S, Index, indexes_of
from wakeup_awsfacts.lambda_logging import logs_system_lines
from wakeup_awsfacts.quotas import (
    ACCOUNT_CONCURRENCY,
    DEFAULT_MEMORY_MB,
    DEFAULT_TIMEOUT_S,
    SCHEDULER_INVOCATIONS_PER_S,
)
from wakeup_awsfacts.template import Resolver, Template, load_template

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = ROOT / "template.yaml"

# --- what this service's code costs in time (measured here, see docs/benchmark.md) --------------
# Init of the caller's module and clients in a fresh process at one vCPU (bench "whole process").
INIT_S_AT_ONE_VCPU = 0.43
# CPU a request takes in botocore (serialise, sign, parse), at one vCPU (an assumption).
AWS_REQUEST_CPU_S = 0.0015
# CPU of one host call (a new connection, TLS handshake included), at one vCPU (an assumption).
HOST_CALL_CPU_S = 0.004
# A handler's own overhead per invocation (Powertools decorators, batch bookkeeping).
INVOCATION_CPU_S = 0.003
# Round trips within a Region (assumptions, typical of published measurements).
DYNAMODB_LATENCY_S = 0.006
SQS_LATENCY_S = 0.012
SCHEDULER_LATENCY_S = 0.030
RECEIVE_LATENCY_S = 0.020


@dataclass(frozen=True)
class Deployment:
    """What one simulated stack is: the template's settings, and the quotas in force."""

    settings: Settings
    indexes: list[Index]
    caller_memory_mb: int
    caller_timeout_s: float
    wake_memory_mb: int
    sweeper_memory_mb: int
    batch_size: int
    batching_window_s: float
    maximum_concurrency: int | None
    minimum_pollers: int | None
    maximum_pollers: int | None
    visibility_timeout_s: float
    max_receive_count: int
    recursive_loop_allowed: bool
    api_rate: float
    api_burst: float
    # The caller's memory while the planner has a burst's capacity raised (CallerBurstMemorySize).
    caller_burst_memory_mb: int | None = None
    table_write_units_per_s: float = TABLE_WRITE_UNITS_PER_S
    table_read_units_per_s: float = TABLE_READ_UNITS_PER_S
    account_concurrency: int = ACCOUNT_CONCURRENCY
    scheduler_invocations_per_s: float = SCHEDULER_INVOCATIONS_PER_S
    overrides: dict[str, Any] = field(default_factory=dict)
    # The functions whose START, END and REPORT Lambda does not log (LoggingConfig's SystemLogLevel).
    quiet_functions: frozenset[str] = frozenset()

    def but(self, **changes: Any) -> "Deployment":
        """This deployment with some settings changed (a lever tried)."""
        settings_changes = {k: v for k, v in changes.items() if k in Settings.model_fields}
        own = {k: v for k, v in changes.items() if k not in settings_changes}
        settings = self.settings.model_copy(update=settings_changes) if settings_changes else self.settings
        return replace(self, settings=settings, **own)


def _caller_event(properties: dict[str, Any]) -> dict[str, Any]:
    for event in properties.get("Events", {}).values():
        if event.get("Type") == "SQS":
            return dict(event["Properties"])
    raise ValueError("the caller has no SQS event")


def from_template(path: Path = TEMPLATE, parameters: Mapping[str, str] | None = None) -> Deployment:
    """The deployment `sam deploy` makes of the template, with `parameters` overriding defaults."""
    template: Template = load_template(path)
    resolver = Resolver(template, stack_name="sim", region="us-east-1", parameter_overrides=dict(parameters or {}))
    defaults = {name: str(p.get("Default", "")) for name, p in template.parameters.items()} | dict(parameters or {})
    caller = template.function_properties("CallerFunction")
    caller_properties = resolver.resolve({k: v for k, v in caller.items() if k != "Events"})
    wake_properties = resolver.resolve(template.function_properties("WakeFunction"))
    sweeper_properties = resolver.resolve(template.function_properties("SweeperFunction"))
    event = resolver.resolve(_caller_event(caller))
    queue = resolver.resolve(template.resources["CallerQueue"]["Properties"])
    table = resolver.resolve(template.resources["Table"]["Properties"])
    warm = table.get("WarmThroughput", {})
    scaling = event.get("ScalingConfig", {})
    pollers = event.get("ProvisionedPollerConfig", {})
    settings = Settings.model_validate(
        {
            "WAKEUP_TABLE": "sim",
            "WAKEUP_QUEUE_URL": "https://sqs.sim/caller",
            "WAKEUP_SCHEDULE_GROUP": "sim",
            "WAKEUP_CALLER_ARN": "arn:aws:lambda:us-east-1:123456789012:function:sim-caller",
            "WAKEUP_SQS_HORIZON_S": defaults["SqsHorizonSeconds"],
            "WAKEUP_SCHEDULE_LEAD_S": defaults["ScheduleLeadSeconds"],
            "WAKEUP_MAX_WAKE_AGE_S": defaults["MaxWakeAgeSeconds"],
        }
    )
    return Deployment(
        settings=settings,
        indexes=indexes_of(template, resolver),
        caller_memory_mb=int(caller_properties.get("MemorySize", DEFAULT_MEMORY_MB)),
        caller_timeout_s=float(caller_properties.get("Timeout", DEFAULT_TIMEOUT_S)),
        caller_burst_memory_mb=int(defaults["CallerBurstMemorySize"]) if "CallerBurstMemorySize" in defaults else None,
        wake_memory_mb=int(wake_properties.get("MemorySize", DEFAULT_MEMORY_MB)),
        sweeper_memory_mb=int(sweeper_properties.get("MemorySize", DEFAULT_MEMORY_MB)),
        batch_size=int(event.get("BatchSize", 10)),
        batching_window_s=float(event.get("MaximumBatchingWindowInSeconds", 0)),
        maximum_concurrency=int(scaling["MaximumConcurrency"]) if "MaximumConcurrency" in scaling else None,
        minimum_pollers=int(pollers["MinimumPollers"]) if "MinimumPollers" in pollers else None,
        maximum_pollers=int(pollers["MaximumPollers"]) if "MaximumPollers" in pollers else None,
        visibility_timeout_s=float(queue.get("VisibilityTimeout", 30)),
        max_receive_count=int(queue.get("RedrivePolicy", {}).get("maxReceiveCount", 5)),
        recursive_loop_allowed=caller_properties.get("RecursiveLoop", "Terminate") == "Allow",
        api_rate=float(defaults["ApiThrottlingRateLimit"]),
        api_burst=float(defaults["ApiThrottlingBurstLimit"]),
        quiet_functions=frozenset(
            name
            for name, properties in (
                ("CallerFunction", caller_properties),
                ("WakeFunction", wake_properties),
                ("SweeperFunction", sweeper_properties),
            )
            if not logs_system_lines(properties)
        ),
        table_write_units_per_s=float(warm.get("WriteUnitsPerSecond", TABLE_WRITE_UNITS_PER_S)),
        table_read_units_per_s=float(warm.get("ReadUnitsPerSecond", TABLE_READ_UNITS_PER_S)),
    )
