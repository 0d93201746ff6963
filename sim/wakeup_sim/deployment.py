"""The deployment the simulation runs: template.yaml's settings, and AWS's quotas with their sources.

Every figure the template sets (memory, batch size and window, the event source's scaling, the
API's throttling, the schedule lead, the table's indexes ...) is read from template.yaml, so the
simulation runs what `sam deploy` would deploy; a scenario may override any of them to try a lever.
"""

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from wakeup.settings import Settings
from wakeup_local.template import Resolver, Template, load_template
from wakeup_sim.capacity import Index, indexes_of

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = ROOT / "template.yaml"

# --- AWS's documented quotas and behaviours ------------------------------------------------------
# "Lambda quotas": 1,000 concurrent executions per account and Region by default.
ACCOUNT_CONCURRENCY = 1000
# "Lambda scaling behavior": each function gains at most 1,000 execution environments every 10 s.
SCALING_ENVIRONMENTS_PER_S = 100.0
SCALING_BURST = 1000
# "Configure Lambda function memory": CPU in proportion to memory, one vCPU at 1,769 MB.
MB_PER_VCPU = 1769
# "Configuring scaling behavior for SQS event source mappings" (services-sqs-scaling, the edition
# with provisioned mode): five concurrent batches at first, up to 300 more per minute while messages
# are available, at most 1,250, and no more than the account's concurrency (1,000 by default).
ESM_INITIAL_CONCURRENCY = 5
ESM_SCALE_UP_PER_S = 300 / 60
ESM_MAX_CONCURRENCY = 1250
# Provisioned mode (the same page): "quickly adding up to 1,000 concurrency per minute"; an event
# poller runs up to 10 concurrent invocations.
PROVISIONED_SCALE_UP_PER_S = 1000 / 60
INVOCATIONS_PER_POLLER = 10
# "How Lambda handles errors and retries with asynchronous invocation": a function error is retried
# twice, one minute then two minutes later; a throttled event is retried from 1 s, doubling to 5 min.
ASYNC_ERROR_RETRY_DELAYS_S = (60.0, 120.0)
ASYNC_THROTTLE_FIRST_RETRY_S = 1.0
ASYNC_THROTTLE_MAX_RETRY_S = 300.0
# "Quotas for Amazon EventBridge Scheduler": invocations throttle limit 1,000 per second,
# CreateSchedule 5,000 per second (us-east-1). A one-time schedule fires within its minute.
SCHEDULER_INVOCATIONS_PER_S = 1000
SCHEDULER_CREATE_PER_S = 5000
SCHEDULER_WINDOW_S = 60.0
# "Amazon API Gateway quotas": 10,000 requests per second per account and Region, burst 5,000.
API_ACCOUNT_RATE = 10000
API_ACCOUNT_BURST = 5000
# "Understanding DynamoDB warm throughput" / "Pre-warming a table for on-demand capacity mode": a new
# on-demand table sustains 4,000 writes and 12,000 reads a second; each partition 1,000 write and
# 3,000 read units a second, an index's partition key value included.
TABLE_WRITE_UNITS_PER_S = 4000
TABLE_READ_UNITS_PER_S = 12000
PARTITION_WRITE_UNITS_PER_S = 1000
# "Use Lambda recursive loop detection": an SQS -> Lambda -> same SQS chain is stopped after about
# 16 invocations unless the function's RecursiveLoop is Allow.
RECURSION_LIMIT = 16

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
    table_write_units_per_s: float = TABLE_WRITE_UNITS_PER_S
    table_read_units_per_s: float = TABLE_READ_UNITS_PER_S
    account_concurrency: int = ACCOUNT_CONCURRENCY
    scheduler_invocations_per_s: float = SCHEDULER_INVOCATIONS_PER_S
    overrides: dict[str, Any] = field(default_factory=dict)

    def but(self, **changes: Any) -> "Deployment":
        """This deployment with some settings changed (a lever tried)."""
        settings_changes = {k: v for k, v in changes.items() if k in Settings.model_fields}
        own = {k: v for k, v in changes.items() if k not in settings_changes}
        settings = self.settings.model_copy(update=settings_changes) if settings_changes else self.settings
        return replace(self, settings=settings, **own)


def _caller_event(function: dict[str, Any]) -> dict[str, Any]:
    for event in function["Properties"].get("Events", {}).values():
        if event.get("Type") == "SQS":
            return dict(event["Properties"])
    raise ValueError("the caller has no SQS event")


def from_template(path: Path = TEMPLATE) -> Deployment:
    template: Template = load_template(path)
    resolver = Resolver(template, stack_name="sim", region="us-east-1")
    defaults = {name: str(p.get("Default", "")) for name, p in template.parameters.items()}
    globals_ = resolver.resolve(template.function_globals)
    caller = template.resources["CallerFunction"]
    caller_properties = resolver.resolve({k: v for k, v in caller["Properties"].items() if k != "Events"})
    wake_properties = resolver.resolve(template.resources["WakeFunction"]["Properties"])
    sweeper_properties = resolver.resolve(template.resources["SweeperFunction"]["Properties"])
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
        caller_memory_mb=int(caller_properties.get("MemorySize", globals_.get("MemorySize", 128))),
        caller_timeout_s=float(caller_properties.get("Timeout", globals_.get("Timeout", 3))),
        wake_memory_mb=int(wake_properties.get("MemorySize", globals_.get("MemorySize", 128))),
        sweeper_memory_mb=int(sweeper_properties.get("MemorySize", globals_.get("MemorySize", 128))),
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
        table_write_units_per_s=float(warm.get("WriteUnitsPerSecond", TABLE_WRITE_UNITS_PER_S)),
        table_read_units_per_s=float(warm.get("ReadUnitsPerSecond", TABLE_READ_UNITS_PER_S)),
    )
