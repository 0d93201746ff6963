"""Faults where the simulated AWS answers, in the functions and at the hosts, and a watch on what
the wakes came to under them. `wakeup_sim.fault_matrix` runs one fault class a row.

Where each fault is injected (`PLACES` says it for every request, and tests/unit/test_faults.py
checks that every request the layer makes is there):

- An AWS request fails as botocore's standard retry mode sees it (`wakeup.aws.CLIENT_CONFIG`: three
  attempts; a 5xx, a throttle and a timeout are retried, after `rand * min(scale * 2^i, 20)` s with
  a scale of 1 s for a throttle and 25 ms (DynamoDB) or 50 ms otherwise: botocore's
  `retries/standard.py`, "Retry behavior" in the Boto3 guide): it fails retryably, is throttled,
  times out before it applies (the read timeout), or applies with its reply lost (the read
  timeout, and botocore sends it again). A fault starts on a request's first attempt at the row's
  rate, and lasts 1, 2, 3 or 5 attempts in a row (1 and 2 botocore absorbs, 3 fails the request,
  5 the request and two attempts of the task's next one). DynamoDB's are injected in `MemoryStore`
  through `Io.fault` and `Io.reply_lost`; SQS's, Scheduler's and Secrets Manager's in the clients
  `Triggers` and `SigningKeys` are given (`FaultyClient`, `FaultySecrets`).
- A function dies or times out at a point between two of its requests (before each attempt, before
  a host call, and after its last request): one invocation in the rate is doomed, at a point drawn
  from the points of a typical invocation. Its environment goes with it (a batch's other records
  stop at their next point, and the whole batch fails); a timeout stalls until Lambda's timeout
  first. Lambda's timeout is also enforced on every invocation at each point.
- A host hangs on DNS, on connect or on read (the call ends at its timeout, which bounds the whole
  call: `wakeup.host_call`), resets the connection mid-reply (it answered 2xx), answers 2xx just
  after the timeout, or answers after the claim's lease has ended (the caller still sees its
  timeout). Injected at the caller's host call (`FaultyHosts`).
"""

import json
import math
import random
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any, TypeVar

from aws_lambda_powertools.utilities.parameters.exceptions import GetParameterError
from botocore.exceptions import BotoCoreError, ClientError, ReadTimeoutError
from greenlet import getcurrent

from wakeup import aws
from wakeup.arrival import CLOCK_ERROR_S
from wakeup.deadlines import NoTimeForRequestError, check_request
from wakeup.host_call import CallOutcome
from wakeup.logic.delivery import Delivery, Result
from wakeup.model import Origin, Trigger
from wakeup.signing import SigningKeys
from wakeup.times import format_time
from wakeup_sim.dynamodb import Io
from wakeup_sim.engine import Cpu, Engine
from wakeup_sim.fault_records import UNRECORDED, RecordLog, Records
from wakeup_sim.lambdas import Function

T = TypeVar("T")

# botocore's standard mode as `wakeup.aws.CLIENT_CONFIG` sets it.
ATTEMPTS = int(getattr(aws.CLIENT_CONFIG, "retries")["max_attempts"])  # noqa: B009 (set by Config, untyped)
READ_TIMEOUT_S = float(getattr(aws.CLIENT_CONFIG, "read_timeout"))  # noqa: B009
BACKOFF_CAP_S = 20.0
THROTTLE_SCALE_S = 1.0
SCALE_S = {"dynamodb": 0.025}  # others 0.05 (botocore's `retries/standard.py`)
# How many attempts in a row a fault lasts, drawn evenly (see the module's docstring).
RUNS = (1, 2, 3, 5)
# Round trip of a Secrets Manager request (an assumption, as the other services' in deployment.py).
SECRETS_LATENCY_S = 0.02
# The points (requests and host calls) of a typical invocation, for drawing where a doomed one
# dies: the caller's delivery of one record makes about six (claim, signing read, secret, call,
# outcome, and its batch's history write after); the wake function four; the sweeper a query and a read per shard of 64.
POINTS = {"CallerFunction": 6, "WakeFunction": 4, "SweeperFunction": 130}
FUNCTION_TIMEOUT_S = {"WakeFunction": 10.0, "SweeperFunction": 60.0}  # the caller's is the deployment's


class Kind(StrEnum):
    ERROR = "fails (5xx)"
    THROTTLE = "throttled"
    TIMEOUT = "times out before it applies"
    LOST = "applies, reply lost"
    DIES = "dies"
    TIMES_OUT = "times out"
    DNS = "hangs on DNS"
    CONNECT = "hangs on connect"
    READ = "hangs on read"
    RESET = "resets mid-reply"
    LATE = "answers 2xx after the timeout"
    SLOW = "answers past the lease"
    # Delivered twice: an SQS message (at-least-once), a schedule that fires twice, Lambda's
    # asynchronous event run twice; and a schedule that fires once after its delete.
    TWICE = "delivered twice"
    AFTER_DELETE = "fires once after its delete"
    # Applied late or out of order: a write that applies after its client timed out (and its
    # retry applied), an update that lands after a later one.
    APPLIES_LATE = "applies after its client timed out"
    OUT_OF_ORDER = "lands after a later update"
    # Stale reads: an index's lag, an eventually consistent read.
    STALE = "reads a view up to a second old"
    # A batch request answers part of it (BatchGetItem's keys, BatchWriteItem's puts) and returns the rest.
    UNPROCESSED = "leaves part unprocessed"
    # A race on one instance during its call: the host registers again while it is being called.
    REREGISTERS = "registers again during its call"


