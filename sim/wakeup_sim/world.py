"""One simulated stack: the service's own code wired to the simulated AWS and hosts.

The caller is `wakeup.logic.delivery.Caller` with the simulated clock, sleep and host call; its store is
`MemoryStore`; its triggers are `wakeup.triggers.Triggers` over the simulated SQS and Scheduler. The
wake function runs `wakeup.logic.wakes.register_wake` after the token lookup the route makes; the sweeper
runs `wakeup.logic.sweeper.sweep` every minute. Everything else is AWS, modelled as its documentation says.
"""

import copy
import json
import random
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from wakeup.logic.delivery import Caller, Delivery
from wakeup.logic.sweeper import UnreadShardsError, sweep
from wakeup.logic.wakes import register_wake
from wakeup.model import Origin, Trigger
from wakeup.signing import SigningKeys
from wakeup.tokens import hash_token
from wakeup.triggers import Triggers, parse_trigger
from wakeup_sim.api_gateway import ROUTE, ApiGateway, Registration, register_with_retries
from wakeup_sim.deployment import Deployment
from wakeup_sim.dynamodb import MemoryStore
from wakeup_sim.engine import Cpu, Engine, Machine
from wakeup_sim.event_source import EventSource, for_deployment
from wakeup_sim.hosts import Hosts
from wakeup_sim.lambdas import Account, Function
from wakeup_sim.planner import Pending
from wakeup_sim.profile import AWS, Profile
from wakeup_sim.scheduler import Scheduler
from wakeup_sim.sqs import Message, Queue, SqsClient
from wakeup_sim.throughput import Cpus, DynamoDbIo, timed

SWEEP_EVERY_S = 60.0


class _TaskLock:
    """A `threading.Lock` for the simulation's tasks (greenlets of one thread): a task that finds it
    held waits, parked, for its turn."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.held = False
        self.waiting: deque[Callable[[], None]] = deque()

    def __enter__(self) -> None:
        if self.held:
            self.waiting.append(self.engine.park())
            self.engine.wait_parked()  # handed the lock by the task that held it
        self.held = True

    def __exit__(self, *_: object) -> None:
        if self.waiting:
            self.waiting.popleft()()
        else:
            self.held = False


class _MasterKey:
    """The signing master key, as Powertools' `SecretsProvider` returns it from its cache (read from
    Secrets Manager once per environment and `MASTER_MAX_AGE_S`: left out, as a cold start's cost)."""

    def get(self, name: str, max_age: int = 0) -> str:
        return "sim-master-key-" + "0" * 32


@dataclass
class Wake:
    instance_id: str
    url: str
    token_hash: str
    at: float | None = None
    token: str = ""  # the instance token itself, for the instance routes (its account re-registers it)


