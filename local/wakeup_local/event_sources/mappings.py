"""Lambda's event source mappings of the template's SQS events, served by the stack's moto.

SAM makes a mapping `<Function><Event>` for each SQS event ("Generated CloudFormation resources",
AWS SAM developer guide), and its `Ref` is the mapping's UUID: the planner gets it
(`WAKEUP_CALLER_MAPPING_UUID`) and changes the mapping through Lambda's API, as on AWS. So the
local stack creates each mapping in moto, with the function record and the role that moto's
`CreateEventSourceMapping` requires (moto runs none of their code: the stack's own environments
do), and records the UUID for `Ref`.

The stack's SQS poller is the mappings' consumer. A watcher reads each mapping every
`WATCH_INTERVAL_S`; once an update has applied (the mapping `Enabled` again after `Updating`,
moto_fixes.py), the poller scales by the mapping's new `ProvisionedPollerConfig` or
`ScalingConfig`. Left out: an update's other fields (batch size, window, `Enabled`) and mappings
created or deleted through the API while the stack runs.
"""

from __future__ import annotations

import io
import json
import logging
import threading
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from wakeup_awsfacts.template import SERVERLESS_FUNCTION, Resolver, Template
from wakeup_local.aws.clients import AwsClients
from wakeup_local.event_sources.sqs_poller import batching_of, scaling_of

log = logging.getLogger(__name__)

# How often the watcher reads each mapping: a change applies within this of its `Enabled` (AWS
# gives no time for an update to apply; the planner assumes minutes). Each read costs CPU in the
# stack's process and in moto's, which an idle stack pays every interval: a change within seconds
# is all a test or the planner needs.
WATCH_INTERVAL_S = 2.0
# The states in which a mapping's configuration is the one Lambda runs (GetEventSourceMapping's
# `State`; the others are a change under way).
SETTLED_STATES = frozenset({"Enabled", "Disabled"})
# What the poller follows of a mapping's configuration.
SCALING_PROPERTIES = ("ProvisionedPollerConfig", "ScalingConfig")
# The mapping properties of a SAM SQS event that CreateEventSourceMapping takes, and the ones of them
# that are numbers (a template parameter resolves to a string).
_MAPPING_PROPERTIES = (
    "BatchSize",
    "MaximumBatchingWindowInSeconds",
    "FunctionResponseTypes",
    "ScalingConfig",
    "ProvisionedPollerConfig",
    "Enabled",
)
_NUMBERS = frozenset(
    {"BatchSize", "MaximumBatchingWindowInSeconds", "MaximumConcurrency", "MinimumPollers", "MaximumPollers"}
)
# The role moto's function records name (moto requires one that exists; nothing assumes it).
ROLE_NAME = "wakeup-local-functions"


@dataclass(frozen=True)
class LocalMapping:
    name: str  # `FunctionLogicalId.EventName`, as the poller names its sources
    uuid: str
    scaling: dict[str, Any]  # its SCALING_PROPERTIES as created


def create_mappings(template: Template, resolver: Resolver, clients: AwsClients) -> list[LocalMapping]:
    """Each SQS event's mapping, created in moto, its UUID recorded as `<Function><Event>`'s `Ref`.

    Raises TemplateError for a mapping Lambda would refuse (sqs_poller's checks), before any is made.
    """
    events = []
    for logical_id, _ in template.of_type(SERVERLESS_FUNCTION):
        if not resolver.is_created(logical_id):
            continue
        properties = template.function_properties(logical_id)
        for event_name, event in (resolver.resolve(properties.get("Events")) or {}).items():
            if event.get("Type") == "SQS":
                events.append((logical_id, properties, event_name, event.get("Properties") or {}))
    if not events:
        return []
    for logical_id, _, event_name, event_properties in events:
        name = f"{logical_id}.{event_name}"
        scaling_of(name, event_properties, function_bound=None)
        batching_of(name, event_properties, fifo=str(event_properties["Queue"]).endswith(".fifo"))
    role = clients.iam.create_role(
        RoleName=ROLE_NAME,
        AssumeRolePolicyDocument=json.dumps(
            {
                "Version": "2012-10-17",
                "Statement": [
                    {"Effect": "Allow", "Principal": {"Service": "lambda.amazonaws.com"}, "Action": "sts:AssumeRole"}
                ],
            }
        ),
    )["Role"]["Arn"]
    made: set[str] = set()
    mappings = []
    for logical_id, properties, event_name, event_properties in events:
        function_name = resolver.physical_name(logical_id)
        if function_name not in made:
            clients.awslambda.create_function(
                FunctionName=function_name,
                Runtime=str(resolver.resolve(properties.get("Runtime", "python3.13"))),
                Role=role,
                Handler=str(resolver.resolve(properties.get("Handler"))),
                Code={"ZipFile": empty_package()},
            )
            made.add(function_name)
        request = _typed({key: event_properties[key] for key in _MAPPING_PROPERTIES if key in event_properties})
        created = clients.awslambda.create_event_source_mapping(
            EventSourceArn=str(event_properties["Queue"]), FunctionName=function_name, **request
        )
        resolver.set_ref(f"{logical_id}{event_name}", created["UUID"])
        mappings.append(LocalMapping(f"{logical_id}.{event_name}", created["UUID"], _scaling(created)))
    return mappings


