"""The template's functions, each run in execution environments of its own, as Lambda runs them.

Each `AWS::Serverless::Function` becomes a `LocalFunction`. Its invocations run in processes of
their own (environment.py), one invocation at a time each, reused while warm and bounded by the
function's concurrency (environment_pool.py). Each environment has exactly its function's variables
(`Globals.Function` and its own, resolved, with `WAKEUP_*` overrides from the stack's environment)
and the ones Lambda defines for a Python runtime (`runtime_variables`).
"""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import re
import sys
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from wakeup_awsfacts.lambda_logging import SYSTEM_LEVELS_WITH_REPORT, logs_system_lines
from wakeup_awsfacts.quotas import DEFAULT_MEMORY_MB, DEFAULT_TIMEOUT_S
from wakeup_awsfacts.template import (
    NO_VALUE,
    SERVERLESS_FUNCTION,
    Resolver,
    Template,
    TemplateError,
    function_arn,
)
from wakeup_local.aws.clients import DUMMY_ACCESS_KEY_ID, DUMMY_SECRET_ACCESS_KEY
from wakeup_local.lambda_.environment import EnvironmentSettings, ExecutionEnvironment, FunctionError
from wakeup_local.lambda_.environment_pool import EnvironmentPool, Throttled
from wakeup_local.lambda_.environment_process import RUNTIME_CLIENT
from wakeup_local.lambda_.lambda_logs import FunctionLog

__all__ = ["FunctionError", "FunctionSpec", "Functions", "LocalFunction", "Throttled", "function_specs"]

log = logging.getLogger(__name__)

# Lambda's defaults when neither the function nor Globals say (memory and timeout: `quotas`).
DEFAULT_RUNTIME = "python3.13"

# Settings the person starting the local stack may set in its environment to override the template
# (`WAKEUP_SQS_HORIZON_S=5 make run`). Variables of the local stack itself are not passed on.
OVERRIDABLE_PREFIX = "WAKEUP_"
LOCAL_ONLY_PREFIX = "WAKEUP_LOCAL_"
# What the stack prints and the clients read, often still exported in the shell that starts the
# stack again: a person's credentials, never a function's settings, so never handed to one.
CLIENT_VARIABLES = frozenset({"WAKEUP_URL", "WAKEUP_ACCOUNT_TOKEN", "WAKEUP_TOKEN", "WAKEUP_SIGNING_SECRET"})

# The local stack's own settings for the environments.
CONCURRENCY_ENV = "WAKEUP_LOCAL_CONCURRENCY"
IDLE_ENV = "WAKEUP_LOCAL_IDLE_S"
# Every function's system log level in place of its LoggingConfig's: INFO gives the `REPORT` lines
# that `make bench` and the calibration read, as Lambda's Telemetry API gives `platform.report` to
# a subscriber whatever the log level.
SYSTEM_LOG_LEVEL_ENV = "WAKEUP_LOCAL_SYSTEM_LOG_LEVEL"
# Concurrent environments of a function without ReservedConcurrentExecutions (on AWS the account's
# 1,000 unreserved; here each is a process of about 60 MB).
DEFAULT_CONCURRENCY = 16
# How long an environment stays warm without an invocation (Lambda does not say; minutes).
DEFAULT_IDLE_S = 60.0


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
    runtime: str = DEFAULT_RUNTIME
    reserved_concurrency: int | None = None
    log_group: str = ""
    # LoggingConfig: Lambda filters by level only in the JSON format ("Log-level filtering").
    log_format: str = "Text"
    application_log_level: str = ""
    system_log_level: str = ""

    def system_lines(self, override: str = "") -> bool:
        """Whether Lambda prints this function's `START`, `END` and `REPORT` (system logs at INFO)."""
        if override:
            return override in SYSTEM_LEVELS_WITH_REPORT
        config = {"LogFormat": self.log_format, "SystemLogLevel": self.system_log_level or "INFO"}
        return logs_system_lines({"LoggingConfig": config})