AWS_KINDS = (Kind.ERROR, Kind.THROTTLE, Kind.TIMEOUT, Kind.LOST)
READ_KINDS = (Kind.ERROR, Kind.THROTTLE, Kind.TIMEOUT)  # a read's lost reply is its timeout
FUNCTION_KINDS = (Kind.DIES, Kind.TIMES_OUT)
HOST_KINDS = (Kind.DNS, Kind.CONNECT, Kind.READ, Kind.RESET, Kind.LATE, Kind.SLOW)
# Kinds injected around a request or an invocation rather than at an attempt of it.
STORE_KINDS = (Kind.APPLIES_LATE, Kind.STALE, Kind.UNPROCESSED)
DELIVERY_KINDS = (Kind.TWICE, Kind.AFTER_DELETE, Kind.OUT_OF_ORDER)
HOST = "host"
# How far each execution environment's clock is off the true time, at most, either way (drawn
# evenly per environment): the bound the caller waits out past a wake's time (docs/faults.md, "Clocks").
CLOCK_SKEW_S = CLOCK_ERROR_S
CLOCK_RESOLUTION_S = 1e-6
# An eventually consistent read, or an index, lags its table by up to this (docs/faults.md).
STALE_S = 1.0
# A write applied late lands this long after its client gave it up, at most.
LATE_APPLY_S = 30.0

# Every request the functions make, where its faults are injected, and which kinds (reads have no
# lost reply of their own). tests/unit/test_faults.py compares it with what the layer calls.
PLACES: dict[str, tuple[str, tuple[Kind, ...]]] = {
    "dynamodb:GetItem": (
        "MemoryTable.read: the schedule trigger's read, the token lookup, the signing versions"
        " (a stale view: `stale_reads` around signing_versions)",
        (*READ_KINDS, Kind.STALE),
    ),
    "dynamodb:UpdateItem": (
        "MemoryTable.write: register_wake, claim_if_due, record_success, record_failure, postpone"
        " (applied late: `LateWrites`, the same requests re-sent)",
        (*AWS_KINDS, Kind.APPLIES_LATE),
    ),
    "dynamodb:BatchWriteItem": (
        "MemoryTable.write_many through DynamoStore.record_calls: an invocation's history items"
        " (`UnprocessedBatches`: some puts not made, returned unprocessed)",
        (*AWS_KINDS, Kind.UNPROCESSED),
    ),
    "dynamodb:Query": (
        "MemoryTable.query through DynamoStore.overdue: the sweeper's shards (the index's lag: `stale_reads`)",
        (*READ_KINDS, Kind.STALE),
    ),
    "dynamodb:BatchGetItem": (
        "MemoryTable.read_many through DynamoStore.overdue: the sweeper's reads (`UnprocessedBatches`)",
        (*READ_KINDS, Kind.UNPROCESSED),
    ),
    "sqs:SendMessage": (
        "FaultyClient around SqsClient: Triggers.send (arm, retry, busy, sweeper)",
        (*AWS_KINDS, Kind.TWICE),
    ),
    "scheduler:CreateSchedule": ("FaultyClient around Scheduler: Triggers.schedule", (*AWS_KINDS, Kind.TWICE)),
    "scheduler:UpdateSchedule": (
        "FaultyClient around Scheduler: Triggers.schedule (a far wake moved, or after a conflict)",
        (*AWS_KINDS, Kind.TWICE, Kind.OUT_OF_ORDER),
    ),
    "scheduler:DeleteSchedule": (
        "FaultyClient around Scheduler: Triggers.unschedule",
        (*AWS_KINDS, Kind.AFTER_DELETE),
    ),
    "secretsmanager:GetSecretValue": ("FaultySecrets: SigningKeys.master through Powertools' cache", READ_KINDS),
    "function:CallerFunction": (
        "FaultInjector.point: before each request and host call, and at the end (an event twice:"
        " `FaultInjector.wrap_events`, Scheduler's invocations)",
        (*FUNCTION_KINDS, Kind.TWICE),
    ),
    "function:WakeFunction": ("FaultInjector.point", FUNCTION_KINDS),
    "function:SweeperFunction": ("FaultInjector.point (an event twice: `wrap_events`)", (*FUNCTION_KINDS, Kind.TWICE)),
    HOST: (
        "FaultyHosts around Hosts.call: the caller's GET {url}/wake",
        (*HOST_KINDS, Kind.REREGISTERS),
    ),
}

# Requests the layer makes that the simulation does not: the instance routes and the operator's
# tools, outside the path of a wake (register, deliver, sweep). Their lost replies are
# tests/functional's (test_lost_replies.py); the planner, when it comes, belongs in PLACES.
NOT_SIMULATED = {
    # The instance routes' delete (and the move's UpdateItem) during calls, and their
    # TransactionConflicts, are the race rows' (`wakeup_sim.fault_races`), not a place of PLACES.
    "dynamodb:TransactWriteItems": "registering, deleting and revoking instances, minting accounts",
    # The planner's reads and its one mapping's update: no wake's delivery depends on them; a planner
    # failing throughout is a scenario of its own (tests/unit/test_simulation_planner.py).
    "lambda:GetEventSourceMapping": "the planner reading the caller's mapping",
    "lambda:UpdateEventSourceMapping": "the planner raising or lowering the caller's pollers",
    "lambda:GetFunctionConfiguration": "the planner reading the caller's memory",
    "lambda:UpdateFunctionConfiguration": "the planner setting the caller's memory for a burst, and back",
}


