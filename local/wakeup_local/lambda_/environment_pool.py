"""A function's execution environments: reused while warm, started when none is free, bounded.

As Lambda scales a function (https://docs.aws.amazon.com/lambda/latest/dg/lambda-concurrency.html):
an invocation takes a free (warm) environment, or else a new one is started for it (a cold start),
up to the function's concurrency. Environments idle for `idle_s` are stopped.

At the bound, Lambda throttles. A function with `ReservedConcurrentExecutions` in the template is
throttled here too for synchronous callers (`throttle=True`, the HTTP API: Lambda answers 429
`TooManyRequestsException` "Rate Exceeded.", which API Gateway turns into a 500 of its own, see
"Handle Lambda errors in API Gateway":
https://docs.aws.amazon.com/lambda/latest/dg/services-apigateway-errors.html). Event sources
(the SQS poller, the Scheduler) wait for a free environment instead: Lambda retries their throttled
invocations. Without a reservation the bound is a local stand-in for the account's concurrency (a
setting, since every environment here is a process on one machine), and every invocation over it
waits for a free environment rather than fail where AWS would have had room.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from wakeup_local.lambda_.environment import EnvironmentGone, ExecutionEnvironment

log = logging.getLogger(__name__)


class Throttled(Exception):
    """Raised for a synchronous invocation when the function's reserved concurrency is in use."""

    def __init__(self) -> None:
        super().__init__("TooManyRequestsException: Rate Exceeded.")


class EnvironmentPool:
    """The environments of one function; `invoke` is thread-safe."""

    def __init__(
        self,
        make_environment: Callable[[], ExecutionEnvironment],
        concurrency: int,
        *,
        reserved: bool,
        idle_s: float,
    ) -> None:
        self._make = make_environment
        self.concurrency = concurrency
        self.reserved = reserved
        self.idle_s = idle_s
        self._free: list[ExecutionEnvironment] = []
        self._busy: set[ExecutionEnvironment] = set()
        self._starting = 0
        self._changed = threading.Condition()
        self._stopped = False

    @property
    def size(self) -> int:
        """Environments running or starting."""
        with self._changed:
            return len(self._free) + len(self._busy) + self._starting

    def pids(self) -> list[int]:
        """The live environments' processes."""
        with self._changed:
            return [environment.pid for environment in (*self._free, *self._busy) if environment.alive]

    def invoke(self, payload: bytes, *, throttle: bool = False) -> bytes:
        while True:
            environment = self._acquire(throttle)
            try:
                return environment.invoke(payload)
            except EnvironmentGone:
                continue  # it died idle after it was taken: nothing ran, another one gets the invocation
            finally:
                self._release(environment)

    def stop_idle(self, now: float | None = None) -> int:
        """Stops the environments idle for `idle_s` or longer; returns how many."""
        now = time.monotonic() if now is None else now
        with self._changed:
            self._drop_dead()
            expired = [env for env in self._free if now - env.last_used >= self.idle_s]
            self._free = [env for env in self._free if env not in expired]
        for environment in expired:
            environment.stop()
        return len(expired)

    def stop(self) -> None:
        """Stops every environment, the busy ones too (their invocations fail)."""
        with self._changed:
            self._stopped = True
            environments = [*self._free, *self._busy]
            self._free.clear()
            self._changed.notify_all()
        for environment in environments:
            environment.stop()

    def _acquire(self, throttle: bool) -> ExecutionEnvironment:
        with self._changed:
            while True:
                if self._stopped:
                    raise RuntimeError("the local stack is stopping")
                self._drop_dead()
                if self._free:
                    environment = self._free.pop()  # the most recently used: the others may idle out
                    self._busy.add(environment)
                    return environment
                if len(self._busy) + self._starting < self.concurrency:
                    self._starting += 1
                    break
                if (throttle and self.reserved) or self.concurrency == 0:
                    raise Throttled()
                self._changed.wait()
        environment = self._make()
        try:
            environment.start()
        except BaseException:
            with self._changed:
                self._starting -= 1
                self._changed.notify()
            raise
        with self._changed:
            self._starting -= 1
            self._busy.add(environment)
            if self._stopped:
                self._busy.discard(environment)
                environment.stop()
                raise RuntimeError("the local stack is stopping")
        return environment

    def _drop_dead(self) -> None:
        """Forgets free environments whose process exited (killed, out of memory) while idle: a
        new one is started in their place when needed. Called with the lock held."""
        dead = [environment for environment in self._free if not environment.alive]
        if dead:
            self._free = [environment for environment in self._free if environment.alive]
            for environment in dead:
                threading.Thread(target=environment.stop, name="environment-stop", daemon=True).start()

    def _release(self, environment: ExecutionEnvironment) -> None:
        with self._changed:
            self._busy.discard(environment)
            if environment.alive and not self._stopped:
                self._free.append(environment)
            self._changed.notify()
        if not environment.alive:
            environment.stop()  # a timed-out or crashed environment is replaced by a new one
