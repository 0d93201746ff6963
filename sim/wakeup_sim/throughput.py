"""The processor each task runs on, and the time and admission of each DynamoDB request (within
the table's and each partition's token buckets, `wakeup_awsfacts.token_bucket`)."""

import random
from collections import defaultdict
from collections.abc import Callable
from typing import Any

from greenlet import getcurrent

from wakeup_awsfacts.dynamodb import PARTITION_WRITE_UNITS_PER_S
from wakeup_awsfacts.token_bucket import TokenBucket
from wakeup_sim.deployment import Deployment
from wakeup_sim.dynamodb import Io
from wakeup_sim.engine import Cpu, Engine
from wakeup_sim.profile import AWS, Profile


class Cpus:
    """Which execution environment's processor the running task uses (none: the caller is AWS),
    and how many SQS-invoked hops led to it (what Lambda's recursive loop detection counts)."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._by_task: dict[Any, tuple[Cpu, int]] = {}

    def bind(self, cpu: Cpu, hops: int = 0) -> None:
        self._by_task[getcurrent()] = (cpu, hops)

    def unbind(self) -> None:
        self._by_task.pop(getcurrent(), None)

    def current(self) -> tuple[Cpu, int] | None:
        return self._by_task.get(getcurrent())

    def hops(self) -> int:
        found = self._by_task.get(getcurrent())
        return found[1] if found else 0

    def use(self, seconds_at_one_vcpu: float, then_s: float = 0.0) -> None:
        """The running task's CPU work, then `then_s` of waiting (a round trip), in one wait."""
        found = self._by_task.get(getcurrent())
        if found is not None:
            found[0].use(seconds_at_one_vcpu, then_s)
        elif then_s:
            self.engine.sleep(then_s)


class DynamoDbIo(Io):
    """A request costs the caller's CPU and a round trip; DynamoDB admits it within the table's
    throughput and each partition key's in its indexes (an index that cannot take its write
    throttles the table's write: "back-pressure", DynamoDB developer guide)."""

    def __init__(
        self,
        engine: Engine,
        cpus: Cpus,
        deployment: Deployment,
        rng: random.Random,
        profile: Profile = AWS,
        service: Cpu | None = None,
    ) -> None:
        self.engine, self.cpus, self.rng = engine, cpus, rng
        self._request = timed(engine, cpus, profile.dynamodb_latency_s, rng, profile, service)
        self.writes = TokenBucket(deployment.table_write_units_per_s, deployment.table_write_units_per_s, engine.now)
        self.reads = TokenBucket(deployment.table_read_units_per_s, deployment.table_read_units_per_s, engine.now)
        rate = PARTITION_WRITE_UNITS_PER_S
        self.partitions: dict[tuple[str, Any], TokenBucket] = defaultdict(
            lambda: TokenBucket(rate, rate, self.engine.now)
        )

    def request(self, operation: str) -> None:
        self._request(operation)

    def admit(self, reads: float, writes: int, index_writes: list[tuple[str, Any, int]]) -> bool:
        now = self.engine.now
        if reads and not self.reads.take(reads, now):
            return False
        if writes and not self.writes.take(writes, now):
            return False
        return all(self.partitions[(name, key)].take(units, now) for name, key, units in index_writes)

    def backoff(self, attempt: int) -> None:
        # botocore's standard mode: a random wait up to 2^(attempt-1) seconds, at most 20 s.
        self.engine.sleep(self.rng.random() * min(2 ** (attempt - 1), 20))


def timed(
    engine: Engine,
    cpus: Cpus,
    latency_s: float,
    rng: random.Random,
    profile: Profile = AWS,
    service: Cpu | None = None,
) -> Callable[[str], None]:
    """A request to an AWS service: the caller's CPU, the service's own (moto's, on one machine),
    and a round trip."""
    cpu_s = profile.aws_request_cpu_s
    service_cpu_s = profile.service_cpu_s or 0.0

    def request(_: str) -> None:
        round_trip_s = latency_s * (0.7 + 0.6 * rng.random()) if latency_s else 0.0
        if service is None:
            cpus.use(cpu_s, round_trip_s)
        else:
            cpus.use(cpu_s)
            service.use(service_cpu_s, round_trip_s)

    return request
