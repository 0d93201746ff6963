"""`python -m wakeup_sim.fault_matrix` (`make faults`): every fault class at 1% and 10%, a row each.

Each row runs a fresh simulated stack (`wakeup_sim.world.World`, the service's own caller, triggers,
wake registration and sweeper) with one fault class injected (`wakeup_sim.faults`), on a mix of
wakes: half near (SQS all the way), half far (a schedule, then SQS); half due at one second, half
over ten minutes; one in ten registered again before it is due (a far wake moved a minute on, which
updates its schedule, or moved near, which deletes it). It prints the invariants of each row and
exits 1 when any row has a lost, concurrent or early wake, or a wake recovered outside its bound.
docs/faults.md says what each row covers.
"""

import argparse
import functools
import math
import random
import sys
import time
import uuid
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime

from botocore.exceptions import BotoCoreError, ClientError

from wakeup.logic.delivery import EARLY_REARM_S
from wakeup.logic.retry import retry_delay_s
from wakeup.table.items import instance_key, pending_shard
from wakeup.times import epoch_ms
from wakeup_sim.deployment import Deployment, from_template
from wakeup_sim.faults import (
    ATTEMPTS,
    FUNCTION_TIMEOUT_S,
    PLACES,
    POINTS,
    READ_TIMEOUT_S,
    Fault,
    FaultClass,
    FaultInjector,
    FaultyClient,
    FaultyHosts,
    FaultyIo,
    signing_keys,
    trigger_bodies,
    watch_deliveries,
    watch_registrations,
    watch_sweeps,
)
from wakeup_sim.logs import counted_logs
from wakeup_sim.scenarios import FAR_LEAD_S, NEAR_LEAD_S, T0, no_cyclic_collection
from wakeup_sim.world import SWEEP_EVERY_S, World

RATES = (0.01, 0.10)
WAKES = 10_000  # per row, as issue 17 asks (docs/faults.md, "Size")
STEADY_SPAN_S = 600.0
SETTLE_S = 900.0  # after the last wake's time, before the end is checked
MAX_SETTLE_S = 4 * 3600.0  # a row still owing wakes runs on, up to this long after the last one
# A wake's recovery without faults: its call, late by less than this (a cold start, a busy second).
BASE_S = 10.0
# botocore's longest request: three attempts that each time out, and its throttle backoffs.
BOTOCORE_WORST_S = ATTEMPTS * READ_TIMEOUT_S + 1.0 + 2.0


def _classes() -> list[FaultClass]:
    rows = [
        FaultClass(f"{place} {kind.value}", (Fault(place, kind),))
        for place, (_, kinds) in PLACES.items()
        for kind in kinds
    ]
    every_aws = tuple(
        Fault(place, kind)
        for place, (_, kinds) in PLACES.items()
        if ":" in place and not place.startswith("function")
        for kind in kinds
    )
    everything = tuple(Fault(place, kind) for place, (_, kinds) in PLACES.items() for kind in kinds)
    return [*rows, FaultClass("mix: every AWS fault", every_aws), FaultClass("mix: everything", everything)]


CLASSES = _classes()


@dataclass(frozen=True)
class Row:
    name: str
    rate: float
    wakes: int
    injected: int
    lost: int
    concurrent: int
    early: int
    duplicates: int
    causes: tuple[tuple[str, int], ...]
    recovery_s: float  # the latest wake's first 2xx after its time
    bound_s: float  # that wake's bound
    over_bound: int  # wakes recovered later than their own bound
    inconsistent: int  # pending wakes without a live trigger, and claims past their lease, at the end
    lambda_timeouts: int
    calls: int
    cpu_s: float
    # Each fault's label and how often it was injected; each place and how often it was reached.
    by_fault: tuple[tuple[str, int], ...] = ()
    by_place: tuple[tuple[str, int], ...] = ()

    @property
    def ok(self) -> bool:
        return not (self.lost or self.concurrent or self.early or self.over_bound or self.inconsistent)