@dataclass(frozen=True)
class Fault:
    place: str  # a key of PLACES
    kind: Kind

    @property
    def label(self) -> str:
        return f"{self.place} {self.kind.value}"


@dataclass(frozen=True)
class FaultClass:
    """One row's faults: one kind at one place, or a named mix (each drawn at the row's rate)."""

    name: str
    faults: tuple[Fault, ...]


class Died(Exception):
    """A function's environment ended (it died, or Lambda's timeout ended it) at this point."""


def _error(code: str, operation: str) -> ClientError:
    return ClientError({"Error": {"Code": code, "Message": "injected"}}, operation)


def _failure(kind: Kind, place: str) -> Exception:
    service, operation = place.split(":")
    if kind is Kind.THROTTLE:
        return _error(
            "ProvisionedThroughputExceededException" if service == "dynamodb" else "ThrottlingException", operation
        )
    if kind is Kind.ERROR:
        return _error("InternalServerError" if service != "sqs" else "InternalError", operation)
    return ReadTimeoutError(endpoint_url=f"https://{service}.simulated")


@dataclass
class CallNote:
    """One call to a host, and the faults its task met from its start on (what a second call
    after its 2xx is put down to)."""

    key: tuple[str, str]
    webhook_id: str = ""  # what the host can tell a repeat by (Standard Webhooks)
    host_2xx: bool = False  # the host answered 2xx (the host woke)
    seen: bool = False  # and the caller saw that 2xx
    died: bool = False  # its function died (or reached Lambda's timeout) after the call
    faults: list[str] = field(default_factory=list)
    record: RecordLog = field(default_factory=RecordLog)  # its outcome write's attempts, after a 2xx it saw


# A duplicate the promise allows: after a 2xx the caller could not see, or after a 2xx whose
# function died between the reply and its record (DESIGN section 7), or whose record no attempt
# could write within the lease (`fault_records.UNRECORDED`: the same floor, the table never told).
UNSEEN = "a 2xx the caller could not see"
DIED = "its function died between the reply and its record"


@dataclass(eq=False)  # each call its own, however alike
class Busy:
    """A host busy with a call: from its start until it answers or its connection is gone."""

    reg: str
    start: float
    end: float = math.inf  # still busy
    # Lambda's timeout of the caller's invocation: its environment, and the connection, end then.
    deadline: float = math.inf

    def until(self) -> float:
        return min(self.end, self.deadline)


@dataclass
class Watch:
    """What the wakes came to, as the clients and the hosts see it: the invariants of the matrix."""

    registered_at: dict[tuple[str, str], float] = field(default_factory=dict)  # (instance, reg) -> at
    # The registration each client last got a 2xx for (instance -> (when, reg)): the wake it is owed.
    acked: dict[str, tuple[float, str]] = field(default_factory=dict)
    # Every 2xx each client got (instance -> [(its request sent, its 2xx, reg)]): requests that
    # overlap may apply in either order, so the wake owed may be another's of those (`owed`).
    acks: dict[str, list[tuple[float, float, str]]] = field(default_factory=lambda: defaultdict(list))
    # What each host is busy with (instance -> its calls not yet ended, on the true clock).
    busy: dict[str, list[Busy]] = field(default_factory=lambda: defaultdict(list))
    concurrent: int = 0  # a call started while its host was busy with the same registration
    overlapping: int = 0  # a call started while its host was busy with another registration
    early: int = 0  # a call started, on the true clock, before its registration's time
    calls: int = 0
    first_2xx: dict[tuple[str, str], float] = field(default_factory=dict)  # caller-seen, the call's start
    woken: dict[tuple[str, str], float] = field(default_factory=dict)  # host-seen: its first 2xx call's start
    answered: dict[tuple[str, str], CallNote] = field(default_factory=dict)  # the last call the host answered 2xx
    # Second calls after a 2xx: allowed ones by cause (UNSEEN, DIED, UNRECORDED); the others by the faults the
    # call after whose 2xx it came met ("no fault" when none): they fail the row.
    duplicates: Counter[str] = field(default_factory=Counter)
    unexplained: Counter[str] = field(default_factory=Counter)
    # Repeats whose `webhook-id` is not the one of the 2xx they repeat: the host cannot drop them
    # by their id, as the Standard Webhooks specification has it (the id stays when a message is
    # sent again).
    new_ids: int = 0
    # What the bound of a wake's recovery adds up (see `fault_matrix.bound_s`), per instance.
    hits: Counter[str] = field(default_factory=Counter)
    # Each failed attempt's count of failures in a row (its trigger's attempt + 1), per instance: a
    # host's failed call, or a call not made because it could not be signed, each moves the
    # retry's backoff on (`wakeup.logic.retry`).
    failed_attempts: dict[str, list[int]] = field(default_factory=lambda: defaultdict(list))
    # (a broken sweep's start, the shard it left: None for all) -> its first fault's time
    sweeps_failed: dict[tuple[float, int | None], float] = field(default_factory=dict)
    natural_timeouts: int = 0


