"""The local stack: the template's handlers, on moto, behind a local API Gateway, SQS and Scheduler.

    with LocalStack("template.yaml", port=0) as stack:
        requests.get(f"{stack.url}/wakeup/instances", headers={"Authorization": f"Bearer {stack.account_token}"})

The gateway, the poller and the Scheduler run in this process, moto in a child process of its own
(see moto_process.py), and each function's invocations in execution environments of their own,
processes started on demand (functions.py). The stack leaves this process's `os.environ` alone:
each environment gets its own variables, so several stacks can run side by side in one process.
"""

from __future__ import annotations

import functools
import logging
import os
import random
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import TracebackType
from typing import IO, TYPE_CHECKING, Any

from wakeup.addresses import LOOPBACK_CIDRS
from wakeup_awsfacts.api_gateway import api_throttles
from wakeup_awsfacts.quotas import SCHEDULER_WINDOW_S
from wakeup_awsfacts.template import Resolver, TemplateError, load_template
from wakeup_local.aws.clients import AwsClients, make_clients
from wakeup_local.aws.moto_process import MotoProcess
from wakeup_local.aws.request_counter import scheduler_changes_since
from wakeup_local.aws.resources import StackResources, create_resources
from wakeup_local.event_sources.mappings import MappingWatcher, create_mappings, record_stack
from wakeup_local.event_sources.scheduler import RecurringRunner, ScheduleWatcher, recurring_schedules
from wakeup_local.event_sources.sqs_poller import SqsPoller, event_sources
from wakeup_local.event_sources.sqs_scaling import Counters
from wakeup_local.gateway.gateway import Gateway, routes_from
from wakeup_local.gateway.throttling import route_buckets
from wakeup_local.lambda_.async_invoke import AsyncInvoker, Attempt, event_invoke_configs
from wakeup_local.lambda_.functions import Functions, FunctionSpec, function_specs, make_functions
from wakeup_local.lambda_.lambda_logs import FunctionLog

if TYPE_CHECKING:
    from wakeup.settings import Settings

log = logging.getLogger(__name__)

DEFAULT_REGION = "us-east-1"
DEFAULT_STACK_NAME = "wakeup-local"
LOOPBACK = "127.0.0.1"
# The local stack's own settings, read from its environment at start.
EXACT_SCHEDULES_ENV = "WAKEUP_LOCAL_EXACT_SCHEDULES"
SWEEP_PERIOD_ENV = "WAKEUP_LOCAL_SWEEP_S"
# How long an event source mapping stays `Updating` after an update before its change applies (AWS
# gives no figure; the planner assumes minutes, WAKEUP_PLANNER_UPDATE_DELAY_S): short here.
MAPPING_UPDATE_ENV = "WAKEUP_LOCAL_MAPPING_UPDATE_S"
DEFAULT_MAPPING_UPDATE_S = 5.0
# A setting of the functions that the local stack sets differently from the template's default.
CALL_ALLOWED_CIDRS_ENV = "WAKEUP_CALL_ALLOWED_CIDRS"
# Lifts the limits AWS sets on how fast work goes through (route throttles, SQS event source
# scaling: each mapping starts at its maximum concurrency), for quick local work; AWS's limits are
# the default.
UNBOUNDED_ENV = "WAKEUP_LOCAL_UNBOUNDED"
# Multiplies the waits between Lambda's asynchronous retries and the maximum event age (1: AWS's).
ASYNC_TIME_SCALE_ENV = "WAKEUP_LOCAL_ASYNC_TIME_SCALE"
AccountMinter = Callable[[AwsClients, str, str], str]


def mint_with_wakeup(clients: AwsClients, table_name: str, label: str) -> str:
    """Mints an account with the service's own code (`wakeup.logic.accounts`) and returns its token."""
    from wakeup.logic.accounts import mint_account
    from wakeup.table import DynamoStore

    _, token = mint_account(DynamoStore(table_name, client=clients.dynamodb), label)
    return token


