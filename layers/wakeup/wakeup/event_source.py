"""The caller's SQS event source mapping, as the planner reads and changes it (Lambda's API), and
its stack's deploys, which the planner keeps out of the way of (CloudFormation's API).

Only the mapping's provisioned mode is ever changed ("UpdateEventSourceMapping", Lambda API
reference: https://docs.aws.amazon.com/lambda/latest/api/API_UpdateEventSourceMapping.html). The
update is asynchronous: it answers 202 with the mapping `Updating`, and the planner reads the
mapping first and leaves a busy one to its next run. The same page lists what the update may refuse
with: `ResourceInUseException` (the mapping is not in a state that takes an update),
`ResourceConflictException` ("another operation is in progress") and `TooManyRequestsException`
(the account's control-plane rate, "Lambda quotas":
https://docs.aws.amazon.com/lambda/latest/dg/gettingstarted-limits.html, shared with deploys). All
three are "busy": the run ends calmly and the next one tries again.

Turning provisioned mode off: the API reference documents `ProvisionedPollerConfig` with its
ranges (MinimumPollers 2 to 200 for SQS,
https://docs.aws.amazon.com/lambda/latest/api/API_ProvisionedPollerConfig.html) and no "off"
value. An empty `ProvisionedPollerConfig` (no minimum, no maximum) is what infrastructure tools
send to remove it (the Serverless Framework's `provisionedPollers: false`). So the planner reads
the mapping back once it is `Enabled` again (`wakeup.logic.planner`), and says so when pollers
remain rather than sending it again.
"""

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from botocore.exceptions import ClientError

from wakeup import aws

# The states in which the mapping takes an update (GetEventSourceMapping's `State`:
# https://docs.aws.amazon.com/lambda/latest/api/API_GetEventSourceMapping.html); the others
# (Creating, Enabling, Disabling, Updating, Deleting) are a change under way.
READY_STATES = frozenset({"Enabled", "Disabled"})
# What `UpdateEventSourceMapping` (and a read) may refuse with while Lambda is busy with the
# mapping or the account's requests (the API reference's "Errors"): the planner's "busy".
BUSY_ERRORS = frozenset({"ResourceInUseException", "ResourceConflictException", "TooManyRequestsException"})
# CloudFormation's own throttle ("Common Errors", CloudFormation API reference:
# https://docs.aws.amazon.com/AWSCloudFormation/latest/APIReference/CommonErrors.html).
STACK_BUSY_ERRORS = frozenset({"Throttling", "ThrottlingException"})
# A change set awaiting its execution is a deploy under way ("ListChangeSets" lists a stack's
# active change sets; "ChangeSetSummary": `ExecutionStatus` AVAILABLE is one that can be executed,
# UNAVAILABLE one still being created, EXECUTE_IN_PROGRESS one executing:
# https://docs.aws.amazon.com/AWSCloudFormation/latest/APIReference/API_ChangeSetSummary.html).
DEPLOYING_CHANGE_SETS = frozenset({"UNAVAILABLE", "AVAILABLE", "EXECUTE_IN_PROGRESS"})
# A change set created and never executed (an operator who declined it) stops counting as a deploy
# under way after this long, so that one left behind does not stop the planner for good.
CHANGE_SET_PENDING = timedelta(hours=1)


class MappingBusyError(Exception):
    """Raised when Lambda refuses an update or a read for now (`BUSY_ERRORS`)."""


@dataclass(frozen=True)
class MappingState:
    """What the planner needs to know of the mapping."""

    state: str
    pollers: int | None  # provisioned MinimumPollers; None: provisioned mode off

    @property
    def ready(self) -> bool:
        return self.state in READY_STATES


class CallerMapping:
    """The caller's mapping through one Lambda client (given, or made from the environment)."""

    def __init__(self, uuid: str, client: Any = None) -> None:
        self.uuid = uuid
        self.client = client or aws.client("lambda")

    def read(self) -> MappingState:
        try:
            found = self.client.get_event_source_mapping(UUID=self.uuid)
        except ClientError as exc:
            if aws.error_code(exc) in BUSY_ERRORS:
                raise MappingBusyError(self.uuid) from exc
            raise
        config = found.get("ProvisionedPollerConfig") or {}
        minimum = config.get("MinimumPollers")
        return MappingState(state=str(found.get("State", "")), pollers=int(minimum) if minimum else None)

    def set_pollers(self, pollers: int | None, maximum: int) -> None:
        """Provisioned mode with `pollers` ready (up to `maximum`), or off (None)."""
        config: dict[str, int] = {} if pollers is None else {"MinimumPollers": pollers, "MaximumPollers": maximum}
        try:
            self.client.update_event_source_mapping(UUID=self.uuid, ProvisionedPollerConfig=config)
        except ClientError as exc:
            # Two runs at once (a schedule delivers at least once), an update begun since the read
            # (a deploy's), or the account's control-plane rate.
            if aws.error_code(exc) in BUSY_ERRORS:
                raise MappingBusyError(self.uuid) from exc
            raise


class StackDeploys:
    """Whether the planner's own stack is being deployed, through one CloudFormation client.

    A deploy (`sam deploy`) first creates a change set, then executes it: from the change set's
    creation to the stack's `*_COMPLETE` again, the planner sends nothing, so no update of its can
    be what a deploy's own update of the mapping meets ("DescribeStacks", `StackStatus`:
    https://docs.aws.amazon.com/AWSCloudFormation/latest/APIReference/API_Stack.html; every
    `*_IN_PROGRESS` status is an operation under way). Both calls are free (CloudFormation is
    charged only for third-party resource handlers, "AWS CloudFormation pricing").
    """

    def __init__(self, stack_name: str, client: Any = None) -> None:
        self.stack_name = stack_name
        self.client = client or aws.client("cloudformation")

    def in_progress(self, now: datetime) -> bool:
        """True while a deploy is under way or about to be (a change set awaiting execution), and
        while CloudFormation throttles the planner's reads (it cannot tell then)."""
        try:
            stacks = self.client.describe_stacks(StackName=self.stack_name)["Stacks"]
            if any(str(stack.get("StackStatus", "")).endswith("_IN_PROGRESS") for stack in stacks):
                return True
            summaries = self.client.list_change_sets(StackName=self.stack_name).get("Summaries", [])
        except ClientError as exc:
            if aws.error_code(exc) in STACK_BUSY_ERRORS:
                return True
            raise
        return any(
            summary.get("StackName", self.stack_name) == self.stack_name  # this stack's only, whoever lists
            and summary.get("ExecutionStatus") in DEPLOYING_CHANGE_SETS
            and summary.get("Status") != "FAILED"  # one CloudFormation could not make (no changes)
            and now - summary.get("CreationTime", now) < CHANGE_SET_PENDING
            for summary in summaries
        )