class FaultInjector:
    """Draws the row's faults and keeps the watch. One per world; its own random stream."""

    def __init__(self, engine: Engine, faults: FaultClass, rate: float, seed: int, cpu_of: Callable[[], Cpu | None]):
        self.engine = engine
        engine.reuse_tasks = False  # its runs, hits and contexts are kept by task (`getcurrent()`)
        self.faults = faults
        self.rate = rate
        self.rng = random.Random(seed)
        self.cpu_of = cpu_of
        self.watch = Watch()
        self.injected: Counter[str] = Counter()
        self.followed: Counter[str] = Counter()  # what the faults led to (see `note`)
        self.requests: Counter[str] = Counter()  # place -> requests (first attempts), points, calls
        self._by_place: dict[str, list[Kind]] = defaultdict(list)
        for fault in faults.faults:
            self._by_place[fault.place].append(fault.kind)
        self._runs: dict[tuple[Any, str], list[Any]] = {}  # (task, place) -> [kind, attempts left]
        self._last_kind: dict[Any, Kind] = {}  # task -> the kind its last failed attempt met
        # Per execution environment (its Cpu): its function, its deadline, where it is doomed, and
        # how many points it has passed in this invocation.
        self._function: dict[Cpu, str] = {}
        self._deadline: dict[Cpu, float] = {}
        self._started: dict[Cpu, float] = {}
        self._doom: dict[Cpu, tuple[Kind, int]] = {}
        self._points: Counter[Cpu] = Counter()
        self.dead: set[Cpu] = set()
        # Each environment's calls under way (their hosts busy until the call or the environment ends).
        self.connections: dict[Cpu, list[Busy]] = defaultdict(list)
        # The wake each task works on (its instance id), and the call it made, if any.
        self.context: dict[Any, str] = {}
        self.context_cpu: dict[Any, Cpu | None] = {}
        self.shard: dict[Any, int] = {}  # the sweeper's task -> the shard it sweeps
        self._request_hit: set[tuple[Any, str]] = set()  # (task, place): its request met a fault already
        self.call_note: dict[Any, CallNote] = {}
        self.registered: dict[Any, tuple[str, str]] = {}  # task -> the (instance, reg) it wrote
        self.quiet: set[Any] = set()  # tasks whose requests meet no fault (a late write's own)

    def acknowledge(self, instance_id: str, reg: str, sent: float | None = None) -> None:
        """The client got its 2xx now for this registration, whose request it sent at `sent` (now
        when not said)."""
        self.watch.acked[instance_id] = (self.engine.now, reg)
        self.watch.acks[instance_id].append((self.engine.now if sent is None else sent, self.engine.now, reg))

    # -- bookkeeping -----------------------------------------------------------------------------

    def note(self, label: str, hit: bool = True, injected: bool = True) -> None:
        """A fault in the running task, put to its open call; `hit`: the first to meet this
        request or call, put to its wake (or its sweep); `injected`: one of the row's faults
        (else what one led to: Lambda's timeout reached, a batch's environment gone)."""
        (self.injected if injected else self.followed)[label] += 1
        task = getcurrent()
        instance = self.context.get(task)
        cpu = self.cpu_of()
        if hit and instance is not None:
            self.watch.hits[instance] += 1
            if label.startswith("secretsmanager:"):
                # The environment's other records wait for the same read of the secret.
                for other, other_cpu in self.context_cpu.items():
                    if other_cpu is cpu and other is not task:
                        self.watch.hits[self.context[other]] += 1
        if hit and cpu is not None and self._function.get(cpu) == "SweeperFunction":
            # A fault in a shard's read or re-arms leaves that shard to the next sweep; one that
            # ends the sweeper (a death, Lambda's timeout) leaves every shard.
            ends = label.startswith("function:") or "Lambda's timeout" in label
            shard = None if ends else self.shard.get(task)
            self.watch.sweeps_failed.setdefault((self._started[cpu], shard), self.engine.now)
        note = self.call_note.get(task)
        if note is not None:
            note.faults.append(label)

    def draws(self, place: str, among: tuple[Kind, ...]) -> Kind | None:
        """A fault of the row at `place`, of the kinds injected where this asks (`among`), or None."""
        kinds = [kind for kind in self._by_place.get(place, ()) if kind in among]
        if not kinds or self.rng.random() >= self.rate:
            return None
        return kinds[0] if len(kinds) == 1 else self.rng.choice(kinds)

    # -- functions -------------------------------------------------------------------------------

    def wrap_function(
        self, function: Function, timeout_s: float, points: int, wake_of: Callable[[Any], str | None] = lambda _: None
    ) -> None:
        """Runs each invocation of `function` under its deadline, doomed at the row's rate;
        `wake_of`: the wake an invocation's payload is about, if one."""
        inner = function.handler
        place = f"function:{function.name}"

        def handler(payload: Any) -> Any:
            task = getcurrent()
            wake = wake_of(payload)
            if wake is not None:
                self.context[task] = wake
            try:
                return invoke(payload)
            finally:
                if wake is not None:
                    self.context.pop(task, None)

        def invoke(payload: Any) -> Any:
            found = self.cpu_of()
            assert found is not None
            cpu = found
            if cpu in self.dead:  # the environment that died is replaced: a cold start
                self.dead.discard(cpu)
                function.cold_starts += 1
                cpu.use(function.init_s_at_one_vcpu)
                self.secrets_cache_drop(cpu)
            self._function[cpu] = function.name
            self._started[cpu] = self.engine.now
            self._deadline[cpu] = self.engine.now + timeout_s
            self._points[cpu] = 0
            self._doom.pop(cpu, None)
            kind = self.draws(place, FUNCTION_KINDS)
            if kind is not None:
                many = points * (len(payload) if isinstance(payload, list) else 1)
                self._doom[cpu] = (kind, self.rng.randint(1, many))
            result = inner(payload)
            self.point("the end of the invocation")
            if cpu in self.dead:
                raise Died(function.name)  # a record's task died: the environment did
            return result

        function.handler = handler

    def point(self, before: str) -> None:
        """A point between two requests of the running function: it may end here."""
        cpu = self.cpu_of()
        if cpu is None or cpu not in self._function:
            return
        name = self._function[cpu]
        self.requests[f"function:{name}"] += 1
        if cpu in self.dead:
            self.note(f"{name} died with its environment", injected=False)
            raise Died(name)
        self._points[cpu] += 1
        doom = self._doom.get(cpu)
        if doom is not None and self._points[cpu] >= doom[1]:
            del self._doom[cpu]
            if doom[0] is Kind.TIMES_OUT:
                self.engine.sleep(max(self._deadline[cpu] - self.engine.now, 0.0))
            self.environment_ends(cpu)
            self.note(f"function:{name} {doom[0].value} before {before}")
            raise Died(name)
        self.past_deadline(before)

    def environment_ends(self, cpu: Cpu) -> None:
        """The environment's runtime is ended now (or at its deadline, passed): so are its calls.

        "If the Lambda function crashes or times out during the Invoke phase, Lambda resets the
        execution environment. The reset behaves like a Shutdown event": Lambda first shuts down
        the runtime ("Understanding the Lambda execution environment lifecycle", Lambda developer
        guide, "Failures during the invoke phase"). The runtime is a process, and when a process
        ends all of its open file descriptors are closed (POSIX `_exit`): its sockets with them. So
        a host sees the connection closed at the environment's end, as it sees a live caller hang
        up at its call's timeout, and is busy no longer, even one that would answer past the lease.
        """
        self.dead.add(cpu)
        ended = min(self.engine.now, self._deadline.get(cpu, math.inf))
        for busy in self.connections.pop(cpu, []):
            busy.end = min(busy.end, ended)

    def deadline(self) -> float:
        """When Lambda's timeout ends the running function (never, outside one)."""
        cpu = self.cpu_of()
        return self._deadline.get(cpu, math.inf) if cpu is not None else math.inf

    def time_left_s(self) -> float:
        """The running invocation's time left, as its context's `get_remaining_time_in_millis` says
        (on Lambda's own clock, not the environment's skewed one); unlimited outside one."""
        return self.deadline() - self.engine.now

    def before_request(self, place: str) -> None:
        """What `wakeup.aws.client`'s clients check before each request (botocore's `before-call`):
        `NoTimeForRequestError` when its retries could outlast the invocation's time left."""
        check_request(self.time_left_s(), place)

    def past_deadline(self, at: str) -> None:
        """Ends the running function if Lambda's timeout passed during what it just did."""
        cpu = self.cpu_of()
        if cpu is not None and cpu in self._function and self.engine.now >= self._deadline[cpu]:
            self.environment_ends(cpu)
            self.watch.natural_timeouts += 1
            self.note(f"{self._function[cpu]} reached Lambda's timeout before {at}", injected=False)
            raise Died(self._function[cpu])

    # -- AWS requests ----------------------------------------------------------------------------

    def fault(self, place: str, attempt: int) -> Exception | None:
        """The failure of this attempt before it applies (its time waited out), or None."""
        if getcurrent() in self.quiet:
            return None
        if not attempt:
            self.requests[place] += 1
        run = self._run(place, attempt)
        if run is None or run[0] is Kind.LOST:
            return None
        run[1] -= 1
        kind: Kind = run[0]
        self._last_kind[getcurrent()] = kind
        self.note(f"{place} {kind.value}", self._first_hit(place))
        if kind is Kind.TIMEOUT:
            self.engine.sleep(READ_TIMEOUT_S)
        return _failure(kind, place)

    def reply_lost(self, place: str) -> Exception | None:
        """After the request applied: the timeout its lost reply becomes, or None."""
        if getcurrent() in self.quiet:
            return None
        run = self._runs.get((getcurrent(), place))
        if run is None or run[0] is not Kind.LOST or run[1] <= 0:
            return None
        run[1] -= 1
        self._last_kind[getcurrent()] = Kind.LOST
        self.note(f"{place} {Kind.LOST.value}", self._first_hit(place))
        self.engine.sleep(READ_TIMEOUT_S)
        return _failure(Kind.LOST, place)

    def _first_hit(self, place: str) -> bool:
        key = (getcurrent(), place)
        if key in self._request_hit:
            return False
        self._request_hit.add(key)
        return True

    def _run(self, place: str, attempt: int) -> list[Any] | None:
        key = (getcurrent(), place)
        if not attempt:
            self._request_hit.discard(key)  # a new request
        run = self._runs.get(key)
        if run is not None and run[1] > 0:
            return run
        if attempt:
            return None
        kind = self.draws(place, AWS_KINDS)
        if kind is None:
            self._runs.pop(key, None)
            return None
        run = self._runs[key] = [kind, self.rng.choice(RUNS)]
        return run

    def backoff_s(self, service: str, attempt: int) -> float:
        """botocore's wait before attempt `attempt + 1`, by the kind the last attempt met."""
        throttled = self._last_kind.get(getcurrent()) is Kind.THROTTLE
        scale = THROTTLE_SCALE_S if throttled else SCALE_S.get(service, 0.05)
        return self.rng.random() * min(scale * 2.0 ** (attempt - 1), BACKOFF_CAP_S)

    def request(self, place: str, latency_s: float, send: Callable[[], T]) -> T:
        """One request as botocore's standard mode makes it, faults injected; a 4xx is not retried."""
        error: Exception | None = None
        for attempt in range(ATTEMPTS):
            self.point(place)
            error = self.fault(place, attempt)
            if error is None:
                try:
                    answer = send()
                except ClientError as refused:
                    # As botocore reports it: how many times the request was sent before this reply.
                    metadata: dict[str, Any] = dict(refused.response.get("ResponseMetadata", {}))
                    refused.response["ResponseMetadata"] = {**metadata, "RetryAttempts": attempt}  # type: ignore[typeddict-item]
                    raise
                error = self.reply_lost(place)
                if error is None:
                    return answer
            elif not isinstance(error, ReadTimeoutError):
                self.engine.sleep(latency_s)
            if attempt + 1 < ATTEMPTS:
                self.engine.sleep(self.backoff_s(place.split(":")[0], attempt + 1))
        assert error is not None
        raise error

    # -- the secret's cache ------------------------------------------------------------------------

    secrets: "FaultySecrets | None" = None

    def secrets_cache_drop(self, cpu: Cpu) -> None:
        if self.secrets is not None:
            self.secrets.cache.pop(cpu, None)


