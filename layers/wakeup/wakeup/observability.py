"""The one Logger, Tracer and Metrics every module uses, and the names of the metrics."""

from enum import StrEnum

from aws_lambda_powertools import Logger, Metrics, Tracer

logger = Logger()
tracer = Tracer()
metrics = Metrics()


class Metric(StrEnum):
    """What the service counts, in the `Wakeup` namespace (the dashboard and alarms read these)."""

    WAKES_CALLED = "WakesCalled"
    CALLS_FAILED = "CallsFailed"
    CALLS_REFUSED = "CallsRefused"  # failed calls the address policy refused (a part of CallsFailed)
    WAKE_LATENESS = "WakeLateness"
    RETRIES_SCHEDULED = "RetriesScheduled"
    STALE_TRIGGERS_DROPPED = "StaleTriggersDropped"
    OVERDUE_WAKES_REARMED = "OverdueWakesRearmed"
    WAKES_GIVEN_UP = "WakesGivenUp"
    PLANNED_POLLERS = "PlannedPollers"  # the planner's, every run (0: provisioned mode off)