@functools.cache
def _deployment() -> Deployment:
    return from_template()


def install(world: World, faults: FaultClass, rate: float, seed: int) -> FaultInjector:
    """The row's faults, wired into the world where its AWS answers, its functions run and its
    hosts are called."""

    def cpu_of() -> object:
        bound = world.cpus.current()
        return bound[0] if bound is not None else None

    injector = FaultInjector(world.engine, faults, rate, seed, cpu_of)  # type: ignore[arg-type]
    d, p = world.deployment, world.profile
    world.store.memory.io = FaultyIo(world.store.memory.io, injector)
    world.triggers.sqs = FaultyClient(world.triggers.sqs, "sqs", injector, p.sqs_latency_s)
    world.triggers.scheduler = FaultyClient(world.triggers.scheduler, "scheduler", injector, p.scheduler_latency_s)
    world.caller.signing = signing_keys(world.engine, injector, "sim-master-key-" + "0" * 32, "sim-master-key")
    lease_s = d.settings.claim_lease_s + EARLY_REARM_S
    world.caller.call = FaultyHosts(world.caller.call, injector, lease_s).call
    world.caller.deliver = watch_deliveries(injector, world.caller.deliver)  # type: ignore[method-assign]
    world.store.register_wake = watch_registrations(injector, world.store.register_wake)  # type: ignore[method-assign]
    watch_sweeps(injector, world.store)
    timeouts = {"CallerFunction": d.caller_timeout_s, **FUNCTION_TIMEOUT_S}
    for function in world.functions:
        wake_of = (lambda payload: payload[0].instance_id) if function is world.wake_function else (lambda _: None)
        injector.wrap_function(function, timeouts[function.name], POINTS[function.name], wake_of)
    return injector


def cycle_s(deployment: Deployment) -> float:
    """What one fault can cost a wake at most: its claim's lease ends, the sweeper's next minute
    and grace pass, and botocore's longest request."""
    s = deployment.settings
    return s.claim_lease_s + EARLY_REARM_S + SWEEP_EVERY_S + s.sweep_grace_s + BOTOCORE_WORST_S


def bound_s(deployment: Deployment, injector: FaultInjector, instance_id: str, at: float, called: float) -> float:
    """A wake's recovery bound: the issue's (the claim's lease, the sweeper's period and grace,
    and a busy second's lateness: a fault elsewhere holds the poller or the batch a wake waits
    for), plus the backoff its faults cause: a cycle for each fault that met its deliveries (they
    compound), a sweep for each sweep of its shard a fault broke while it waited, and each failed
    call's timeout and retry delay (`wakeup.logic.retry`)."""
    s = deployment.settings
    watch = injector.watch
    shard = int(pending_shard(instance_id))
    sweeps = sum(1 for (_, left), when in watch.sweeps_failed.items() if left in (None, shard) and at <= when <= called)
    # A sweep slowed by faults before the wake's shard, but not ended, re-arms it later, within
    # the sweeper's own timeout.
    slowed = any(at <= when <= called for when in watch.sweeps_failed.values())
    calls = sum(deployment.settings.call_timeout_s + retry_delay_s(n) for n in watch.host_failures.get(instance_id, []))
    return (
        s.claim_lease_s
        + EARLY_REARM_S
        + SWEEP_EVERY_S
        + s.sweep_grace_s
        + BASE_S
        + watch.hits[instance_id] * cycle_s(deployment)
        + sweeps * SWEEP_EVERY_S
        + (FUNCTION_TIMEOUT_S["SweeperFunction"] if slowed else 0.0)
        + calls
    )


def _live_triggers(world: World) -> set[tuple[str, str, int]]:
    """The triggers still to come: messages neither deleted nor dead, and schedules not fired."""
    queue = world.queue
    bodies = [m.body for m in queue._visible]
    bodies += [m.body for hidden in queue._invisible.values() for handle, m in hidden if m.handle == handle]
    bodies += [body for _, body in world.scheduler.schedules.values()]
    return trigger_bodies(bodies)