class FaultyIo(Io):
    """DynamoDB's `Io`, with the row's faults at each attempt (and the function's points); each
    attempt of a call's record kept by `records` (what it met, when it applied)."""

    def __init__(self, inner: Io, faults: FaultInjector, records: Records | None = None) -> None:
        self.inner = inner
        self.faults = faults
        self.records = records or Records(faults)

    def request(self, operation: str) -> None:
        self.faults.point(f"dynamodb:{operation}")
        self.records.begin(operation)
        self.inner.request(operation)

    def admit(self, reads: float, writes: int, index_writes: list[tuple[str, Any, int]]) -> bool:
        admitted = self.inner.admit(reads, writes, index_writes)
        self.records.end(failed=not admitted)  # the table's own throttle
        return admitted

    def backoff(self, attempt: int) -> None:
        if self.faults._last_kind.pop(getcurrent(), Kind.THROTTLE) is Kind.THROTTLE:
            self.inner.backoff(attempt)  # a throttle, injected or the table's own
        else:
            self.faults.engine.sleep(self.faults.backoff_s("dynamodb", attempt))
        self.records.end()  # a failed request is seen by its client after its last backoff

    def fault(self, operation: str, attempt: int) -> Exception | None:
        error = self.faults.fault(f"dynamodb:{operation}", attempt)
        if error is not None:
            self.records.end(failed=True)
        return error

    def reply_lost(self, operation: str) -> Exception | None:
        self.records.applied()  # asked only of an attempt that reached the table and, a write, applied
        error = self.faults.reply_lost(f"dynamodb:{operation}")
        self.records.end()
        return error


