"""Reading `template.yaml` the way CloudFormation does, for the local stack and the simulator.

`load_template` parses the YAML with a loader that knows CloudFormation's short tags (`!Ref`,
`!GetAtt`, `!Sub` ...) and turns each into its long form (`{"Ref": ...}`, `{"Fn::GetAtt": [...]}`).
`Resolver` then evaluates intrinsic functions against one local stack: parameters take their
defaults, pseudo parameters the local stack's values, and each resource a physical name made as
CloudFormation makes them (`<stack>-<LogicalId>-<RANDOM>`) unless the template names it.
"""

from __future__ import annotations

import base64
import functools
import pickle
import random
import re
import string
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

ACCOUNT_ID = "123456789012"
PARTITION = "aws"

SERVERLESS_FUNCTION = "AWS::Serverless::Function"
DYNAMODB_TABLE = "AWS::DynamoDB::Table"
SQS_QUEUE = "AWS::SQS::Queue"
SCHEDULE_GROUP = "AWS::Scheduler::ScheduleGroup"
SECRET = "AWS::SecretsManager::Secret"


class TemplateError(Exception):
    """Raised when the template cannot be read or asks for something the local stack cannot do."""


class _NoValue:
    """`AWS::NoValue`: the property or list item it stands for is removed."""

    def __repr__(self) -> str:
        return "NO_VALUE"


NO_VALUE: Any = _NoValue()


# --- loading -------------------------------------------------------------------------------------


# libyaml's parser where PyYAML has it (its wheels do): it parses in C what the pure-Python one
# parses in Python, and the tests deploy the template over a hundred times a run. Both build the
# document with the same safe constructors (`SafeConstructor`), so it is the same.
try:
    from yaml import CSafeLoader as _SafeLoader
except ImportError:  # pragma: no cover - a PyYAML built without libyaml
    from yaml import SafeLoader as _SafeLoader  # type: ignore[assignment]


class CloudFormationLoader(_SafeLoader):
    """A safe YAML loader that knows CloudFormation's short-form tags."""


# YAML 1.1 would read `AWSTemplateFormatVersion: 2010-09-09` as a date; CloudFormation reads a string.
CloudFormationLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def _node_value(loader: CloudFormationLoader, node: yaml.Node) -> Any:
    if isinstance(node, yaml.ScalarNode):
        return loader.construct_scalar(node)
    if isinstance(node, yaml.SequenceNode):
        return loader.construct_sequence(node, deep=True)
    if isinstance(node, yaml.MappingNode):
        return loader.construct_mapping(node, deep=True)
    raise TemplateError(f"unexpected YAML node {node!r}")  # pragma: no cover - every node is one of them


def _long_form(key: str) -> Callable[[CloudFormationLoader, yaml.Node], dict[str, Any]]:
    def construct(loader: CloudFormationLoader, node: yaml.Node) -> dict[str, Any]:
        return {key: _node_value(loader, node)}

    return construct


def _get_att(loader: CloudFormationLoader, node: yaml.Node) -> dict[str, Any]:
    value = _node_value(loader, node)
    if isinstance(value, str):
        # `!GetAtt Resource.Attribute`; an attribute may itself hold dots (`Endpoint.Address`).
        resource, dot, attribute = value.partition(".")
        if not dot:
            raise TemplateError(f"!GetAtt {value!r} needs the form Resource.Attribute")
        return {"Fn::GetAtt": [resource, attribute]}
    return {"Fn::GetAtt": value}


_FUNCTION_TAGS = (
    "Sub",
    "Join",
    "If",
    "Select",
    "Split",
    "Equals",
    "Not",
    "And",
    "Or",
    "FindInMap",
    "Base64",
    "ImportValue",
    "GetAZs",
    "Cidr",
    "Length",
    "ToJsonString",
    "Transform",
)

CloudFormationLoader.add_constructor("!Ref", _long_form("Ref"))
CloudFormationLoader.add_constructor("!Condition", _long_form("Condition"))
CloudFormationLoader.add_constructor("!GetAtt", _get_att)
for _name in _FUNCTION_TAGS:
    CloudFormationLoader.add_constructor(f"!{_name}", _long_form(f"Fn::{_name}"))


def parse_template(text: str) -> dict[str, Any]:
    """The template's document, short tags in their long form: a copy of its own for each caller."""
    document: dict[str, Any] = pickle.loads(_parsed(text))  # noqa: S301 - pickled here, from a parsed document
    return document