def runtime_variables(spec: FunctionSpec, region: str, endpoint_url: str) -> dict[str, str]:
    """An environment's variables: the function's own, and those Lambda defines for its runtime.

    Lambda's list: "Defined runtime environment variables",
    https://docs.aws.amazon.com/lambda/latest/dg/configuration-envvars.html#configuration-envvars-runtime
    The reserved ones win over the function's; `AWS_LAMBDA_RUNTIME_API` and the log stream are each
    environment's own (environment.py). `_X_AMZN_TRACE_ID` is set per invocation by the runtime
    client from the Runtime API's trace header.

    Beyond Lambda's, only what keeps the handlers on the local moto server: its endpoint, dummy
    credentials (in place of the execution role's), no shared config file; and `AWS_SAM_LOCAL`, set
    as `sam local` sets it, so Powertools' Tracer stays off (no X-Ray daemon here).
    """
    client = importlib.util.find_spec(RUNTIME_CLIENT)
    site = Path(client.origin).resolve().parents[1] if client is not None and client.origin else Path()
    unreserved = {
        "LANG": "en_US.UTF-8",
        # The runtime's interpreter first, as /var/lang/bin is on Lambda.
        "PATH": f"{Path(sys.executable).parent}:/usr/local/bin:/usr/bin/:/bin:/opt/bin",
        # Code first, then layers, then the runtime's own packages (the interpreter's site-packages),
        # Lambda's order: "Dependency search path and runtime-included libraries",
        # https://docs.aws.amazon.com/lambda/latest/dg/python-package.html#python-package-searchpath
        "PYTHONPATH": os.pathsep.join(str(folder) for folder in (spec.code_dir, *spec.layer_dirs)),
    }
    reserved = {
        "_HANDLER": spec.handler,
        "AWS_REGION": region,
        "AWS_DEFAULT_REGION": region,
        "AWS_EXECUTION_ENV": f"AWS_Lambda_{spec.runtime}",
        "AWS_LAMBDA_FUNCTION_NAME": spec.name,
        "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": str(spec.memory_mb),
        "AWS_LAMBDA_FUNCTION_VERSION": "$LATEST",
        "AWS_LAMBDA_INITIALIZATION_TYPE": "on-demand",
        "AWS_LAMBDA_LOG_GROUP_NAME": spec.log_group or f"/aws/lambda/{spec.name}",
        # The runtime client formats and filters the application's log records by these, as on
        # Lambda, and Powertools' Logger takes its level from the second.
        **({"AWS_LAMBDA_LOG_FORMAT": "JSON"} if spec.log_format == "JSON" else {}),
        **(
            {"AWS_LAMBDA_LOG_LEVEL": spec.application_log_level}
            if spec.log_format == "JSON" and spec.application_log_level
            else {}
        ),
        "LAMBDA_TASK_ROOT": str(spec.code_dir),
        "LAMBDA_RUNTIME_DIR": str(site),
        "TZ": ":UTC",
    }
    local = {
        "AWS_ENDPOINT_URL": endpoint_url,
        "AWS_ACCESS_KEY_ID": DUMMY_ACCESS_KEY_ID,
        "AWS_SECRET_ACCESS_KEY": DUMMY_SECRET_ACCESS_KEY,
        "AWS_CONFIG_FILE": os.devnull,
        "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
        "AWS_SAM_LOCAL": "true",
    }
    return {**unreserved, **spec.environment, **reserved, **local}


class LocalFunction:
    """One function of the stack: `invoke(event)` runs it in one of its environments."""

    def __init__(self, spec: FunctionSpec, pool: EnvironmentPool) -> None:
        self.spec = spec
        self.pool = pool

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def arn(self) -> str:
        return self.spec.arn

    def invoke(self, event: Any, *, throttle: bool = False) -> Any:
        """Runs the handler on `event` and returns its result; blocking and thread-safe.

        Raises FunctionError when the invocation fails as Lambda reports it (the handler raised,
        timed out, its environment exited or did not start). With `throttle`, a synchronous caller's
        invocation beyond the function's reserved concurrency raises Throttled instead of waiting.
        """
        result = self.pool.invoke(json.dumps(event).encode(), throttle=throttle)
        return json.loads(result) if result else None