class FaultyClient:
    """An SQS or Scheduler client of the simulation, its requests made through `FaultInjector.request`;
    what is delivered twice, late or out of order is `wakeup_sim.fault_hooks.Deliveries`'."""

    def __init__(
        self, inner: Any, service: str, faults: FaultInjector, latency_s: float, deliveries: Any = None
    ) -> None:
        self.inner, self.service, self.faults, self.latency_s = inner, service, faults, latency_s
        self.deliveries = deliveries

    def __getattr__(self, name: str) -> Any:
        method = getattr(self.inner, name)
        operation = "".join(part.capitalize() for part in name.split("_"))
        place = f"{self.service}:{operation}"

        def call(**kwargs: Any) -> Any:
            self.faults.before_request(place)
            kind = self.faults.draws(place, DELIVERY_KINDS) if self.deliveries is not None else None
            send = (lambda: method(**kwargs)) if kind is None else self.deliveries.send(place, kind, method, kwargs)
            return self.faults.request(place, self.latency_s, send)

        return call


class TimedClient:
    """The store's DynamoDB client as `wakeup.aws.client` makes it: each request first checked
    against the invocation's time left (`FaultInjector.before_request`), before its first attempt;
    a record's request not sent for it is kept by `records`."""

    def __init__(self, inner: Any, faults: FaultInjector, records: Records | None = None) -> None:
        self.inner, self.faults, self.records = inner, faults, records or Records(faults)

    def __getattr__(self, name: str) -> Any:
        method = getattr(self.inner, name)
        operation = "".join(part.capitalize() for part in name.split("_"))
        place = f"dynamodb:{operation}"

        def call(**kwargs: Any) -> Any:
            try:
                self.faults.before_request(place)
            except NoTimeForRequestError:
                self.records.not_sent(operation)
                raise
            return method(**kwargs)

        setattr(self, name, call)  # made once a method
        return call


class _EnvironmentLocks:
    """`SigningKeys`' lock, one per execution environment (each has its own `SigningKeys`, made
    once a process), for tasks on virtual time: one reads the secret, the environment's others
    wait for it (a thread's lock would stop the one thread every task runs in)."""

    def __init__(self, engine: Engine, cpu_of: Callable[[], Cpu | None]) -> None:
        self.engine, self.cpu_of = engine, cpu_of
        self.held: set[Cpu | None] = set()
        self.waiting: dict[Cpu | None, list[Callable[[], None]]] = defaultdict(list)
        self._mine: dict[Any, Cpu | None] = {}  # task -> the environment whose lock it holds

    def __enter__(self) -> None:
        cpu = self.cpu_of()
        while cpu in self.held:
            self.waiting[cpu].append(self.engine.park())
            self.engine.wait_parked()
        self.held.add(cpu)
        self._mine[getcurrent()] = cpu

    def __exit__(self, *_: object) -> None:
        cpu = self._mine.pop(getcurrent())
        self.held.discard(cpu)
        if self.waiting[cpu]:
            self.waiting[cpu].pop(0)()