def check_wakeup_settings(specs: list[FunctionSpec]) -> list[Settings]:
    """Refuses settings the service's functions would refuse at their init (`SettingsError`), so
    the stack stops at start with the reason rather than serving 500s; returns each service
    function's settings. Functions without `WAKEUP_TABLE` are not the service's (a test template's)
    and are left alone."""
    from wakeup.settings import load_settings

    return [load_settings(spec.environment) for spec in specs if "WAKEUP_TABLE" in spec.environment]


def late_schedules_warning(settings: list[Settings], exact: bool) -> str | None:
    """What to tell a developer whose schedules fire within their minute (as AWS's do, unless
    `WAKEUP_LOCAL_EXACT_SCHEDULES=1`) with a lead shorter than that minute: a wake through the
    Scheduler may then be called up to a minute late. template.yaml allows no lead under 30 s."""
    if exact:
        return None
    for each in settings:
        if each.schedule_lead_s < SCHEDULER_WINDOW_S:
            return (
                f"WAKEUP_SCHEDULE_LEAD_S={each.schedule_lead_s} is shorter than the minute within which a"
                f" schedule fires: a wake through the Scheduler may be called up to"
                f" {SCHEDULER_WINDOW_S - each.schedule_lead_s:.0f} s late; set {EXACT_SCHEDULES_ENV}=1 to fire"
                " schedules on time"
            )
    return None


def service_table(specs: list[FunctionSpec], tables: set[str]) -> str:
    """The service's table: the one the functions' `WAKEUP_TABLE` names, or the only one."""
    named = {spec.environment["WAKEUP_TABLE"] for spec in specs if "WAKEUP_TABLE" in spec.environment}
    if len(named) == 1 and named <= tables:
        return named.pop()
    if len(tables) == 1:
        return tables.pop()
    raise TemplateError("cannot tell the service's table: set WAKEUP_TABLE in Globals.Function")


def _truthy(value: str | None) -> bool:
    return (value or "").strip().lower() in ("1", "true", "yes", "on")