@dataclass
class World:
    deployment: Deployment
    start: float
    seed: int = 1
    warm: bool = False
    profile: Profile = AWS
    engine: Engine = field(init=False)
    rng: random.Random = field(init=False)

    def __post_init__(self) -> None:
        self.engine = Engine(self.start)
        self.rng = random.Random(self.seed)
        self.cpus = Cpus(self.engine)
        d, p = self.deployment, self.profile
        # On one machine (the local stack): its cores, moto's process and the stack's own.
        machine = Machine(self.engine, p.cores, p.core_speed, p.background_jobs) if p.cores else None
        service = Cpu(self.engine, 1.0, machine) if p.service_cpu_s is not None else None
        stack_process = Cpu(self.engine, 1.0, machine)
        # (Kept for the calibration's account of where the machine's CPU went.)
        self.service_cpu, self.stack_cpu = service, stack_process
        io = DynamoDbIo(self.engine, self.cpus, d, self.rng, p, service)
        self.store = MemoryStore(d.indexes, io, self.rng)
        self.queue = Queue(self.engine, d.visibility_timeout_s, d.max_receive_count, latency_s=0.0)
        self.account = Account(d.account_concurrency)

        def function(name: str, memory_mb: int, handler: Callable[[Any], Any]) -> Function:
            return Function(
                self.engine,
                self.cpus,
                self.account,
                name,
                memory_mb,
                handler,
                init_s_at_one_vcpu=p.init_cpu_s,
                init_unthrottled=p.init_unthrottled,
                first_call_cpu_s=p.first_call_cpu_s,
                invocation_cpu_s=p.invocation_cpu_s,
                machine=machine,
            )

        self.caller_function = function("CallerFunction", d.caller_memory_mb, self._caller_handler)
        self.wake_function = function("WakeFunction", d.wake_memory_mb, self._wake_handler)
        self.sweeper_function = function("SweeperFunction", d.sweeper_memory_mb, self._sweeper_handler)
        self.functions = [self.caller_function, self.wake_function, self.sweeper_function]
        self.scheduler = Scheduler(
            self.engine,
            self.caller_function,
            d.scheduler_invocations_per_s,
            self.rng,
            timed(self.engine, self.cpus, p.scheduler_latency_s, self.rng, p, service),
        )
        sqs_request = timed(self.engine, self.cpus, p.sqs_latency_s, self.rng, p, service)
        if p.cold_start_requests:
            whole, part = divmod(p.cold_start_requests, 1)

            def cold_start() -> None:
                for _ in range(int(whole) + (self.rng.random() < part)):
                    sqs_request("cold start")

            self.caller_function.on_cold_start = cold_start
        sqs = SqsClient(self.queue, sqs_request, self.cpus.hops)
        self.triggers = Triggers(d.settings, sqs=sqs, scheduler=self.scheduler, clock=self.engine.clock)
        self.hosts = Hosts(
            self.engine, self.cpus, self.rng, median_s=p.host_median_s, sigma=p.host_sigma, call_cpu_s=p.host_call_cpu_s
        )
        self.caller = Caller(
            self.store,
            self.triggers,
            d.settings,
            call=self.hosts.call,
            clock=self.engine.clock,
            sleep=self.engine.sleep,
            # template.yaml gives the caller a signing master key: every call is signed, after a
            # read of the account's signing versions.
            signing=SigningKeys(_MasterKey(), "sim-master-key"),
        )
        self.event_source: EventSource = for_deployment(
            self.engine, self.queue, self.caller_function, d, self.warm, p.scaling
        )
        self.event_source.on_stopped_loop = self._stopped_loop
        self.event_source.receive_latency_s = p.receive_latency_s
        self.event_source.poll_interval_s = p.poll_interval_s
        self.event_source.rng = self.rng
        if p.batch_cpu_s or p.message_cpu_s or p.batch_service_cpu_s:

            def batch_work(size: int) -> None:
                stack_process.use(p.batch_cpu_s + size * p.message_cpu_s)
                if service is not None:
                    service.use(p.batch_service_cpu_s)

            self.event_source.batch_work = batch_work
        self.stopped_loops: list[str] = []
        self.sweeps = 0
        self.api_requests = 0
        self.api = ApiGateway(self.engine, d.api_rate, d.api_burst)
        self.registrations: list[Registration] = []
        self.sweeper_rearmed = 0
        # The pending-wakes index's counts, as the planner reads them (`wakeup_sim.planner`).
        self.pending = Pending()
        self.account_id = self.store.create_account("sim", uuid.uuid4().hex, self.engine.clock()).id
        if self.warm:
            self.caller_function.warm(self.event_source.cap)
        self.event_source.begin()
        self.engine.at(self.start + self.rng.random() * SWEEP_EVERY_S, self._sweep_tick)

    # -- setting up -----------------------------------------------------------------------------

    def instances(self, count: int, url_prefix: str = "https://host") -> list[Wake]:
        made = []
        now = self.engine.clock()
        for index in range(count):
            url = f"{url_prefix}{index}.example"
            token = f"swi_{uuid.UUID(int=self.rng.getrandbits(128)).hex}{index:032d}"
            token_hash = hash_token(token)
            instance = self.store.register_instance(self.account_id, url, token_hash, now).instance
            made.append(Wake(instance.id, url, token_hash, token=token))
        return made

    # -- the functions --------------------------------------------------------------------------

    def _caller_handler(self, payload: Any) -> Any:
        if isinstance(payload, list):
            return self._deliver_batch(payload)
        # Scheduler's invocation: the trigger itself; an exception makes Lambda retry it.
        self.caller.keep_history([self.caller.deliver(parse_trigger(payload), Origin.SCHEDULE)])
        return None

    def _deliver_batch(self, batch: list[Message]) -> set[int]:
        """As caller_handler: every record at once (a thread each there, a task each here)."""
        failed: set[int] = set()
        bound = self.cpus.current()
        assert bound is not None
        left = len(batch)
        done = self.engine.park()
        # As caller_handler: a caller for the invocation, which reads an account's signing versions
        # once. A copy, so that what a fault run set on the world's caller (its `deliver`) holds.
        caller = copy.copy(self.caller)
        caller.versions, caller.versions_lock = {}, _TaskLock(self.engine)
        delivered: list[Delivery] = []

        def deliver(message: Message) -> None:
            nonlocal left
            self.cpus.bind(*bound)
            try:
                delivered.append(caller.deliver(parse_trigger(json.loads(message.body)), Origin.QUEUE))
            except Exception:
                failed.add(message.id)
            finally:
                self.cpus.unbind()
                left -= 1
                if left == 0:
                    done()

        for message in batch:
            self.engine.spawn(deliver, message)
        self.engine.wait_parked()
        caller.keep_history(delivered)  # as caller_handler: the batch's calls together, once all are made
        return failed

    def _wake_handler(self, payload: tuple[Wake, float]) -> None:
        wake, at = payload
        owner = self.store.owner_of(wake.token_hash)
        assert owner is not None and owner.instance_id == wake.instance_id
        register_wake(self.store, self.triggers, wake.instance_id, datetime.fromtimestamp(at, UTC), self.engine.clock())
        self.pending.counts[int(at)] += 1

    def _sweeper_handler(self, _: Any) -> None:
        try:
            result = sweep(self.store, self.triggers, self.deployment.settings, self.engine.clock())
        except UnreadShardsError as unswept:  # the function fails, after sweeping the other shards
            self.sweeper_rearmed += unswept.result.rearmed
            raise
        self.sweeper_rearmed += result.rearmed

    def _sweep_tick(self) -> None:
        self.sweeps += 1
        self.sweeper_function.invoke_async(None)
        self.engine.at(self.engine.now + SWEEP_EVERY_S, self._sweep_tick)

    def _stopped_loop(self, message: Message) -> None:
        self.stopped_loops.append(Trigger(**json.loads(message.body)).instance_id)

    # -- driving --------------------------------------------------------------------------------

    def register(self, wake: Wake, at: float, when: float) -> None:
        """`PUT /wakeup/wake` by the wake's host at `when`, for `at` (epoch seconds): through API
        Gateway's throttling to the wake function, retried by the host until accepted."""
        wake.at = max(at, when)
        registration = Registration(started=when)
        self.registrations.append(registration)

        def send() -> int:
            self.api_requests += 1
            return self.api.request(ROUTE, lambda: self.wake_function.invoke((wake, at), -1))

        self.engine.spawn(register_with_retries, self.engine, send, self.rng.random, registration, when=when)