class Functions:
    """The stack's functions, found by logical id, name or ARN (a Scheduler target's).

    While started, a thread stops the environments that have been idle too long.
    """

    def __init__(self, functions: list[LocalFunction]) -> None:
        self._functions = list(functions)
        self._stopping = threading.Event()
        self._reaper: threading.Thread | None = None

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

    def start(self) -> None:
        if self._functions:
            self._reaper = threading.Thread(target=self._stop_idle, name="environment-reaper", daemon=True)
            self._reaper.start()

    def stop(self) -> None:
        self._stopping.set()
        if self._reaper is not None:
            self._reaper.join()
            self._reaper = None
        for function in self._functions:
            function.pool.stop()

    def _stop_idle(self) -> None:
        period = max(0.05, min(function.pool.idle_s for function in self._functions) / 4)
        while not self._stopping.wait(period):
            for function in self._functions:
                function.pool.stop_idle()


def make_functions(
    specs: list[FunctionSpec],
    *,
    region: str,
    endpoint_url: str,
    function_log: FunctionLog,
    settings: Mapping[str, str],
) -> Functions:
    """The functions of `specs`, no environment started yet (each starts on its first invocation).

    `settings` is the stack's environment: `WAKEUP_LOCAL_CONCURRENCY` bounds the environments of a
    function without a reservation, `WAKEUP_LOCAL_IDLE_S` is how long one stays warm unused.
    """
    concurrency = int(settings.get(CONCURRENCY_ENV) or DEFAULT_CONCURRENCY)
    idle_s = float(settings.get(IDLE_ENV) or DEFAULT_IDLE_S)
    system_log_level = settings.get(SYSTEM_LOG_LEVEL_ENV) or ""
    functions = []
    for spec in specs:
        environment = EnvironmentSettings(
            logical_id=spec.logical_id,
            function_arn=spec.arn,
            handler=spec.handler,
            code_dir=spec.code_dir,
            memory_mb=spec.memory_mb,
            timeout_s=spec.timeout_s,
            variables=runtime_variables(spec, region, endpoint_url),
            system_lines=spec.system_lines(system_log_level),
        )

        def make(environment: EnvironmentSettings = environment) -> ExecutionEnvironment:
            return ExecutionEnvironment(environment, function_log)

        reserved = spec.reserved_concurrency is not None
        bound = spec.reserved_concurrency if spec.reserved_concurrency is not None else concurrency
        functions.append(LocalFunction(spec, EnvironmentPool(make, bound, reserved=reserved, idle_s=idle_s)))
    return Functions(functions)


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
    for logical_id, _ in template.of_type(SERVERLESS_FUNCTION):
        if not resolver.is_created(logical_id):
            continue
        properties = template.function_properties(logical_id)
        specs.append(_spec(logical_id, properties, template, resolver, process_env))
    return specs


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
    code_dir = (template.base_dir / code_uri).resolve()
    layer_dirs = tuple(_layer_dirs(properties.get("Layers") or [], template, resolver))
    logging_config = resolver.resolve(properties.get("LoggingConfig") or {})
    for folder in (code_dir, *layer_dirs):
        if not folder.is_dir():
            raise TemplateError(f"{logical_id}: the folder {folder} does not exist")
    return FunctionSpec(
        logical_id=logical_id,
        name=name,
        arn=function_arn(name, resolver.region, resolver.account_id),
        code_dir=code_dir,
        handler=handler,
        memory_mb=int(resolver.resolve(properties.get("MemorySize", DEFAULT_MEMORY_MB))),
        timeout_s=float(resolver.resolve(properties.get("Timeout", DEFAULT_TIMEOUT_S))),
        environment=_environment(logical_id, properties, template, resolver, process_env),
        events=resolver.resolve(properties.get("Events") or {}),
        layer_dirs=layer_dirs,
        runtime=str(resolver.resolve(properties.get("Runtime", DEFAULT_RUNTIME))),
        reserved_concurrency=_optional_int(resolver.resolve(properties.get("ReservedConcurrentExecutions"))),
        log_group=str(logging_config.get("LogGroup") or ""),
        log_format=str(logging_config.get("LogFormat") or "Text"),
        application_log_level=str(logging_config.get("ApplicationLogLevel") or ""),
        system_log_level=str(logging_config.get("SystemLogLevel") or ""),
    )


def _optional_int(value: Any) -> int | None:
    # A property set to `!If [cond, ..., !Ref AWS::NoValue]` is absent when cond is false.
    return None if value is None or value is NO_VALUE else int(value)


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
        if not key.startswith(OVERRIDABLE_PREFIX) or key.startswith(LOCAL_ONLY_PREFIX) or key in CLIENT_VARIABLES:
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