class FaultySecrets:
    """Powertools' `SecretsProvider` as the caller uses it: the master key cached per execution
    environment for `max_age`, read by GetSecretValue when not; any failure is Powertools'
    `GetParameterError`."""

    def __init__(self, value: str, faults: FaultInjector) -> None:
        self.value = value
        self.faults = faults
        self.cache: dict[Cpu, float] = {}  # environment -> when its cached value expires
        faults.secrets = self

    def get(self, name: str, max_age: int = 0) -> str:
        cpu = self.faults.cpu_of()
        now = self.faults.engine.now
        if cpu is not None and self.cache.get(cpu, -1.0) > now:
            return self.value
        place = "secretsmanager:GetSecretValue"
        try:
            self.faults.before_request(place)
            value = self.faults.request(place, SECRETS_LATENCY_S, lambda: self.value)
        except (ClientError, BotoCoreError) as exc:  # Powertools wraps any error of its read so
            raise GetParameterError(str(exc)) from exc
        if cpu is not None:
            self.cache[cpu] = self.faults.engine.now + max_age
        return value


def signing_keys(engine: Engine, faults: FaultInjector, master: str, secret_id: str) -> SigningKeys:
    keys = SigningKeys(FaultySecrets(master, faults), secret_id)
    keys._reading = _EnvironmentLocks(engine, faults.cpu_of)  # type: ignore[assignment]
    return keys


def wake_key(headers: Mapping[str, str] | None) -> tuple[str, str]:
    """(instance, registration) from a call's `webhook-id` (`wake_{instance}_{reg}`)."""
    assert headers, "the simulated caller signs every call"
    _, instance_id, reg = headers["webhook-id"].split("_")[:3]
    return instance_id, reg


class FaultyHosts:
    """The caller's host call, with the row's host faults, and the watch's account of each call
    as its host sees it: on the true clock, busy from the call's start until it answers or its
    connection is gone."""

    def __init__(
        self,
        inner: Callable[..., CallOutcome],
        faults: FaultInjector,
        reregister: Callable[[str], None] = lambda _: None,
    ) -> None:
        self.inner, self.faults, self.reregister = inner, faults, reregister

    def call(
        self, url: str, instance_id: str, timeout_s: float, signature_headers: Mapping[str, str] | None = None
    ) -> CallOutcome:
        faults, watch, engine = self.faults, self.faults.watch, self.faults.engine
        faults.point("the host call")
        key = wake_key(signature_headers)
        faults.requests[HOST] += 1
        task = getcurrent()
        note = CallNote(key, signature_headers["webhook-id"] if signature_headers else "")
        faults.call_note[task] = note
        started = engine.now
        watch.calls += 1
        at = watch.registered_at.get(key)
        # On the true clock, not the caller's; to the microsecond the service's clock reads in
        # (the simulated time is a float, its `datetime` rounds to the nearest microsecond).
        if at is not None and started < at - CLOCK_RESOLUTION_S:
            watch.early += 1
        self._duplicate(note)
        kind = faults.draws(HOST, (*HOST_KINDS, Kind.REREGISTERS))
        busy = None
        cpu = faults.cpu_of()
        if kind not in (Kind.DNS, Kind.CONNECT):  # those never reach the host
            busy = self._starts(instance_id, key[1], started)
            if cpu is not None:
                # The connection closes at the latest when the environment ends (`environment_ends`).
                busy.deadline = faults.deadline()
                faults.connections[cpu].append(busy)
        try:
            if kind is None or kind is Kind.REREGISTERS:
                if kind is Kind.REREGISTERS:
                    faults.note(f"{HOST} {kind.value}", hit=False)
                    self.reregister(instance_id)  # while its call is under way
                outcome = self.inner(url, instance_id, timeout_s, signature_headers)
                note.host_2xx = outcome.ok
            else:
                faults.note(f"{HOST} {kind.value}", hit=False)  # its cost is the failed call's
                outcome = self._faulty(kind, timeout_s, note)
        finally:
            if busy is not None:
                # The caller's answer, or its hang-up at the timeout (a host answering past the
                # lease is still at work then, its connection gone); earlier if the caller's
                # environment ended during the call (`FaultInjector.environment_ends`).
                busy.end = min(busy.end, engine.now)
                if cpu is not None and busy in faults.connections.get(cpu, ()):
                    faults.connections[cpu].remove(busy)
        faults.past_deadline("the host call's end")  # it ran past: the environment ended during it
        note.seen = outcome.ok
        if note.host_2xx:
            watch.answered[key] = note
            watch.woken.setdefault(key, started)
        if outcome.ok:
            watch.first_2xx.setdefault(key, started)
        return outcome

    def _starts(self, instance_id: str, reg: str, now: float) -> Busy:
        """The host's new call: a concurrent one if it is busy with the same registration, an
        overlapping one if with another."""
        watch = self.faults.watch
        calls = watch.busy[instance_id] = [b for b in watch.busy[instance_id] if b.until() > now]
        if any(b.reg == reg for b in calls):
            watch.concurrent += 1
        elif calls:
            watch.overlapping += 1
        busy = Busy(reg, now)
        calls.append(busy)
        return busy

    def _duplicate(self, note: CallNote) -> None:
        """A call after the host answered this registration 2xx: allowed after a 2xx the caller
        could not see, a death before its record, or a record no attempt could write within the
        lease (`RecordLog.lapsed`), else put down to what the first call met."""
        watch = self.faults.watch
        answered = watch.answered.get(note.key)
        if answered is None:
            return
        if answered.webhook_id != note.webhook_id:
            watch.new_ids += 1
        if not answered.seen:
            watch.duplicates[UNSEEN] += 1
        elif answered.died:
            watch.duplicates[DIED] += 1
        elif answered.record.lapsed(self.faults.engine.now):
            watch.duplicates[UNRECORDED] += 1
        else:
            watch.unexplained[" + ".join(dict.fromkeys(answered.faults)) or "no fault"] += 1

    def _faulty(self, kind: Kind, timeout_s: float, note: CallNote) -> CallOutcome:
        engine = self.faults.engine
        timed_out = CallOutcome(None, f"timed out after {timeout_s:g} s")
        if kind is Kind.RESET:
            engine.sleep(0.1)
            note.host_2xx = True  # it answered; its reply was cut
            return CallOutcome(None, "connection reset")
        engine.sleep(timeout_s)
        # 2xx after the timeout, or past the lease: the host woke, the caller saw a timeout.
        note.host_2xx = kind in (Kind.LATE, Kind.SLOW)
        return timed_out


