"""The one Logger, Tracer and Metrics every module uses, and the names of the metrics."""

import logging
import os
from collections.abc import Callable
from enum import StrEnum
from typing import Any, TypeVar

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.shared.functions import resolve_truthy_env_var_choice

Handler = TypeVar("Handler", bound=Callable[..., Any])


class Untraced:
    """Stands in for Powertools' Tracer in a function whose tracing is off (`POWERTOOLS_TRACE_DISABLED`,
    which template.yaml sets unless its `Tracing` is Active). Powertools' Tracer, even disabled,
    imports the X-Ray SDK and makes its recorder at the init (docs/benchmark.md has its share of a
    cold start), and wraps every invocation in a segment that records nothing."""

    @staticmethod
    def capture_lambda_handler(handler: Handler) -> Handler:
        return handler


def _tracer() -> Tracer | Untraced:
    # Powertools' own rule (`Tracer._is_tracer_disabled`): off when the variable says so, and
    # outside Lambda (no `LAMBDA_TASK_ROOT`: the operator's CLI, the tests, the simulator) or in
    # SAM's or Chalice's local emulators, where no X-Ray daemon listens.
    disabled = resolve_truthy_env_var_choice(env=os.getenv("POWERTOOLS_TRACE_DISABLED", "false"))
    emulated = os.getenv("AWS_SAM_LOCAL") or os.getenv("AWS_CHALICE_CLI_MODE")
    return Untraced() if disabled or not os.getenv("LAMBDA_TASK_ROOT") or emulated else Tracer()


logger = Logger()
tracer = _tracer()
metrics = Metrics()

# botocore logs at INFO where it found the credentials and each client's endpoint, a line or two for
# every client a cold start makes; Lambda's runtime sets the root logger to the function's
# application log level (INFO by default), so they would reach CloudWatch Logs, billed. Its
# warnings and errors still do.
logging.getLogger("botocore").setLevel(logging.WARNING)


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
    PLANNER_UPDATE_DELAY = "PlannerUpdateDelay"  # an event source update, sent to Enabled again
    POLLERS_LEFT_AFTER_OFF = "PollersLeftAfterOff"  # provisioned pollers an "off" left in place
