"""The promise under faults, on the local stack: every wake is called, none early, none twice at once,
while the caller's environments are killed (idle and mid-batch), moto stops answering for longer
than a call's timeout, and hosts hang and reset their connections.

Slow: what a killed batch held is found again only by the sweeper (its message stays invisible for
the queue's visibility timeout), so the test waits out one sweep after the chaos.
"""

from __future__ import annotations

import os
import random
import signal
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import pytest
from wakes_support import Instances, as_registered, iso

from bench.processes import command
from support.api import Api
from support.host import Call, WakeHost, hang, reset
from support.stack_process import MakeStack, StackProcess
from support.waiting import wait_until

pytestmark = pytest.mark.slow

WAKES = 40
CALL_TIMEOUT_S = 2.0  # the test stacks' WAKEUP_CALL_TIMEOUT_S
# The sweeper looks for wakes overdue by this much (WAKEUP_SWEEP_GRACE_S), every minute.
SWEEP_GRACE_S = 10
# What a wake lost with its batch may take to be called: the sweeper's grace and minute, its
# lease, and the backoff of the host's own failures; with room for a loaded machine.
RECOVERY_S = SWEEP_GRACE_S + 60 + 4 + 8 + 30


@dataclass
class Chaos:
    """Kills the stack's caller environments and pauses its moto, and remembers what it did."""

    stack: StackProcess
    killed: list[int] = field(default_factory=list)
    paused_s: float = 0.0
    _stop: threading.Event = field(default_factory=threading.Event)

    def callers(self) -> list[int]:
        """The caller's environments, as the stack's own count of them has them: running ones."""
        return [pid for pid in self.stack.environment_pids("CallerFunction") if "caller_handler" in command(pid)]

    def moto(self) -> int:
        """The stack's moto, as the stack has it, and a moto indeed."""
        assert "wakeup_local.aws.moto_child" in command(self.stack.moto_pid)
        return self.stack.moto_pid

    def run(self, until: float, pause_at: float, pause_s: float) -> None:
        rng = random.Random(7)
        paused = False
        while time.time() < until and not self._stop.is_set():
            if not paused and time.time() >= pause_at:
                paused = True
                moto = self.moto()
                os.kill(moto, signal.SIGSTOP)
                try:
                    self._stop.wait(pause_s)
                finally:
                    os.kill(moto, signal.SIGCONT)
                self.paused_s = pause_s
            callers = self.callers()
            if callers:
                victim = rng.choice(callers)
                os.kill(victim, signal.SIGKILL)
                self.killed.append(victim)
            self._stop.wait(1.5)

    def stop(self) -> None:
        self._stop.set()


@pytest.fixture
def chaos_stack(make_stack: MakeStack) -> Iterator[tuple[StackProcess, Instances]]:
    stack = make_stack(WAKEUP_SWEEP_GRACE_S=str(SWEEP_GRACE_S))
    api = Api(stack.url, stack.account_token)
    instances = Instances(api)
    yield stack, instances
    instances.remove_all()
    api.close()


def _overlapping(calls: list[Call]) -> list[tuple[Call, Call]]:
    """Pairs of calls to one path where the second came while the first could still be under way:
    a call lasts until its answer, or until the caller's timeout gives up on it."""
    pairs = []
    for first, second in zip(calls, calls[1:], strict=False):
        lasts = CALL_TIMEOUT_S if first.answer.delay_s >= CALL_TIMEOUT_S else first.answer.delay_s
        if second.monotonic < first.monotonic + lasts:
            pairs.append((first, second))
    return pairs


def test_every_wake_is_called_once_at_a_time_and_never_early_through_kills_pauses_hangs_and_resets(
    chaos_stack: tuple[StackProcess, Instances], host: WakeHost
) -> None:
    stack, instances = chaos_stack
    # given 40 instances, a quarter of whose hosts hang past the call's timeout once and a quarter
    # reset the connection once, with wakes spread over ten seconds a few seconds ahead
    paths, tokens = {}, {}
    for n in range(WAKES):
        name = f"c{n}"
        path = f"/{name}/wake"
        if n % 4 == 1:
            host.script(hang(CALL_TIMEOUT_S + 2), path=path)
        elif n % 4 == 2:
            host.script(reset(), path=path)
        paths[path], tokens[path] = instances.new(host.url_for(name))
    first = time.time() + 6
    ats = {path: iso(first + n * 10 / WAKES) for n, path in enumerate(paths)}
    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(lambda path: instances.wake(tokens[path], ats[path]), paths))
    # when, through the wakes' ten seconds and a little after, a caller environment is killed every
    # second and a half, and moto stops answering for longer than a call's timeout
    chaos = Chaos(stack)
    thread = threading.Thread(target=chaos.run, args=(first + 13, first + 4, CALL_TIMEOUT_S + 1.5), daemon=True)
    thread.start()
    try:
        thread.join(timeout=60)
    finally:
        chaos.stop()
    assert chaos.killed and chaos.paused_s > CALL_TIMEOUT_S
    # then every wake is recorded as called, within the time the sweeper and the backoff allow
    wait_until(
        lambda: all(instances.get(instance_id)["calledAt"] for instance_id in paths.values()),
        timeout=RECOVERY_S,
        interval=1,
        message="every wake recorded as called",
    )
    for path in paths:
        calls = host.calls_to(path)
        answered = [call for call in calls if call.answer.status // 100 == 2 and not call.answer.reset]
        answered = [call for call in answered if call.answer.delay_s < CALL_TIMEOUT_S]
        assert answered, f"{path} never answered a call with a 2xx"
        assert all(call.wall >= as_registered(ats[path]) for call in calls), f"{path} was called early"
        assert not _overlapping(calls), f"{path} had two calls at once: {_overlapping(calls)}"
    again = {path: _after_first_success(host.calls_to(path)) for path in paths}
    print(
        f"\nchaos: {len(chaos.killed)} caller environments killed, moto paused {chaos.paused_s:g} s;"
        f" {sum(again.values())} calls after a host's 2xx (a success whose record was lost with its caller)"
    )


def _after_first_success(calls: list[Call]) -> int:
    for n, call in enumerate(calls):
        if call.answer.status // 100 == 2 and not call.answer.reset and call.answer.delay_s < CALL_TIMEOUT_S:
            return len(calls) - n - 1
    return 0
