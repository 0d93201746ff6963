"""The caller's SQS event source mapping and its memory, as the planner reads and changes them
(Lambda's API).

Only its provisioned mode is ever changed ("UpdateEventSourceMapping", Lambda API reference:
https://docs.aws.amazon.com/lambda/latest/api/API_UpdateEventSourceMapping.html). The update is
asynchronous: it answers 202 with the mapping `Updating`, and refuses another update until the
mapping is `Enabled` again (ResourceInUseException), so the planner reads the mapping first and
leaves a busy one to its next run.

Turning provisioned mode off: the API reference documents `ProvisionedPollerConfig` with its
ranges (MinimumPollers 2 to 200 for SQS) and no "off" value, and CloudFormation leaves a property
the template no longer sets as it was. An update with an empty `ProvisionedPollerConfig` (no
minimum, no maximum) clears it, which is what infrastructure tools send to remove it (the
Serverless Framework's `provisionedPollers: false`). The planner reads the mapping on every run
and sends it again while the mapping still shows pollers, and docs/operations.md says how to
check it by hand.
"""

from dataclasses import dataclass
from typing import Any

from botocore.exceptions import ClientError

from wakeup import aws

# The states in which the mapping takes an update (GetEventSourceMapping's `State`); the others
# (Creating, Enabling, Disabling, Updating, Deleting) are a change under way.
READY_STATES = frozenset({"Enabled", "Disabled"})


class FunctionBusyError(Exception):
    """Raised when Lambda refuses a function's update because another is still applying
    (ResourceConflictException, "Lambda function states")."""


class MappingBusyError(Exception):
    """Raised when Lambda refuses an update because another is still applying (ResourceInUseException)."""


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
        found = self.client.get_event_source_mapping(UUID=self.uuid)
        config = found.get("ProvisionedPollerConfig") or {}
        minimum = config.get("MinimumPollers")
        return MappingState(state=str(found.get("State", "")), pollers=int(minimum) if minimum else None)

    def set_pollers(self, pollers: int | None, maximum: int) -> None:
        """Provisioned mode with `pollers` ready (up to `maximum`), or off (None)."""
        config: dict[str, int] = {} if pollers is None else {"MinimumPollers": pollers, "MaximumPollers": maximum}
        try:
            self.client.update_event_source_mapping(UUID=self.uuid, ProvisionedPollerConfig=config)
        except ClientError as exc:
            # Two runs at once (a schedule delivers at least once) or an update begun since the read.
            if aws.error_code(exc) == "ResourceInUseException":
                raise MappingBusyError(self.uuid) from exc
            raise


class CallerFunction:
    """The caller function's memory through one Lambda client ("UpdateFunctionConfiguration",
    Lambda API reference: https://docs.aws.amazon.com/lambda/latest/api/API_UpdateFunctionConfiguration.html).
    Only `MemorySize` is sent: every other setting stays as deployed."""

    def __init__(self, name: str, client: Any = None) -> None:
        self.name = name
        self.client = client or aws.client("lambda")

    def read_memory(self) -> int:
        return int(self.client.get_function_configuration(FunctionName=self.name)["MemorySize"])

    def set_memory(self, memory_mb: int) -> None:
        try:
            self.client.update_function_configuration(FunctionName=self.name, MemorySize=memory_mb)
        except ClientError as exc:
            # An update still applying ("Lambda function states": LastUpdateStatus InProgress).
            if aws.error_code(exc) == "ResourceConflictException":
                raise FunctionBusyError(self.name) from exc
            raise
