"""The hosts the wakes call: how fast they answer, which are down, which hang until the timeout.

A host's answer time is drawn from a log-normal distribution (median and spread per scenario).
A host that is down refuses the connection after a round trip; one that hangs never answers, so
the call ends at the service's timeout; a failing host answers 503 until a given time.
"""

import math
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from wakeup.host_call import CallOutcome
from wakeup_sim import deployment as aws
from wakeup_sim.engine import Engine
from wakeup_sim.throughput import Cpus


@dataclass
class Call:
    instance_id: str
    started: float
    ended: float
    ok: bool


@dataclass
class Hosts:
    engine: Engine
    cpus: Cpus
    rng: random.Random
    median_s: float = 0.1
    sigma: float = 0.6
    round_trip_s: float = 0.03
    call_cpu_s: float = aws.HOST_CALL_CPU_S
    down: set[str] = field(default_factory=set)
    hanging: set[str] = field(default_factory=set)
    failing_until: dict[str, float] = field(default_factory=dict)
    calls: dict[str, list[Call]] = field(default_factory=dict)
    in_flight: dict[str, int] = field(default_factory=dict)
    overlaps: int = 0
    on_call: Callable[[Call], None] = lambda call: None

    def call(
        self, url: str, instance_id: str, timeout_s: float, signature_headers: Mapping[str, str] | None = None
    ) -> CallOutcome:
        """`wakeup.host_call.call_wake` as the caller's code sees it: one GET, its outcome."""
        if self.in_flight.get(instance_id, 0):
            self.overlaps += 1
        self.in_flight[instance_id] = self.in_flight.get(instance_id, 0) + 1
        self.cpus.use(self.call_cpu_s)
        started = self.engine.now  # the request leaves: what the host sees, less the network
        if url in self.hanging:
            self.engine.sleep(timeout_s)
            outcome = CallOutcome(None, f"timed out after {timeout_s:g} s")
        elif url in self.down:
            self.engine.sleep(self.round_trip_s)
            outcome = CallOutcome(None, "connection refused")
        else:
            answer = self.median_s * math.exp(self.sigma * self.rng.gauss(0, 1)) if self.sigma else self.median_s
            if answer >= timeout_s:
                self.engine.sleep(timeout_s)
                outcome = CallOutcome(None, f"timed out after {timeout_s:g} s")
            else:
                self.engine.sleep(answer)
                failing = self.failing_until.get(url, 0) > started
                outcome = CallOutcome(503, "HTTP 503") if failing else CallOutcome(200, None)
        self.in_flight[instance_id] -= 1
        call = Call(instance_id, started, self.engine.now, outcome.ok)
        self.calls.setdefault(instance_id, []).append(call)
        self.on_call(call)
        return outcome
