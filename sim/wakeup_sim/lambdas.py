"""Lambda: execution environments, cold starts, concurrency, and asynchronous invocation.

- "Understanding Lambda function scaling": one invocation at a time per execution environment; an
  invocation takes an idle environment or starts one (init, then the handler); the account's
  concurrency (1,000 by default) bounds all functions together.
- "Lambda scaling behavior": a function gains at most 1,000 environments every 10 seconds.
- "How Lambda handles errors and retries with asynchronous invocation": an event is queued; a
  throttled one retried from 1 s, doubling up to 5 minutes; a failing one retried twice, after
  one and two minutes.
- Billing ("AWS Lambda pricing"): the handler's duration and, since August 2025, the init phase.
- A cold start (`deployment.py` names each figure's source): an on-demand function's init runs with
  its CPU unthrottled, its one-vCPU time at every memory (published measurements; AWS does not
  document it, so `init_unthrottled` False runs the other end); the handler's own work, the first
  call's lazy setup included, at the memory's share of a vCPU ("Configure Lambda function memory");
  a re-init after a crash or a timeout at the memory's share too (`faults.py` replaces a dead
  environment so).
- A configuration change ("Lambda function states": `LastUpdateStatus` InProgress while it
  applies, invocations meanwhile run the previous configuration, a second update refused; memory
  is fixed per environment, "Understanding the Lambda execution environment lifecycle"): once it
  completes, no environment made before it serves another invocation.
"""

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from wakeup_awsfacts import quotas
from wakeup_awsfacts.lambda_async import AsyncRetries, after_throttle
from wakeup_awsfacts.token_bucket import TokenBucket
from wakeup_sim import deployment as aws
from wakeup_sim.engine import Cpu, Engine, Machine
from wakeup_sim.throughput import Cpus

# Lambda's retries of an asynchronous event: two, as the caller's `EventInvokeConfig` keeps them.
ASYNC_RETRIES = AsyncRetries()


class Throttled(Exception):
    """The account (or the function's scaling rate) has no concurrency for this invocation now."""


class UpdateInProgress(Exception):
    """An `UpdateFunctionConfiguration` while another applies: Lambda's ResourceConflictException."""


@dataclass
class Account:
    limit: int
    in_use: int = 0
    peak: int = 0


@dataclass
class Environment:
    cpu: Cpu
    idle_since: float = 0.0
    # The function's configuration it was made with (`Function.configuration`).
    configuration: int = 0
    # Its first invocation done (the handler's lazy setup, its SDK clients' first request, behind it).
    set_up: bool = False