def watch_deliveries(faults: FaultInjector, deliver: Callable[[Trigger, Origin], Delivery]) -> Callable[..., Delivery]:
    """The caller's `deliver`, with the trigger's wake as its task's context; a call whose
    function died after it is noted so, and a failed attempt with its count of failures."""

    def watched(trigger: Trigger, source: Origin) -> Delivery:
        task = getcurrent()
        faults.context[task] = trigger.instance_id
        faults.context_cpu[task] = faults.cpu_of()
        try:
            delivery = deliver(trigger, source)
            if delivery.result in (Result.FAILED, Result.GIVEN_UP):
                faults.watch.failed_attempts[trigger.instance_id].append(trigger.attempt + 1)
            return delivery
        except Died:
            note = faults.call_note.get(task)
            if note is not None:
                note.died = True
            raise
        finally:
            faults.context.pop(task, None)
            faults.context_cpu.pop(task, None)
            faults.call_note.pop(task, None)

    return watched


def watch_registrations(
    faults: FaultInjector, register: Callable[[str, datetime, str, Any], Any]
) -> Callable[..., Any]:
    """The store's `register_wake`, noting each registration's time as the table keeps it, and
    the registration its task wrote (what the client's 2xx, if it gets one, is for)."""

    def watched(instance_id: str, at: datetime, reg: str, window: Any = None) -> Any:
        stored = datetime.fromisoformat(format_time(at)).timestamp()
        faults.watch.registered_at[(instance_id, reg)] = stored
        faults.registered[getcurrent()] = (instance_id, reg)
        return register(instance_id, at, reg, window)

    return watched


def owed(watch: Watch, instance_id: str) -> set[str]:
    """The registrations of which the client is owed one wake: its last 2xx's, and any other it
    got a 2xx for whose request overlapped it. A client that sends a registration before the reply
    to its previous one has no order between the two: the table may apply either last, and both
    answers are true (each was written). One acknowledged before another was sent is over."""
    acked = watch.acked.get(instance_id)
    if acked is None:
        return set()
    acks = watch.acks.get(instance_id, [])
    latest_sent = max((sent for sent, _, _ in acks), default=-math.inf)
    return {acked[1]} | {reg for _, at, reg in acks if at >= latest_sent}


def watch_acknowledgements(faults: FaultInjector, function: Function) -> None:
    """The wake function, as its client sees it: an invocation that returns is the route's 2xx,
    for the registration it wrote (the latest 2xx is the wake the client is owed)."""
    inner = function.handler

    def handler(payload: Any) -> Any:
        task = getcurrent()
        faults.registered.pop(task, None)
        sent = faults.engine.now
        result = inner(payload)
        written = faults.registered.pop(task, None)
        if written is not None:
            faults.acknowledge(*written, sent=sent)
        return result

    function.handler = handler


def skewed_clock(
    faults: FaultInjector, true_clock: Callable[[], datetime], rng: random.Random
) -> Callable[[], datetime]:
    """The clock the service reads: in each execution environment, the true time off by that
    environment's own skew (drawn once, evenly within `CLOCK_SKEW_S`); the true time elsewhere."""
    skews: dict[Cpu, timedelta] = {}

    def clock() -> datetime:
        now = true_clock()
        cpu = faults.cpu_of()
        if cpu is None:
            return now
        skew = skews.get(cpu)
        if skew is None:
            skew = skews[cpu] = timedelta(seconds=rng.uniform(-CLOCK_SKEW_S, CLOCK_SKEW_S))
        return now + skew

    return clock


def trigger_bodies(bodies: list[str]) -> set[tuple[str, str, int]]:
    """(instance, reg, attempt) of each trigger's body."""
    found = set()
    for body in bodies:
        trigger = json.loads(body)
        found.add((trigger["instance_id"], trigger["reg"], trigger["attempt"]))
    return found


def watch_sweeps(faults: FaultInjector, store: Any) -> None:
    """The store's `overdue` and `postpone`, as the sweeper calls them: the shard it sweeps, and the
    wake it re-arms (from its `postpone` to its next step), are its task's context."""
    overdue, postpone = store.overdue, store.postpone

    def watched_overdue(shard: int, before: datetime) -> Any:
        faults.context.pop(getcurrent(), None)
        faults.shard[getcurrent()] = shard
        return overdue(shard, before)

    def watched_postpone(trigger: Trigger, due: datetime, now_ms: int) -> bool:
        faults.context[getcurrent()] = trigger.instance_id
        return bool(postpone(trigger, due, now_ms))

    store.overdue, store.postpone = watched_overdue, watched_postpone