# The stack's record in moto's CloudFormation: one resource that makes nothing ("AWS::CloudFormation::
# WaitConditionHandle": no properties, no cost), since a stack needs one.
STACK_RECORD = '{"Resources": {"Record": {"Type": "AWS::CloudFormation::WaitConditionHandle"}}}'


def record_stack(stack_name: str, clients: AwsClients) -> None:
    """The stack as CloudFormation knows it on AWS: the planner reads its status and change sets
    (`AWS::StackName`, wakeup.event_source.StackDeploys) and sends nothing while it is deployed."""
    try:
        clients.cloudformation.create_stack(StackName=stack_name, TemplateBody=STACK_RECORD)
    except ClientError as exc:
        # A record of that name already there (a moto that outlived its stack): it serves as well.
        if exc.response.get("Error", {}).get("Code") != "AlreadyExistsException":
            raise


def _typed(value: Any) -> Any:
    """A resolved property as the API takes it: numbers as numbers, `"true"` as a boolean."""
    if isinstance(value, dict):
        return {key: int(item) if key in _NUMBERS else _typed(item) for key, item in value.items()}
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    return value


def _scaling(described: dict[str, Any]) -> dict[str, Any]:
    return {key: described[key] for key in SCALING_PROPERTIES if described.get(key)}


def empty_package() -> bytes:
    package = io.BytesIO()
    with zipfile.ZipFile(package, "w") as archive:
        archive.writestr("README", "The local stack runs this function's code itself.\n")
    return package.getvalue()


# Called with a mapping's name and its new scaling properties, once a change has applied.
OnChange = Callable[[str, dict[str, Any]], object]


class MappingWatcher:
    """Reads the mappings in a thread until stopped, and reports each change once it has applied."""

    def __init__(
        self, mappings: list[LocalMapping], awslambda: Any, on_change: OnChange, interval_s: float = WATCH_INTERVAL_S
    ) -> None:
        self.mappings = mappings
        self._awslambda = awslambda
        self._on_change = on_change
        self._interval_s = interval_s
        self._applied = {mapping.name: mapping.scaling for mapping in mappings}
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if self.mappings:
            self._thread = threading.Thread(target=self._run, name="mapping-watcher", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        self._stopping.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def _run(self) -> None:
        while not self._stopping.wait(self._interval_s):
            for mapping in self.mappings:
                self._read(mapping)

    def _read(self, mapping: LocalMapping) -> None:
        try:
            described = self._awslambda.get_event_source_mapping(UUID=mapping.uuid)
        except (BotoCoreError, ClientError):
            log.exception("reading the event source mapping %s failed", mapping.name)
            return
        if described.get("State") not in SETTLED_STATES:
            return
        scaling = _scaling(described)
        if scaling == self._applied[mapping.name]:
            return
        self._applied[mapping.name] = scaling
        try:
            self._on_change(mapping.name, scaling)
        except Exception:
            # Lambda keeps polling with what it has: so does the poller.
            log.exception("the event source mapping %s changed to what cannot apply: %s", mapping.name, scaling)