# The tests deploy template.yaml over a hundred times a run, most in a few processes: unpickling the
# first parse's document is much cheaper than parsing the text again (docs/benchmark.md).
@functools.lru_cache(maxsize=16)
def _parsed(text: str) -> bytes:
    try:
        document = yaml.load(text, Loader=CloudFormationLoader)  # noqa: S506 - safe constructors only
    except yaml.YAMLError as exc:
        raise TemplateError(f"the template is not valid YAML: {exc}") from exc
    if not isinstance(document, dict):
        raise TemplateError("the template is not a mapping")
    return pickle.dumps(document)


@dataclass(frozen=True)
class Template:
    """A parsed template and the folder its relative paths (`CodeUri`) start from."""

    document: dict[str, Any]
    base_dir: Path

    @property
    def resources(self) -> dict[str, dict[str, Any]]:
        resources = self.document.get("Resources")
        if not isinstance(resources, dict):
            raise TemplateError("the template has no Resources")
        return resources

    @property
    def parameters(self) -> dict[str, dict[str, Any]]:
        return dict(self.document.get("Parameters") or {})

    @property
    def conditions(self) -> dict[str, Any]:
        return dict(self.document.get("Conditions") or {})

    @property
    def mappings(self) -> dict[str, Any]:
        return dict(self.document.get("Mappings") or {})

    @property
    def function_globals(self) -> dict[str, Any]:
        return dict((self.document.get("Globals") or {}).get("Function") or {})

    def function_properties(self, logical_id: str) -> dict[str, Any]:
        """A serverless function's properties with `Globals.Function` merged in, as SAM does."""
        return with_globals(self.function_globals, self.resources[logical_id].get("Properties") or {})

    def of_type(self, resource_type: str) -> Iterator[tuple[str, dict[str, Any]]]:
        """(logical id, definition) of each resource of that type, in template order."""
        for logical_id, definition in self.resources.items():
            if definition.get("Type") == resource_type:
                yield logical_id, definition


def with_globals(globals_: Mapping[str, Any], own: Mapping[str, Any]) -> dict[str, Any]:
    """SAM's merge: maps merge (the function's keys win), lists add up, other values are replaced."""
    merged: dict[str, Any] = dict(globals_)
    for key, value in own.items():
        current = merged.get(key)
        if isinstance(current, dict) and isinstance(value, dict):
            merged[key] = with_globals(current, value)
        elif isinstance(current, list) and isinstance(value, list):
            merged[key] = current + value
        else:
            merged[key] = value
    return merged


def load_template(path: str | Path) -> Template:
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise TemplateError(f"cannot read the template {path}: {exc.strerror}") from exc
    return Template(parse_template(text), path.resolve().parent)


# --- resolving -----------------------------------------------------------------------------------

# The longest physical name each service accepts, for the names made up here.
_NAME_LIMITS = {
    SQS_QUEUE: 80,
    SERVERLESS_FUNCTION: 64,
    "AWS::Lambda::Function": 64,
    SCHEDULE_GROUP: 64,
    "AWS::IAM::Role": 64,
    DYNAMODB_TABLE: 255,
    SECRET: 512,
}
# The property that names a resource when the template gives its name.
_NAME_PROPERTIES = {
    DYNAMODB_TABLE: "TableName",
    SQS_QUEUE: "QueueName",
    SCHEDULE_GROUP: "Name",
    SERVERLESS_FUNCTION: "FunctionName",
    "AWS::Lambda::Function": "FunctionName",
    "AWS::IAM::Role": "RoleName",
    "AWS::Logs::LogGroup": "LogGroupName",
    "AWS::SNS::Topic": "TopicName",
    "AWS::Scheduler::Schedule": "Name",
    SECRET: "Name",
}
_SUB_VARIABLE = re.compile(r"\$\{([^}]*)\}")


