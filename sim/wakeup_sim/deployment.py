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

from wakeup.api.routes import REGISTER_WAKE
from wakeup.settings import Settings
from wakeup_awsfacts.api_gateway import throttle_of_route
from wakeup_awsfacts.dynamodb import TABLE_READ_UNITS_PER_S, TABLE_WRITE_UNITS_PER_S, Index, indexes_of
from wakeup_awsfacts.lambda_logging import logs_system_lines
from wakeup_awsfacts.quotas import (
    ACCOUNT_CONCURRENCY,
    DEFAULT_MEMORY_MB,
    DEFAULT_TIMEOUT_S,
    MB_PER_VCPU,
    SCHEDULER_INVOCATIONS_PER_S,
)
from wakeup_awsfacts.template import Resolver, Template, load_template

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = ROOT / "template.yaml"

# --- what this service's code costs in time, and what Lambda does with it -----------------------
# Each figure names its source: an AWS page, a published measurement (repository or article, its
# date and figures), a measurement here (docs/benchmark.md), or "assumption" (docs/scaling.md runs
# the grid at both ends of an assumption's range where a cell's figure depends on it).
#
# A cold start's init: the caller's modules and clients in a fresh process at one vCPU, 0.43 s here
# (docs/benchmark.md, "whole process"). Published measurements on Lambda agree, at every memory:
# cebert/aws-lambda-performance-benchmarks (November 2025, 125 cold starts a setting, Python 3.13,
# boto3 and a DynamoDB client made at init): about 430 ms on arm64 (the caller's architecture) at
# 128, 1,024 and 1,769 MB alike (x86: 489, 490, 492 ms); powertools-lambda-layer-cdk #10
# (Powertools' load tests, 128 MB, Logger and Parser): median 446 ms on arm64.
INIT_S_AT_ONE_VCPU = 0.43
# On-demand init runs with its CPU unthrottled: its one-vCPU time at any memory (the measurements
# above: 128 MB no slower than 1,769; AWS Serverless Land, "Effectively running Java on
# Serverless": on-demand functions "use a full vCPU (non-throttled)" during init). AWS's developer
# guide does not state it: an assumption with a source, whose other end (False: init at the
# memory's share, 5.9 s at 128 MB) docs/scaling.md runs.
INIT_UNTHROTTLED = True
# The first invocation's lazy setup (botocore's endpoint and credential resolution, the first
# request's connection) on top of the handler's work: about +0.3 s at 128 MB, at the memory's
# share (cebert/aws-lambda-performance-benchmarks, November 2025: the first invocation's duration
# against a warm one's, Python 3.13 at 128 MB; /work/shared/TOOLING.md, "Cold starts by memory").
# At one vCPU: 0.3 s times 128 MB's share (128 / 1,769).
FIRST_CALL_S_AT_128_MB = 0.3
FIRST_CALL_CPU_S: float = FIRST_CALL_S_AT_128_MB * 128 / MB_PER_VCPU
# CPU a request takes in botocore (serialise, sign, parse), at one vCPU (assumption; bench.cpu
# measures the local stack's caller at 1 to 2 ms a request).
AWS_REQUEST_CPU_S = 0.0015
# CPU of one host call (a new connection, TLS handshake included), at one vCPU (assumption).
HOST_CALL_CPU_S = 0.004
# A handler's own overhead per invocation (Powertools decorators, batch bookkeeping; assumption).
INVOCATION_CPU_S = 0.003
# Round trips within a Region (assumptions, typical of published measurements).
DYNAMODB_LATENCY_S = 0.006
SQS_LATENCY_S = 0.012
SCHEDULER_LATENCY_S = 0.030
RECEIVE_LATENCY_S = 0.020
# How long Lambda keeps an idle environment before reclaiming it: AWS names no time (the Shutdown
# phase of "Understanding the Lambda execution environment lifecycle"): an assumption, run at
# both ends of the range published observations give: Yan Cui, "Finding coldstarts: how long does
# AWS Lambda keep your idle functions around?" (theburningmonk.com, June 2017): no longer after 5
# minutes, some kept 30 minutes, generally reclaimed after 45 to 60. A grid's "idle" cells start
# with every environment reclaimed.
RECLAIM_IDLE_S = 300.0
RECLAIM_IDLE_RANGE_S = (300.0, 3600.0)
# How long an UpdateFunctionConfiguration takes to apply (LastUpdateStatus InProgress, "Lambda
# function states"): AWS names no time; seconds in practice (assumption, range 2 to 60 s).
FUNCTION_UPDATE_S = 10.0
FUNCTION_UPDATE_RANGE_S = (2.0, 60.0)


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
    wake_route = throttle_of_route(template, resolver, REGISTER_WAKE.key)
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
        api_rate=wake_route.rate_per_s,
        api_burst=float(wake_route.burst),
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