@dataclass
class Function:
    """One Lambda function: `handler(payload)` runs in an environment, in the invoking task."""

    engine: Engine
    cpus: Cpus
    account: Account
    name: str
    memory_mb: int
    handler: Callable[[Any], Any]
    init_s_at_one_vcpu: float = aws.INIT_S_AT_ONE_VCPU
    invocation_cpu_s: float = aws.INVOCATION_CPU_S
    # The first invocation's lazy setup in an environment, at one vCPU (run at the memory's share).
    first_call_cpu_s: float = aws.FIRST_CALL_CPU_S
    # On-demand init at its one-vCPU time whatever the memory (False: at the memory's share).
    init_unthrottled: bool = aws.INIT_UNTHROTTLED
    # On one machine (the local stack): its environments are processes sharing its cores, each
    # up to a full core.
    machine: Machine | None = None
    # What a cold start does beyond its init's CPU, in the environment (the local stack's caller
    # reads its signing keys and makes its clients on its first invocation): None, nothing.
    on_cold_start: Callable[[], None] | None = None
    # Lambda reclaims an environment idle this long (None: never). AWS names no time (the Shutdown
    # phase of "Understanding the Lambda execution environment lifecycle"): a scenario that needs it
    # sets it, an assumption.
    reclaim_idle_s: float | None = None
    idle: list[Environment] = field(default_factory=list)
    running: int = 0
    peak: int = 0
    invocations: int = 0
    billed_s: float = 0.0
    cold_starts: int = 0
    errors: int = 0
    # Configurations completed (each `update_memory` once applied), and the one applying now.
    configuration: int = 0
    updating_until: float | None = None
    _scaling: TokenBucket | None = None

    @property
    def vcpus(self) -> float:
        return 1.0 if self.machine is not None else min(self.memory_mb / quotas.MB_PER_VCPU, 1.0)

    def _environment(self) -> Environment:
        return Environment(Cpu(self.engine, self.vcpus, self.machine), configuration=self.configuration)

    def warm(self, count: int) -> None:
        """Environments already initialised and invoked (a function that served recently)."""
        for _ in range(count):
            environment = self._environment()
            environment.set_up, environment.idle_since = True, self.engine.now
            self.idle.append(environment)

    def init_s(self) -> float:
        """How long a cold start's init takes (on demand): its one-vCPU time, unthrottled, or at the
        memory's share without the boost."""
        return self.init_s_at_one_vcpu if self.init_unthrottled else self.init_s_at_one_vcpu / self.vcpus

    def update_memory(self, memory_mb: int, takes_s: float) -> None:
        """`UpdateFunctionConfiguration` of the memory, applying for `takes_s`: invocations meanwhile
        run the previous configuration; once applied, every invocation needs a new environment."""
        if self.updating_until is not None:
            raise UpdateInProgress(self.name)
        self.updating_until = self.engine.now + takes_s
        self.engine.at(self.updating_until, self._apply_memory, memory_mb)

    def _apply_memory(self, memory_mb: int) -> None:
        self.memory_mb = memory_mb
        self.configuration += 1
        self.updating_until = None
        self.idle.clear()  # each made with the previous configuration

    def invoke(self, payload: Any, hops: int = 0) -> Any:
        """A synchronous invocation from a task: the handler's result, or its exception raised.
        `hops`: how many SQS-invoked invocations of this function led to this one."""
        if self.account.in_use >= self.account.limit:
            raise Throttled(self.name)
        if self.reclaim_idle_s is not None and self.idle:
            # `idle` is in the order the environments went idle (an invocation takes the last): the
            # reclaimed are its first.
            kept_since = self.engine.now - self.reclaim_idle_s
            reclaimed = 0
            while reclaimed < len(self.idle) and self.idle[reclaimed].idle_since < kept_since:
                reclaimed += 1
            del self.idle[:reclaimed]
        if not self.idle:
            if self._scaling is None:
                self._scaling = TokenBucket(quotas.SCALING_ENVIRONMENTS_PER_S, quotas.SCALING_BURST, self.engine.now)
            if not self._scaling.take(1, self.engine.now):
                raise Throttled(self.name)
        self.account.in_use += 1
        self.account.peak = max(self.account.peak, self.account.in_use)
        self.running += 1
        self.peak = max(self.peak, self.running)
        self.invocations += 1
        started = self.engine.now
        cold = not self.idle
        if cold:
            self.cold_starts += 1
            environment = self._environment()
            # Init's time whatever the environment's share: `use` divides by its speed.
            environment.cpu.use(self.init_s() * environment.cpu.speed)
        else:
            environment = self.idle.pop()
        self.cpus.bind(environment.cpu, hops)
        try:
            if cold and self.on_cold_start is not None:
                self.on_cold_start()
            if not environment.set_up:
                environment.set_up = True
                environment.cpu.use(self.first_call_cpu_s)
            environment.cpu.use(self.invocation_cpu_s)
            return self.handler(payload)
        except Exception:
            self.errors += 1
            raise
        finally:
            self.cpus.unbind()
            self.billed_s += self.engine.now - started
            self.running -= 1
            self.account.in_use -= 1
            environment.idle_since = self.engine.now
            if environment.configuration == self.configuration:
                self.idle.append(environment)

    def invoke_async(self, payload: Any) -> None:
        """Queues an event, as Scheduler's invocation does; retried as Lambda retries it
        (`wakeup_awsfacts.lambda_async`)."""
        self.engine.spawn(self._run_event, payload, 0, 0)

    def _run_event(self, payload: Any, throttles: int, errors: int) -> None:
        try:
            self.invoke(payload)
        except Throttled:
            when = after_throttle(throttles + 1, self.engine.now)
            self.engine.spawn(self._run_event, payload, throttles + 1, errors, when=when)
        except Exception:
            retry_at = ASYNC_RETRIES.after_error(errors + 1, self.engine.now)
            if retry_at is not None:
                self.engine.spawn(self._run_event, payload, 0, errors + 1, when=retry_at)


def invocations(functions: list[Function]) -> Counter[str]:
    return Counter({f.name: f.invocations for f in functions})