def run_row(faults: FaultClass, rate: float, wakes: int = WAKES, seed: int = 1) -> Row:
    started = time.process_time()
    deployment = _deployment()
    with counted_logs(), no_cyclic_collection():
        world = World(deployment, start=T0, seed=seed)
        injector = install(world, faults, rate, seed)
        made = world.instances(wakes)
        rng = random.Random(seed)
        burst = T0 + FAR_LEAD_S[1] + 120
        last = burst
        for index, wake in enumerate(made):
            far, steady = index % 2 == 1, (index // 2) % 2 == 1
            due = burst + (rng.random() * STEADY_SPAN_S if steady else 0.0)
            low, high = FAR_LEAD_S if far else NEAR_LEAD_S
            when = due - low - rng.random() * (high - low)
            if index % 50 == 7:
                # The sweeper's work in every row: a wake whose trigger was lost (its wake function
                # died between the table's write and the trigger's), one in fifty.
                world.engine.spawn(
                    _trigger_lost, world, injector, wake.instance_id, due, rng.getrandbits(128), when=when
                )
                last = max(last, due)
                continue
            world.register(wake, due, when)
            if index % 10 in (1, 3):
                # Moved before it is due: a far wake a minute on (its schedule updated), or near
                # (its schedule deleted); index 3's is near, index 1's far.
                again = when + 60.0
                moved = due + 60.0 if index % 10 == 1 else again + NEAR_LEAD_S[0]
                world.register(wake, moved, again)
                due = max(due, moved)
            last = max(last, due)
        world.engine.run(last + SETTLE_S)
        while world.engine.now < last + MAX_SETTLE_S and any("pending_due" in i for i in world.store.items.values()):
            world.engine.run(world.engine.now + 300.0)
        return _row(
            world, injector, faults, rate, made_ids=[w.instance_id for w in made], cpu_s=time.process_time() - started
        )


def _trigger_lost(world: World, injector: FaultInjector, instance_id: str, due: float, reg: int) -> None:
    """A registration written to the table whose trigger never was (retried until written)."""
    injector.watch.hits[instance_id] += 1  # the scenario's, not counted among the row's faults
    at = datetime.fromtimestamp(max(due, world.engine.now), UTC)
    while True:
        try:
            world.store.register_wake(instance_id, at, uuid.UUID(int=reg).hex)
            return
        except (ClientError, BotoCoreError):
            world.engine.sleep(1.0)


def _row(
    world: World, injector: FaultInjector, faults: FaultClass, rate: float, made_ids: list[str], cpu_s: float
) -> Row:
    watch = injector.watch
    now_ms = epoch_ms(world.engine.clock())
    live = _live_triggers(world)
    lost = over = inconsistent = 0
    worst: tuple[float, float] = (-math.inf, 0.0)
    for instance_id in made_ids:
        item = world.store.items[instance_key(instance_id)]
        key = (instance_id, str(item["reg"]))
        if item.get("claim_until") is not None and int(item["claim_until"]) < now_ms:
            inconsistent += 1  # a claim left past its lease
        if "pending_due" in item and (instance_id, key[1], int(item["attempts"])) not in live:
            inconsistent += 1  # pending, and nothing will look at it but the sweeper
        called = watch.first_2xx.get(key)
        if called is None:
            lost += 1
            continue
        at = watch.registered_at[key]
        bound = bound_s(world.deployment, injector, instance_id, at, called)
        recovery = called - at
        if recovery > bound:
            over += 1
        if recovery > worst[0]:
            worst = (recovery, bound)
    return Row(
        name=faults.name,
        rate=rate,
        wakes=len(made_ids),
        injected=sum(injector.injected.values()),
        lost=lost,
        concurrent=watch.concurrent,
        early=watch.early,
        duplicates=sum(watch.duplicates.values()),
        causes=tuple(watch.duplicates.most_common()),
        recovery_s=worst[0],
        bound_s=worst[1],
        over_bound=over,
        inconsistent=inconsistent,
        lambda_timeouts=watch.natural_timeouts,
        calls=watch.calls,
        cpu_s=cpu_s,
        by_fault=tuple(sorted(injector.injected.items())),
        by_place=tuple(sorted(injector.requests.items())),
    )


HEADER = (
    "| fault class | rate | wakes | faults injected | lost | concurrent | early | duplicates (caused by) "
    "| recovery s | bound s | over bound | inconsistent | Lambda timeouts |\n"
    "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
)


CAUSES_SHOWN = 4


def line(row: Row) -> str:
    causes = "; ".join(f"{cause}: {n}" for cause, n in row.causes[:CAUSES_SHOWN])
    if len(row.causes) > CAUSES_SHOWN:
        others = sum(n for _, n in row.causes[CAUSES_SHOWN:])
        causes += f"; {others} by {len(row.causes) - CAUSES_SHOWN} other combinations"
    duplicates = f"{row.duplicates} ({causes})" if row.duplicates else "0"
    return (
        f"| {row.name} | {row.rate:.0%} | {row.wakes} | {row.injected} | {row.lost} | {row.concurrent} | {row.early} "
        f"| {duplicates} | {row.recovery_s:.1f} | {row.bound_s:.1f} | {row.over_bound} | {row.inconsistent} "
        f"| {row.lambda_timeouts} |"
    )


def summary(rows: list[Row]) -> str:
    return (
        f"faults: {len(rows)} rows, lost {sum(r.lost for r in rows)}, concurrent {sum(r.concurrent for r in rows)}, "
        f"early {sum(r.early for r in rows)}, duplicates {sum(r.duplicates for r in rows)}"
    )


def where() -> str:
    """Where each place's faults are injected, as a Markdown table."""
    lines = ["| place | injected in | kinds |", "| --- | --- | --- |"]
    lines += [f"| {place} | {text} | {', '.join(k.value for k in kinds)} |" for place, (text, kinds) in PLACES.items()]
    return "\n".join(lines)


def _run(job: tuple[FaultClass, float, int, int]) -> Row:
    return run_row(*job)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m wakeup_sim.fault_matrix", description=__doc__)
    parser.add_argument("--wakes", type=int, default=WAKES, help="wakes per row")
    parser.add_argument("--only", help="run the classes whose name contains this")
    parser.add_argument("--workers", type=int, default=2, help="processes (rows run in parallel)")
    parser.add_argument("--where", action="store_true", help="print where each fault is injected first")
    args = parser.parse_args(argv)
    chosen = [c for c in CLASSES if not args.only or args.only in c.name]
    jobs = [(c, rate, args.wakes, 1 + i) for i, c in enumerate(chosen) for rate in RATES]
    started = time.monotonic()
    if args.where:
        print(where() + "\n", flush=True)
    print(HEADER, flush=True)
    rows: list[Row] = []
    with ProcessPoolExecutor(max_workers=args.workers) as pool:
        for row in pool.map(_run, jobs):
            print(line(row), flush=True)
            rows.append(row)
    # Every duplicate call put down to the faults that met the call whose 2xx went unrecorded.
    print("\nDuplicates by cause (the faults that met the call after whose 2xx the host was called again):")
    for row in rows:
        for cause, n in row.causes:
            print(f"- {row.name} at {row.rate:.0%}: {n} by {cause}")
    failed = [row for row in rows if not row.ok]
    print(
        f"\n{len(rows)} rows in {time.monotonic() - started:.0f} s, {sum(r.cpu_s for r in rows):.0f} s of CPU;"
        f" Lambda timeouts reached: {sum(r.lambda_timeouts for r in rows)}; host calls: {sum(r.calls for r in rows)}",
        file=sys.stderr,
    )
    for row in failed:
        print(f"FAILED: {row.name} at {row.rate:.0%}", file=sys.stderr)
    print(summary(rows), flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
