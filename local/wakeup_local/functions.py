"""The template's functions, imported and invoked in this process as Lambda would run them.

Each `AWS::Serverless::Function` becomes a `LocalFunction`: its `CodeUri` folder (and its layers')
on `sys.path`, its `Handler` imported as `module.function`, its environment made of
`Globals.Function` and its own variables, resolved. The environment is in `os.environ` before its
module is imported, since handlers read their settings at cold start.

All functions share one process here, hence one `os.environ`: it holds every function's variables
at once (where two functions disagree on a variable, each sees its own while its module is
imported; afterwards the first one's value stays).
"""

from __future__ import annotations

import decimal
import importlib
import json
import logging
import os
import re
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from wakeup_local.template import (
    SERVERLESS_FUNCTION,
    Resolver,
    Template,
    TemplateError,
    function_arn,
)

log = logging.getLogger(__name__)

# Lambda's defaults when neither the function nor Globals say.
DEFAULT_MEMORY_MB = 128
DEFAULT_TIMEOUT_S = 3.0

# Settings the person starting the local stack may set in its environment to override the template
# (`WAKEUP_SQS_HORIZON_S=5 make run`). Variables of the local stack itself are not passed on.
OVERRIDABLE_PREFIX = "WAKEUP_"
LOCAL_ONLY_PREFIX = "WAKEUP_LOCAL_"

Handler = Callable[[Any, Any], Any]

# Importing sets os.environ for the module being imported: one import at a time.
_import_lock = threading.Lock()


class FunctionError(Exception):
    """Raised when an invocation fails as Lambda would report it (timeout, unserialisable result)."""


@dataclass(frozen=True)
class FunctionSpec:
    """What the template says about one function, resolved for the local stack."""

    logical_id: str
    name: str
    arn: str
    code_dir: Path
    handler: str
    memory_mb: int
    timeout_s: float
    environment: dict[str, str]
    events: dict[str, dict[str, Any]]
    layer_dirs: tuple[Path, ...] = ()


@dataclass
class LambdaContext:
    """The context object Lambda's Python runtime hands a handler."""

    function_name: str
    invoked_function_arn: str
    memory_limit_in_mb: int
    aws_request_id: str
    deadline_ms: int
    function_version: str = "$LATEST"
    log_group_name: str = ""
    log_stream_name: str = "local"
    identity: Any = None
    client_context: Any = None

    def get_remaining_time_in_millis(self) -> int:
        return max(0, self.deadline_ms - int(time.time() * 1000))


@dataclass
class LocalFunction:
    spec: FunctionSpec
    handler: Handler
    region: str = "us-east-1"
    _cold: bool = field(default=True, init=False)

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def arn(self) -> str:
        return self.spec.arn

    def context(self) -> LambdaContext:
        return LambdaContext(
            function_name=self.spec.name,
            invoked_function_arn=self.spec.arn,
            memory_limit_in_mb=self.spec.memory_mb,
            aws_request_id=str(uuid.uuid4()),
            deadline_ms=int(time.time() * 1000 + self.spec.timeout_s * 1000),
            log_group_name=f"/aws/lambda/{self.spec.name}",
        )

    def invoke(self, event: Any) -> Any:
        """Runs the handler on (a JSON copy of) `event` and returns its result, JSON round-tripped.

        The handler's own exception propagates. A handler that runs past its timeout has its result
        discarded with `FunctionError`, since Lambda would have stopped it: the caller (poller,
        gateway) then treats the invocation as failed, as Lambda's would.
        """
        context = self.context()
        payload = json.loads(json.dumps(event))
        started = time.monotonic()
        result = self.handler(payload, context)
        elapsed = time.monotonic() - started
        if elapsed > self.spec.timeout_s:
            log.warning(
                "function %s ran %.1f s, past its %.1f s timeout: counted as failed",
                self.spec.name,
                elapsed,
                self.spec.timeout_s,
            )
            raise FunctionError(f"Task timed out after {self.spec.timeout_s:.2f} seconds")
        try:
            return json.loads(json.dumps(result, default=_lambda_json_default))
        except (TypeError, ValueError) as exc:
            raise FunctionError(f"Runtime.MarshalError: the result of {self.spec.name} is not JSON") from exc