class LocalStack:
    """Starts on `start()` (or `with`), stops on `stop()`: moto, resources, functions, gateway,
    SQS poller, Scheduler, and a first account.

    `env` is added to the stack's environment as if it had been set in the shell that starts it
    (`WAKEUP_SQS_HORIZON_S=5`, `WAKEUP_LOCAL_EXACT_SCHEDULES=1` ...). What the functions print goes
    to `function_log` (default: stderr), each line prefixed with the function's logical id.
    """

    def __init__(
        self,
        template: str | Path = "template.yaml",
        *,
        port: int = 0,
        env: Mapping[str, str] | None = None,
        stack_name: str = DEFAULT_STACK_NAME,
        region: str = DEFAULT_REGION,
        first_account_label: str | None = "local",
        account_minter: AccountMinter = mint_with_wakeup,
        rng: random.Random | None = None,
        function_log: IO[str] | None = None,
    ) -> None:
        self.template_path = Path(template)
        self.port = port
        self.env = dict(env or {})
        self.stack_name = stack_name
        self.region = region
        self._first_account_label = first_account_label
        self._account_minter = account_minter
        self._rng = rng or random.Random()
        self._function_log = FunctionLog(function_log)
        self._moto: MotoProcess | None = None
        self._gateway: Gateway | None = None
        self._poller: SqsPoller | None = None
        self._mapping_watcher: MappingWatcher | None = None
        self._watcher: ScheduleWatcher | None = None
        self._recurring: RecurringRunner | None = None
        self._async: AsyncInvoker | None = None
        self._clients: AwsClients | None = None
        self.endpoint_url = ""
        self.resources = StackResources()
        self.functions = Functions([])
        self.table_name = ""
        self.account_token = ""

    # --- what a user of the stack needs ---------------------------------------------------------

    @property
    def url(self) -> str:
        if self._gateway is None:
            raise RuntimeError("the local stack is not running")
        return self._gateway.url

    @property
    def moto_pid(self) -> int:
        """moto's process (its CPU is what `make bench` and calibration measure)."""
        if self._moto is None:
            raise RuntimeError("the local stack is not running")
        return self._moto.pid

    @property
    def clients(self) -> AwsClients:
        if self._clients is None:
            raise RuntimeError("the local stack is not running")
        return self._clients

    def mint_account(self, label: str) -> str:
        """A new account's token."""
        return self._account_minter(self.clients, self.table_name, label)

    @property
    def master_key_secret(self) -> str:
        """The ARN of the secret that holds the master key of wakes' signatures."""
        return next(iter(self.resources.secrets.values()), "")

    def signing_secret(self, account_token: str) -> str | None:
        """The `whsec_` secret that signs the wakes of the account with this token, now (None
        when no account has this token)."""
        from wakeup.factories import signing_keys
        from wakeup.logic.accounts import signing_secret
        from wakeup.table import DynamoStore
        from wakeup.tokens import hash_token

        store = DynamoStore(self.table_name, client=self.clients.dynamodb)
        owner = store.owner_of(hash_token(account_token))
        account = store.get_account(owner.account_id) if owner is not None else None
        if account is None:
            return None
        return signing_secret(signing_keys(self.master_key_secret, self.clients.secretsmanager), account)

    def run_sweeper(self) -> list[Any]:
        """Runs the template's scheduled functions (the sweeper, the planner) now; returns their results."""
        if self._recurring is None:
            raise RuntimeError("the local stack is not running")
        return self._recurring.run_now()

    def async_attempts(self, logical_id: str) -> list[Attempt]:
        """Every run of the function's asynchronous events (Scheduler's invocations) so far."""
        if self._async is None:
            raise RuntimeError("the local stack is not running")
        return self._async.history(self.functions.by_logical_id(logical_id).name)

    def event_source_counters(self) -> dict[str, Counters]:
        """What each SQS event source mapping has done (`Function.Event`: batches, concurrency)."""
        if self._poller is None:
            raise RuntimeError("the local stack is not running")
        return self._poller.counters()

    def env_lines(self) -> list[str]:
        """The lines `wakeup-local` prints, which let a person or a script use the stack at once
        (the first account's signing secret last: a host verifies its wakes with it)."""
        lines = [
            f"WAKEUP_URL={self.url}",
            f"WAKEUP_ACCOUNT_TOKEN={self.account_token}",
            f"AWS_ENDPOINT_URL={self.endpoint_url}",
            f"AWS_DEFAULT_REGION={self.region}",
            f"WAKEUP_TABLE={self.table_name}",
            f"WAKEUP_MASTER_KEY_SECRET={self.master_key_secret}",
        ]
        secret = self.signing_secret(self.account_token) if self.account_token else None
        if secret is not None:
            lines.append(f"WAKEUP_SIGNING_SECRET={secret}")
        return lines

    # --- starting and stopping ------------------------------------------------------------------

    def __enter__(self) -> LocalStack:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.stop()

    def start(self) -> LocalStack:
        try:
            self._start()
        except BaseException:
            self.stop()
            raise
        return self

    def _start(self) -> None:
        template = load_template(self.template_path)
        # The gateway's port first: a port in use is the likeliest failure, and the cheapest to find.
        self._gateway = Gateway([], port=self.port, host=LOOPBACK, api_id=self.stack_name)

        settings_env = {**os.environ, **self.env}
        self._moto = MotoProcess(float(settings_env.get(MAPPING_UPDATE_ENV) or DEFAULT_MAPPING_UPDATE_S))
        self._moto.start()
        self.endpoint_url = self._moto.endpoint_url
        # The service refuses to call loopback addresses by default (wakeup.addresses); here every
        # host runs on this machine, so the local stack allows loopback unless told otherwise.
        settings_env.setdefault(CALL_ALLOWED_CIDRS_ENV, LOOPBACK_CIDRS)

        resolver = Resolver(template, self.stack_name, self.region, endpoint_url=self.endpoint_url, rng=self._rng)
        self._clients = make_clients(self.endpoint_url, self.region)
        self.resources = create_resources(template, resolver, self._clients)
        # Before the functions' variables are resolved: the planner's names the caller's mapping.
        mappings = create_mappings(template, resolver, self._clients)
        if mappings:
            record_stack(self.stack_name, self._clients)
        specs = function_specs(template, resolver, settings_env)
        late = late_schedules_warning(
            check_wakeup_settings(specs), exact=_truthy(settings_env.get(EXACT_SCHEDULES_ENV))
        )
        if late is not None:
            log.warning(late)
        self.functions = make_functions(
            specs,
            region=self.region,
            endpoint_url=self.endpoint_url,
            function_log=self._function_log,
            settings=settings_env,
        )
        self.functions.start()
        self.table_name = service_table(specs, set(self.resources.tables.values()))

        unbounded = _truthy(settings_env.get(UNBOUNDED_ENV))
        self._poller = SqsPoller(
            event_sources(self.functions, self.resources, unbounded=unbounded),
            self._clients.sqs,
            self.region,
            unbounded=unbounded,
        )
        polled = {source.name for source in self._poller.sources}
        self._mapping_watcher = MappingWatcher(
            [mapping for mapping in mappings if mapping.name in polled],
            self._clients.awslambda,
            self._poller.reconfigure,
        )
        self._async = AsyncInvoker(
            event_invoke_configs(template, self.functions, self.resources, resolver),
            self._clients.sqs,
            time_scale=float(settings_env.get(ASYNC_TIME_SCALE_ENV) or 1.0),
        )
        self._watcher = ScheduleWatcher(
            self._clients.scheduler,
            list(self.resources.schedule_groups.values()),
            self.functions,
            self._async.invoke,
            exact=_truthy(settings_env.get(EXACT_SCHEDULES_ENV)),
            rng=self._rng,
            changes=functools.partial(scheduler_changes_since, self.endpoint_url, region=self.region),
        )
        sweep = settings_env.get(SWEEP_PERIOD_ENV)
        self._recurring = RecurringRunner(
            recurring_schedules(template, resolver, self.functions),
            self._async.invoke,
            float(sweep) if sweep else None,
        )
        self._gateway.routes = routes_from(self.functions)
        if not unbounded:
            self._gateway.buckets = route_buckets(
                api_throttles(template, resolver), {(route.api, route.route_key) for route in self._gateway.routes}
            )
        self._async.start()
        self._poller.start()
        self._mapping_watcher.start()
        self._watcher.start()
        self._recurring.start()
        self._gateway.start()
        if self._first_account_label is not None:
            self.account_token = self.mint_account(self._first_account_label)
        log.info("local stack %s serving on %s", self.stack_name, self.url)

    def stop(self) -> None:
        """Stops everything that started, in reverse order; safe to call more than once."""
        if self._gateway is not None:
            self._gateway.stop()
        # At once: the poller and the Scheduler may each be in a wait of up to a second in moto.
        parts = [
            part for part in (self._recurring, self._watcher, self._mapping_watcher, self._poller) if part is not None
        ]
        with ThreadPoolExecutor(max(len(parts), 1), thread_name_prefix="stopping") as stopping:
            list(stopping.map(lambda part: part.stop(), parts))
        if self._async is not None:
            self._async.stop()  # last: the others invoke through it
        self._recurring = self._watcher = self._mapping_watcher = self._poller = self._async = None
        self.functions.stop()
        if self._clients is not None:
            self._clients.close()
            self._clients = None
        if self._moto is not None:
            self._moto.stop()  # and with its process goes all the stack's AWS state
            self._moto = None
        self._gateway = None