@dataclass
class Resolver:
    """Evaluates intrinsic functions for one local stack of a template."""

    template: Template
    stack_name: str
    region: str = "us-east-1"
    account_id: str = ACCOUNT_ID
    # Where the local AWS endpoint serves; queue URLs are made on it, as SQS makes them.
    endpoint_url: str | None = None
    parameter_overrides: Mapping[str, str] = field(default_factory=dict)
    rng: random.Random = field(default_factory=random.Random)
    _physical_names: dict[str, str] = field(default_factory=dict, init=False)
    _refs: dict[str, Any] = field(default_factory=dict, init=False)
    _conditions: dict[str, bool] = field(default_factory=dict, init=False)

    # --- the stack's names -----------------------------------------------------------------------

    def resource(self, logical_id: str) -> dict[str, Any]:
        try:
            return self.template.resources[logical_id]
        except KeyError:
            raise TemplateError(f"the template has no resource {logical_id!r}") from None

    def resource_type(self, logical_id: str) -> str:
        return str(self.resource(logical_id).get("Type", ""))

    def is_created(self, logical_id: str) -> bool:
        """Whether the resource exists in this stack (its `Condition`, if any, holds)."""
        condition = self.resource(logical_id).get("Condition")
        return condition is None or self.condition(str(condition))

    def physical_name(self, logical_id: str) -> str:
        """The resource's name: the one the template gives, or one made as CloudFormation does."""
        if logical_id not in self._physical_names:
            definition = self.resource(logical_id)
            resource_type = str(definition.get("Type", ""))
            properties = definition.get("Properties") or {}
            name_property = _NAME_PROPERTIES.get(resource_type)
            given = properties.get(name_property) if name_property else None
            if given is not None:
                name = str(self.resolve(given))
            else:
                name = self._made_up_name(logical_id, _NAME_LIMITS.get(resource_type, 128))
                if resource_type == SQS_QUEUE and _is_true(properties.get("FifoQueue")):
                    name = name[: 80 - len(".fifo")] + ".fifo"
            self._physical_names[logical_id] = name
        return self._physical_names[logical_id]

    def _made_up_name(self, logical_id: str, limit: int) -> str:
        suffix = "".join(self.rng.choices(string.ascii_uppercase + string.digits, k=12))
        room = limit - len(suffix) - 2
        stack = self.stack_name[: max(room // 2, room - len(logical_id))]
        logical = logical_id[: room - len(stack)]
        return f"{stack}-{logical}-{suffix}"

    def set_ref(self, logical_id: str, value: Any) -> None:
        """Records what `Ref` returns for a resource once it exists (a queue's URL as SQS gave it)."""
        self._refs[logical_id] = value

    def arn(self, logical_id: str) -> str:
        resource_type = self.resource_type(logical_id)
        name = self.physical_name(logical_id)
        prefix = f"arn:{PARTITION}"
        if resource_type == DYNAMODB_TABLE:
            return f"{prefix}:dynamodb:{self.region}:{self.account_id}:table/{name}"
        if resource_type == SQS_QUEUE:
            return f"{prefix}:sqs:{self.region}:{self.account_id}:{name}"
        if resource_type in (SERVERLESS_FUNCTION, "AWS::Lambda::Function"):
            return function_arn(name, self.region, self.account_id)
        if resource_type == SCHEDULE_GROUP:
            return f"{prefix}:scheduler:{self.region}:{self.account_id}:schedule-group/{name}"
        if resource_type == "AWS::IAM::Role":
            return f"{prefix}:iam::{self.account_id}:role/{name}"
        if resource_type == "AWS::Logs::LogGroup":
            return f"{prefix}:logs:{self.region}:{self.account_id}:log-group:{name}:*"
        if resource_type == "AWS::SNS::Topic":
            return f"{prefix}:sns:{self.region}:{self.account_id}:{name}"
        # Any other type: an ARN of the usual shape, enough for a setting that only passes it on.
        service, _, kind = resource_type.removeprefix("AWS::").partition("::")
        return f"{prefix}:{service.lower()}:{self.region}:{self.account_id}:{kind.lower()}/{name}"

    def queue_url(self, logical_id: str) -> str:
        if logical_id in self._refs:
            return str(self._refs[logical_id])
        base = self.endpoint_url or f"https://sqs.{self.region}.amazonaws.com"
        return f"{base.rstrip('/')}/{self.account_id}/{self.physical_name(logical_id)}"

    # --- intrinsic functions ---------------------------------------------------------------------

    def resolve(self, value: Any) -> Any:
        """`value` with every intrinsic function evaluated; `AWS::NoValue` items removed."""
        if isinstance(value, list):
            items = (self.resolve(item) for item in value)
            return [item for item in items if item is not NO_VALUE]
        if not isinstance(value, dict):
            return value
        if len(value) == 1:
            ((key, argument),) = value.items()
            if key == "Ref":
                return self.ref(str(argument))
            if key == "Condition":
                return self.condition(str(argument))
            if key.startswith("Fn::"):
                return self._function(key, argument)
        resolved = {key: self.resolve(item) for key, item in value.items()}
        return {key: item for key, item in resolved.items() if item is not NO_VALUE}

    def ref(self, name: str) -> Any:
        pseudo = _pseudo_parameter(name, self.stack_name, self.region, self.account_id)
        if pseudo is not None:
            return pseudo
        parameters = self.template.parameters
        if name in parameters:
            return _parameter(name, parameters[name], self.parameter_overrides)
        if name in self._generated_mappings():
            # SAM makes an SQS event's mapping `<Function><Event>`, whose Ref is its UUID: the
            # local stack records it once the mapping exists in moto (wakeup_local.event_sources.mappings).
            return self._refs.get(name, "")
        resource_type = self.resource_type(name)
        if name in self._refs:
            return self._refs[name]
        if resource_type == SQS_QUEUE:
            return self.queue_url(name)
        if resource_type in ("AWS::SNS::Topic", "AWS::Serverless::LayerVersion", "AWS::Lambda::LayerVersion"):
            return self.arn(name)
        # Tables, schedule groups, functions, roles, log groups ...: `Ref` is the name.
        return self.physical_name(name)

    def _generated_mappings(self) -> set[str]:
        """The logical ids of the event source mappings SAM generates for functions' SQS events."""
        return {
            f"{logical_id}{event_id}"
            for logical_id, function in self.template.of_type(SERVERLESS_FUNCTION)
            for event_id, event in ((function.get("Properties") or {}).get("Events") or {}).items()
            if event.get("Type") == "SQS"
        }

    def get_att(self, logical_id: str, attribute: str) -> Any:
        resource_type = self.resource_type(logical_id)
        if attribute == "Arn":
            return self.arn(logical_id)
        if resource_type == SQS_QUEUE and attribute == "QueueUrl":
            return self.queue_url(logical_id)
        if resource_type == SQS_QUEUE and attribute == "QueueName":
            return self.physical_name(logical_id)
        if attribute == "Name" and resource_type in (SCHEDULE_GROUP, "AWS::Scheduler::Schedule"):
            return self.physical_name(logical_id)
        raise TemplateError(f"the local stack cannot resolve !GetAtt {logical_id}.{attribute}")

    def condition(self, name: str) -> bool:
        if name not in self._conditions:
            conditions = self.template.conditions
            if name not in conditions:
                raise TemplateError(f"the template has no condition {name!r}")
            self._conditions[name] = bool(self.resolve(conditions[name]))
        return self._conditions[name]

    def _function(self, key: str, argument: Any) -> Any:
        handlers: dict[str, Callable[[Any], Any]] = {
            "Fn::GetAtt": self._fn_get_att,
            "Fn::Sub": self._fn_sub,
            "Fn::Join": self._fn_join,
            "Fn::If": self._fn_if,
            "Fn::Select": self._fn_select,
            "Fn::Split": self._fn_split,
            "Fn::Equals": lambda arg: _equals(self.resolve(arg)),
            "Fn::Not": lambda arg: not _only(self.resolve(arg), "Fn::Not"),
            "Fn::And": lambda arg: all(self.resolve(arg)),
            "Fn::Or": lambda arg: any(self.resolve(arg)),
            "Fn::FindInMap": self._fn_find_in_map,
            "Fn::Base64": self._fn_base64,
            "Fn::GetAZs": lambda arg: [f"{self.region}{zone}" for zone in "abc"],
        }
        handler = handlers.get(key)
        if handler is None:
            raise TemplateError(f"the local stack cannot evaluate {key}")
        return handler(argument)

    def _fn_get_att(self, argument: Any) -> Any:
        resolved = self.resolve(argument)
        if not isinstance(resolved, list) or len(resolved) != 2:
            raise TemplateError(f"Fn::GetAtt takes [Resource, Attribute], not {argument!r}")
        return self.get_att(str(resolved[0]), str(resolved[1]))

    def _fn_sub(self, argument: Any) -> str:
        if isinstance(argument, list):
            if len(argument) != 2 or not isinstance(argument[1], dict):
                raise TemplateError("Fn::Sub takes a string or [string, {variables}]")
            text, variables = argument[0], self.resolve(argument[1])
        else:
            text, variables = argument, {}
        if not isinstance(text, str):
            raise TemplateError(f"Fn::Sub needs a string, not {text!r}")

        def substitute(match: re.Match[str]) -> str:
            name = match.group(1)
            if name.startswith("!"):  # `${!Literal}` stands for `${Literal}`
                return "${" + name[1:] + "}"
            if name in variables:
                return str(variables[name])
            if "." in name and not name.startswith("AWS::"):
                resource, _, attribute = name.partition(".")
                return str(self.get_att(resource, attribute))
            return str(self.ref(name))

        return _SUB_VARIABLE.sub(substitute, text)

    def _fn_join(self, argument: Any) -> str:
        if not isinstance(argument, list) or len(argument) != 2:
            raise TemplateError("Fn::Join takes [delimiter, [values]]")
        delimiter, values = argument[0], self.resolve(argument[1])
        if not isinstance(values, list):
            raise TemplateError("Fn::Join needs a list of values")
        return str(delimiter).join(str(item) for item in values)

    def _fn_if(self, argument: Any) -> Any:
        if not isinstance(argument, list) or len(argument) != 3:
            raise TemplateError("Fn::If takes [condition, value if true, value if false]")
        name, if_true, if_false = argument
        return self.resolve(if_true if self.condition(str(name)) else if_false)

    def _fn_select(self, argument: Any) -> Any:
        if not isinstance(argument, list) or len(argument) != 2:
            raise TemplateError("Fn::Select takes [index, [values]]")
        index, values = int(self.resolve(argument[0])), self.resolve(argument[1])
        try:
            return values[index]
        except (IndexError, TypeError):
            raise TemplateError(f"Fn::Select index {index} is out of range") from None

    def _fn_split(self, argument: Any) -> list[str]:
        if not isinstance(argument, list) or len(argument) != 2:
            raise TemplateError("Fn::Split takes [delimiter, string]")
        return str(self.resolve(argument[1])).split(str(argument[0]))

    def _fn_find_in_map(self, argument: Any) -> Any:
        values = self.resolve(argument)
        if not isinstance(values, list) or len(values) not in (3, 4):
            raise TemplateError("Fn::FindInMap takes [map, top-level key, second-level key]")
        try:
            return self.template.mappings[values[0]][values[1]][values[2]]
        except (KeyError, TypeError):
            if len(values) == 4 and isinstance(values[3], dict) and "DefaultValue" in values[3]:
                return values[3]["DefaultValue"]
            raise TemplateError(f"Fn::FindInMap found nothing at {values[:3]}") from None

    def _fn_base64(self, argument: Any) -> str:
        return base64.b64encode(str(self.resolve(argument)).encode()).decode()


def _equals(values: Any) -> bool:
    """`Fn::Equals` of its two resolved values, compared as CloudFormation does, as strings."""
    if not isinstance(values, list) or len(values) != 2:
        raise TemplateError("Fn::Equals takes two values")
    return str(values[0]) == str(values[1])


def _pseudo_parameter(name: str, stack_name: str, region: str, account_id: str) -> Any:
    """A pseudo parameter's value (`AWS::Region` ...) for this stack; None for an unknown name."""
    values: dict[str, Any] = {
        "AWS::StackName": stack_name,
        "AWS::Region": region,
        "AWS::AccountId": account_id,
        "AWS::Partition": PARTITION,
        "AWS::URLSuffix": "amazonaws.com",
        "AWS::NoValue": NO_VALUE,
        "AWS::NotificationARNs": [],
        "AWS::StackId": (f"arn:{PARTITION}:cloudformation:{region}:{account_id}:stack/{stack_name}/local"),
    }
    return values.get(name)


def _parameter(name: str, definition: Mapping[str, Any], overrides: Mapping[str, Any]) -> Any:
    """A template parameter's value: the override, else its default, as CloudFormation types it."""
    if name in overrides:
        value: Any = overrides[name]
    elif "Default" in definition:
        value = definition["Default"]
    else:
        raise TemplateError(f"the parameter {name} has no default: give it a value")
    parameter_type = str(definition.get("Type", "String"))
    if parameter_type == "CommaDelimitedList" or parameter_type.startswith("List<"):
        return value if isinstance(value, list) else [item.strip() for item in str(value).split(",")]
    return str(value) if isinstance(value, int | float) and not isinstance(value, bool) else value


def _only(values: Any, function: str) -> Any:
    if not isinstance(values, list) or len(values) != 1:
        raise TemplateError(f"{function} takes a list of one condition")
    return values[0]


def function_arn(name: str, region: str, account_id: str = ACCOUNT_ID) -> str:
    return f"arn:{PARTITION}:lambda:{region}:{account_id}:function:{name}"


def _is_true(value: Any) -> bool:
    return value is True or str(value).lower() == "true"