def _lambda_json_default(value: Any) -> Any:
    # Lambda's Python runtime serialises Decimal (as boto3's DynamoDB layer hands them out).
    if isinstance(value, decimal.Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


class Functions:
    """The stack's functions, found by logical id, name or ARN (a Scheduler target's)."""

    def __init__(self, functions: list[LocalFunction]) -> None:
        self._functions = list(functions)

    def __iter__(self) -> Iterator[LocalFunction]:
        return iter(self._functions)

    def __len__(self) -> int:
        return len(self._functions)

    def by_logical_id(self, logical_id: str) -> LocalFunction:
        for function in self._functions:
            if function.spec.logical_id == logical_id:
                return function
        raise KeyError(logical_id)

    def find(self, name_or_arn: str) -> LocalFunction | None:
        """The function a name, an ARN or a qualified ARN (`...:function:name:$LATEST`) names."""
        name = name_or_arn
        if name_or_arn.startswith("arn:"):
            parts = name_or_arn.split(":")
            if len(parts) < 7 or parts[2] != "lambda" or parts[5] != "function":
                return None
            name = parts[6]
        for function in self._functions:
            if function.spec.name == name:
                return function
        return None


# --- reading the template --------------------------------------------------------------------------


def function_specs(
    template: Template, resolver: Resolver, process_env: Mapping[str, str] | None = None
) -> list[FunctionSpec]:
    """Each function of the template (whose condition holds), its environment resolved.

    `process_env` is the local stack's own environment: its `WAKEUP_*` variables win over the
    template's, except where the template's value names one of the stack's own resources (a
    `WAKEUP_TABLE` left over from another stack's printed lines must not point the functions away).
    """
    process_env = dict(os.environ if process_env is None else process_env)
    specs = []
    for logical_id, definition in template.of_type(SERVERLESS_FUNCTION):
        if not resolver.is_created(logical_id):
            continue
        properties = _with_globals(template.function_globals, definition.get("Properties") or {})
        specs.append(_spec(logical_id, properties, template, resolver, process_env))
    return specs


def _with_globals(globals_: Mapping[str, Any], own: Mapping[str, Any]) -> dict[str, Any]:
    """SAM's merge: maps merge (the function's keys win), lists add up, other values are replaced."""
    merged: dict[str, Any] = dict(globals_)
    for key, value in own.items():
        current = merged.get(key)
        if isinstance(current, dict) and isinstance(value, dict):
            merged[key] = _with_globals(current, value)
        elif isinstance(current, list) and isinstance(value, list):
            merged[key] = current + value
        else:
            merged[key] = value
    return merged


def _spec(
    logical_id: str,
    properties: dict[str, Any],
    template: Template,
    resolver: Resolver,
    process_env: Mapping[str, str],
) -> FunctionSpec:
    code_uri = resolver.resolve(properties.get("CodeUri", "."))
    if not isinstance(code_uri, str):
        raise TemplateError(f"{logical_id}: the local stack needs CodeUri to be a local folder")
    handler = resolver.resolve(properties.get("Handler"))
    if not isinstance(handler, str) or "." not in handler:
        raise TemplateError(f"{logical_id}: Handler must be module.function, not {handler!r}")
    name = resolver.physical_name(logical_id)
    return FunctionSpec(
        logical_id=logical_id,
        name=name,
        arn=function_arn(name, resolver.region, resolver.account_id),
        code_dir=(template.base_dir / code_uri).resolve(),
        handler=handler,
        memory_mb=int(resolver.resolve(properties.get("MemorySize", DEFAULT_MEMORY_MB))),
        timeout_s=float(resolver.resolve(properties.get("Timeout", DEFAULT_TIMEOUT_S))),
        environment=_environment(logical_id, properties, template, resolver, process_env),
        events=resolver.resolve(properties.get("Events") or {}),
        layer_dirs=tuple(_layer_dirs(properties.get("Layers") or [], template, resolver)),
    )


def _environment(
    logical_id: str,
    properties: dict[str, Any],
    template: Template,
    resolver: Resolver,
    process_env: Mapping[str, str],
) -> dict[str, str]:
    declared: dict[str, Any] = dict((properties.get("Environment") or {}).get("Variables") or {})
    environment = {}
    for key, value in declared.items():
        resolved = resolver.resolve(value)
        if isinstance(resolved, list | dict):
            raise TemplateError(f"{logical_id}: the variable {key} must resolve to a string")
        environment[key] = _env_string(resolved)
    for key, value in process_env.items():
        if not key.startswith(OVERRIDABLE_PREFIX) or key.startswith(LOCAL_ONLY_PREFIX):
            continue
        if key in declared and _names_a_resource(declared[key], template):
            if value != environment[key]:
                log.warning("%s from the environment ignored: the template names the stack's own resource", key)
            continue
        environment[key] = value
    return environment


def _env_string(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _names_a_resource(value: Any, template: Template) -> bool:
    """Whether an (unresolved) value refers to one of the template's resources."""
    resources = template.resources
    if isinstance(value, list):
        return any(_names_a_resource(item, template) for item in value)
    if not isinstance(value, dict):
        return False
    if "Ref" in value:
        return str(value["Ref"]) in resources
    if "Fn::GetAtt" in value:
        return True
    if "Fn::Sub" in value:
        argument = value["Fn::Sub"]
        text = argument[0] if isinstance(argument, list) else argument
        names = {part.split(".")[0] for part in _sub_names(str(text))}
        return bool(names & resources.keys()) or _names_a_resource(argument, template)
    return any(_names_a_resource(item, template) for item in value.values())


def _sub_names(text: str) -> list[str]:
    return list(re.findall(r"\$\{([^}!]*)\}", text))


def _layer_dirs(layers: list[Any], template: Template, resolver: Resolver) -> Iterator[Path]:
    """The folders of the template's own layers (`Layers: [!Ref Layer]`), as SAM would build them."""
    for layer in layers:
        if not (isinstance(layer, dict) and "Ref" in layer and layer["Ref"] in template.resources):
            continue  # a layer from elsewhere (an ARN): its packages must already be installed here
        properties = template.resources[layer["Ref"]].get("Properties") or {}
        content = resolver.resolve(properties.get("ContentUri"))
        if isinstance(content, str):
            folder = (template.base_dir / content).resolve()
            yield folder / "python" if (folder / "python").is_dir() else folder


# --- importing -------------------------------------------------------------------------------------


def common_environment(specs: list[FunctionSpec]) -> dict[str, str]:
    """Every function's variables in one mapping (the first function's value where they differ)."""
    environment: dict[str, str] = {}
    for spec in specs:
        for key, value in spec.environment.items():
            if key in environment and environment[key] != value:
                log.debug("functions differ on %s; the process keeps %r", key, environment[key])
            environment.setdefault(key, value)
    return environment


def load_functions(specs: list[FunctionSpec], set_env: Callable[[str, str], None], region: str) -> Functions:
    """Imports each handler afresh (a cold start), its environment set through `set_env` first."""
    common = common_environment(specs)
    functions = []
    with _import_lock:
        for spec in specs:
            for key, value in {**common, **spec.environment}.items():
                set_env(key, value)
            functions.append(LocalFunction(spec, _import_handler(spec), region))
        for key, value in common.items():
            set_env(key, value)
    return Functions(functions)


def _import_handler(spec: FunctionSpec) -> Handler:
    for folder in (*spec.layer_dirs, spec.code_dir):
        if not folder.is_dir():
            raise TemplateError(f"{spec.logical_id}: the folder {folder} does not exist")
        if str(folder) not in sys.path:
            sys.path.insert(0, str(folder))
    module_name, _, function_name = spec.handler.rpartition(".")
    # A fresh import, as a new Lambda environment would make: module-level settings are read now.
    sys.modules.pop(module_name, None)
    module = importlib.import_module(module_name)
    handler = getattr(module, function_name, None)
    if not callable(handler):
        raise TemplateError(f"{spec.logical_id}: {module_name} has no function {function_name}")
    log.info("function loaded: %s (%s)", spec.name, spec.handler)
    return handler  # type: ignore[no-any-return]
