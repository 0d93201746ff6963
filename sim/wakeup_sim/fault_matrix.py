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
import dataclasses
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

from wakeup.arrival import EARLY_REARM_S
from wakeup.deadlines import CALLER_TIMEOUT_S
from wakeup.logic.retry import retry_delay_s
from wakeup.settings import SettingsError, load_settings
from wakeup.table.items import instance_key, pending_shard
from wakeup.table.registrations import Superseded
from wakeup.times import epoch_ms
from wakeup_sim import fault_races
from wakeup_sim.api_gateway import Registration
from wakeup_sim.deployment import Deployment, from_template
from wakeup_sim.fault_hooks import Deliveries, LateWrites, UnprocessedBatches, events_twice, stale_reads
from wakeup_sim.fault_records import Records
from wakeup_sim.faults import (
    ATTEMPTS,
    FUNCTION_TIMEOUT_S,
    HOST,
    PLACES,
    POINTS,
    READ_TIMEOUT_S,
    Fault,
    FaultClass,
    FaultInjector,
    FaultyClient,
    FaultyHosts,
    FaultyIo,
    Kind,
    TimedClient,
    owed,
    signing_keys,
    skewed_clock,
    trigger_bodies,
    watch_acknowledgements,
    watch_deliveries,
    watch_registrations,
    watch_sweeps,
)
from wakeup_sim.logs import counted_logs
from wakeup_sim.scenarios import FAR_LEAD_S, NEAR_LEAD_S, T0, no_cyclic_collection
from wakeup_sim.world import SWEEP_EVERY_S, Wake, World

RATES = (0.01, 0.10)
WAKES = 4_000  # per class row: the whole matrix within 15 minutes on two cores (docs/faults.md, "Size")
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
    unexplained: int = 0  # duplicates after a 2xx the caller saw and recorded: none allowed
    unexplained_causes: tuple[tuple[str, int], ...] = ()
    overlapping: int = 0  # calls to a host busy with another registration (reported, allowed)
    injects_timeouts: bool = False  # the row injects a Lambda timeout (else reaching one fails it)
    new_ids: int = 0  # repeats with another webhook-id than the 2xx they repeat: a host cannot drop them
    seed: int = 0
    # Calls started after their instance's delete (or to its old URL after its move) was answered
    # 2xx, and instance routes refused for good (`wakeup_sim.fault_races`).
    routes_broken: int = 0

    @property
    def ok(self) -> bool:
        uninjected_timeouts = self.lambda_timeouts and not self.injects_timeouts
        return not (
            self.lost
            or self.concurrent
            or self.early
            or self.over_bound
            or self.inconsistent
            or self.unexplained
            or self.new_ids
            or self.routes_broken
            or uninjected_timeouts
        )


@functools.cache
def _deployment() -> Deployment:
    return from_template()


def install(
    world: World, faults: FaultClass, rate: float, seed: int, wakes: dict[str, Wake] | None = None
) -> FaultInjector:
    """The row's faults, wired into the world where its AWS answers, its functions run and its
    hosts are called; each execution environment's clock skewed; the clients' 2xx watched.
    `wakes`: the row's wakes by instance (filled once made), for a host that registers again."""

    def cpu_of() -> object:
        bound = world.cpus.current()
        return bound[0] if bound is not None else None

    injector = FaultInjector(world.engine, faults, rate, seed, cpu_of)  # type: ignore[arg-type]
    d, p = world.deployment, world.profile
    clock = skewed_clock(injector, world.engine.clock, random.Random(seed * 7919 + 1))
    world.engine.clock = clock  # type: ignore[method-assign]
    world.caller.clock = world.triggers.clock = clock
    records = Records(injector)  # each call's record, attempt by attempt (a duplicate's cause)
    world.store.memory.io = FaultyIo(world.store.memory.io, injector, records)
    world.store.client = UnprocessedBatches(injector, world.store.client)
    deliveries = Deliveries(injector, world.scheduler, random.Random(seed * 7919 + 2))
    world.triggers.sqs = FaultyClient(world.triggers.sqs, "sqs", injector, p.sqs_latency_s, deliveries)
    world.triggers.scheduler = FaultyClient(
        world.triggers.scheduler, "scheduler", injector, p.scheduler_latency_s, deliveries
    )
    world.caller.signing = signing_keys(world.engine, injector, "sim-master-key-" + "0" * 32, "sim-master-key")

    def reregister(instance_id: str) -> None:
        wake = (wakes or {}).get(instance_id)
        if wake is not None:
            now = world.engine.now
            world.register(wake, now + injector.rng.uniform(1.0, 30.0), now)

    world.caller.call = FaultyHosts(world.caller.call, injector, reregister).call
    world.caller.deliver = watch_deliveries(injector, world.caller.deliver)  # type: ignore[method-assign]
    world.store.client = TimedClient(LateWrites(injector, world.store.client, records), injector, records)
    # Each function's invocation has its time left: the caller checks it before its steps, and
    # every function's requests are checked against it (`wakeup.deadlines`).
    world.caller.time_left_s = injector.time_left_s
    stale_reads(injector, world.store)
    world.store.register_wake = watch_registrations(injector, world.store.register_wake)  # type: ignore[method-assign]
    watch_sweeps(injector, world.store)
    records.watch_claims(world.store)
    timeouts = {"CallerFunction": d.caller_timeout_s, **FUNCTION_TIMEOUT_S}
    for function in world.functions:
        wake_of = (lambda payload: payload[0].instance_id) if function is world.wake_function else (lambda _: None)
        injector.wrap_function(function, timeouts[function.name], POINTS[function.name], wake_of)
    watch_acknowledgements(injector, world.wake_function)
    events_twice(injector, world.caller_function)
    events_twice(injector, world.sweeper_function)
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
    attempt's call timeout and retry delay (`wakeup.logic.retry`): a call that could not be signed
    is a failed attempt too, so the delays double from it."""
    s = deployment.settings
    watch = injector.watch
    shard = int(pending_shard(instance_id))
    sweeps = sum(1 for (_, left), when in watch.sweeps_failed.items() if left in (None, shard) and at <= when <= called)
    # A sweep slowed by faults before the wake's shard, but not ended, re-arms it later, within
    # the sweeper's own timeout.
    slowed = any(at <= when <= called for when in watch.sweeps_failed.values())
    # Each failed attempt's retry waits by its count of failures in a row, whatever failed it.
    calls = sum(s.call_timeout_s + retry_delay_s(n) for n in watch.failed_attempts.get(instance_id, []))
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


def run_row(
    faults: FaultClass, rate: float, wakes: int = WAKES, seed: int = 1, deployment: Deployment | None = None
) -> Row:
    started = time.process_time()
    deployment = deployment or _deployment()
    with counted_logs(), no_cyclic_collection():
        world = World(deployment, start=T0, seed=seed)
        by_id: dict[str, Wake] = {}
        injector = install(world, faults, rate, seed, by_id)
        races = faults.arm(world, injector, by_id) if isinstance(faults, fault_races.RaceClass) else None
        made = world.instances(wakes)
        by_id.update((wake.instance_id, wake) for wake in made)
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
            elif index % 10 == 5:
                # Moved twice, each a second after the client's last 2xx: a write or an update
                # that lands late meets the next registration.
                first = world.registrations[-1]
                world.engine.spawn(_again_after_2xx, world, wake, first, [due + 60.0, due + 120.0], when=when + 0.5)
                due += 120.0
            last = max(last, due)
        world.engine.run(last + SETTLE_S)
        while world.engine.now < last + MAX_SETTLE_S and any("pending_due" in i for i in world.store.items.values()):
            world.engine.run(world.engine.now + 300.0)
        row = _row(
            world,
            injector,
            faults,
            rate,
            made_ids=[w.instance_id for w in made],
            cpu_s=time.process_time() - started,
            seed=seed,
        )
        return dataclasses.replace(row, routes_broken=races.broken) if races is not None else row


def _again_after_2xx(world: World, wake: Wake, registration: Registration, moves: list[float]) -> None:
    """A client that registers its wake again a second after each 2xx (`registration` its first),
    once per time in `moves`."""
    for at in moves:
        while registration.accepted_at is None:
            world.engine.sleep(0.5)
        world.engine.sleep(1.0)
        world.register(wake, at, world.engine.now)
        registration = world.registrations[-1]


def _trigger_lost(world: World, injector: FaultInjector, instance_id: str, due: float, reg: int) -> None:
    """A registration written to the table whose trigger never was (retried until written); its
    client counts it as acknowledged, as a wake function that answered 2xx and lost its trigger."""
    injector.watch.hits[instance_id] += 1  # the scenario's, not counted among the row's faults
    at = datetime.fromtimestamp(max(due, world.engine.now), UTC)
    while True:
        try:
            world.store.register_wake(instance_id, at, uuid.UUID(int=reg).hex)
            injector.acknowledge(instance_id, uuid.UUID(int=reg).hex)
            return
        except Superseded:  # a newer registration stands: this one is its client's 409, no 2xx
            return
        except (ClientError, BotoCoreError):
            world.engine.sleep(1.0)


def _row(
    world: World,
    injector: FaultInjector,
    faults: FaultClass,
    rate: float,
    made_ids: list[str],
    cpu_s: float,
    seed: int = 0,
) -> Row:
    watch = injector.watch
    now_ms = epoch_ms(world.engine.clock())
    live = _live_triggers(world)
    lost = over = inconsistent = 0
    worst: tuple[float, float] = (-math.inf, 0.0)
    for instance_id in made_ids:
        item = world.store.items.get(instance_key(instance_id), {})  # {}: deleted (`fault_races`)
        if item.get("claim_until") is not None and int(item["claim_until"]) < now_ms:
            inconsistent += 1  # a claim left past its lease
        if "pending_due" in item and (instance_id, str(item["reg"]), int(item["attempts"])) not in live:
            inconsistent += 1  # pending, and nothing will look at it but the sweeper
        # The wake owed: the registration the client last got a 2xx for, whatever the table says.
        acked = watch.acked.get(instance_id)
        if acked is None:
            continue  # its client never got a 2xx: nothing was promised
        woken = [reg for reg in owed(watch, instance_id) if (instance_id, reg) in watch.woken]
        key = (instance_id, acked[1] if acked[1] in woken or not woken else woken[0])
        called = watch.woken.get(key)  # the host's first 2xx for it
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
        unexplained=sum(watch.unexplained.values()),
        unexplained_causes=tuple(watch.unexplained.most_common()),
        overlapping=watch.overlapping,
        new_ids=watch.new_ids,
        injects_timeouts=any(f.kind is Kind.TIMES_OUT for f in faults.faults),
        seed=seed,
    )


# The settings sweep: every combination settings.py accepts (a lease that outlives the call and
# its outcome's write, a call the caller's invocation can hold) of these ends and middles, and the
# batch size; each on every AWS fault and every host fault at the higher rate, on fewer wakes. The
# caller's Lambda timeout is template.yaml's (`wakeup.deadlines.CALLER_TIMEOUT_S`, held equal to it
# by a test): the time checks and the settings' rules are derived from it, and no parameter moves it.
SWEEP_CALL_TIMEOUTS_S = (1.0, 10.0, 14.0, 60.0)
SWEEP_LEASES_S = (2.0, 11.0, 15.0, 30.0, 61.0, 900.0)
SWEEP_CALLER_TIMEOUTS_S = (CALLER_TIMEOUT_S,)
SWEEP_BATCH_SIZES = (1, 10)
SWEEP_WAKES = 500
# A lease against what runs under it, for each accepted lease and call timeout (the template's
# caller): a slow read before the call, a second delivery of each message, a host that hangs.
RACE_FAULTS = (Fault("dynamodb:GetItem", Kind.TIMEOUT), Fault("sqs:SendMessage", Kind.TWICE), Fault(HOST, Kind.READ))
RACE_RATE = 0.30
RACE_CALLER_TIMEOUT_S, RACE_BATCH_SIZE = 30.0, 10
# Every AWS fault and every host's: what the settings trade against (slow requests before a call,
# slow hosts within it); no function's death or timeout, so that a Lambda timeout fails the row.
SWEEP_FAULTS = tuple(
    Fault(place, kind) for place, (_, kinds) in PLACES.items() if not place.startswith("function:") for kind in kinds
)
SWEEP_RATE = 0.10


def swept() -> list[tuple[str, Deployment]]:
    """Each accepted combination of the settings swept, as a deployment of its own."""
    base = _deployment()
    environ = {k: str(v) for k, v in base.settings.model_dump(by_alias=True).items() if v is not None}
    found = []
    for call_s in SWEEP_CALL_TIMEOUTS_S:
        for lease_s in SWEEP_LEASES_S:
            try:
                settings = load_settings(
                    {**environ, "WAKEUP_CALL_TIMEOUT_S": f"{call_s:g}", "WAKEUP_CLAIM_LEASE_S": f"{lease_s:g}"}
                )
            except SettingsError:
                continue  # not accepted
            for caller_s in SWEEP_CALLER_TIMEOUTS_S:
                for batch in SWEEP_BATCH_SIZES:
                    # The queue's visibility timeout at six times the function's, as Lambda's
                    # documentation asks of an SQS event source.
                    deployment = dataclasses.replace(
                        base,
                        settings=settings,
                        caller_timeout_s=caller_s,
                        batch_size=batch,
                        visibility_timeout_s=max(base.visibility_timeout_s, 6 * caller_s),
                    )
                    label = f"call {call_s:g} s, lease {lease_s:g} s, caller {caller_s:g} s, batch {batch}"
                    found.append((label, deployment))
    return found


HEADER = (
    "| fault class | rate | wakes | faults injected | lost | concurrent | overlapping | early "
    "| duplicates allowed (caused by) | unexplained (after) | repeats with a new webhook-id "
    "| recovery s | bound s | over bound | inconsistent | Lambda timeouts | instance routes broken |\n"
    "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
)


CAUSES_SHOWN = 4


def _causes(total: int, causes: tuple[tuple[str, int], ...]) -> str:
    if not total:
        return "0"
    text = "; ".join(f"{cause}: {n}" for cause, n in causes[:CAUSES_SHOWN])
    if len(causes) > CAUSES_SHOWN:
        others = sum(n for _, n in causes[CAUSES_SHOWN:])
        text += f"; {others} by {len(causes) - CAUSES_SHOWN} other combinations"
    return f"{total} ({text})"


def line(row: Row) -> str:
    timeouts = f"{row.lambda_timeouts}" + ("" if row.injects_timeouts or not row.lambda_timeouts else " (not injected)")
    return (
        f"| {row.name} | {row.rate:.0%} | {row.wakes} | {row.injected} | {row.lost} | {row.concurrent} "
        f"| {row.overlapping} | {row.early} | {_causes(row.duplicates, row.causes)} "
        f"| {_causes(row.unexplained, row.unexplained_causes)} | {row.new_ids} | {row.recovery_s:.1f} "
        f"| {row.bound_s:.1f} | {row.over_bound} | {row.inconsistent} | {timeouts} | {row.routes_broken} |"
    )


def summary(rows: list[Row]) -> str:
    return (
        f"faults: {len(rows)} rows, lost {sum(r.lost for r in rows)}, concurrent {sum(r.concurrent for r in rows)}, "
        f"early {sum(r.early for r in rows)}, duplicates {sum(r.duplicates for r in rows)}, "
        f"unexplained {sum(r.unexplained for r in rows)}, "
        f"timeouts {sum(r.lambda_timeouts for r in rows if r.injects_timeouts)}"
    )


def where() -> str:
    """Where each place's faults are injected, as a Markdown table."""
    lines = ["| place | injected in | kinds |", "| --- | --- | --- |"]
    lines += [f"| {place} | {text} | {', '.join(k.value for k in kinds)} |" for place, (text, kinds) in PLACES.items()]
    return "\n".join(lines)


Job = tuple[FaultClass, float, int, int, Deployment | None]


def _run(job: Job) -> Row:
    return run_row(*job)


def jobs(only: str | None, wakes: int, seed: int, settings: bool = True) -> list[Job]:
    """The rows: each class at each rate, then the settings sweep. Row i of the whole list runs
    seed + i, whichever rows `only` keeps, so that `--seed S --only X` replays X's rows."""
    every: list[Job] = [(c, rate, wakes, 0, None) for c in CLASSES for rate in RATES]
    every += [(c, fault_races.RATE, min(wakes, fault_races.WAKES), 0, None) for c in fault_races.CLASSES]
    if settings:
        for label, deployment in swept():
            every.append(
                (FaultClass(f"settings: {label}", SWEEP_FAULTS), SWEEP_RATE, min(wakes, SWEEP_WAKES), 0, deployment)
            )
            if deployment.caller_timeout_s == RACE_CALLER_TIMEOUT_S and deployment.batch_size == RACE_BATCH_SIZE:
                name = f"lease race: {label}"
                every.append((FaultClass(name, RACE_FAULTS), RACE_RATE, min(wakes, SWEEP_WAKES), 0, deployment))
    return [(c, rate, n, seed + i, d) for i, (c, rate, n, _, d) in enumerate(every) if not only or only in c.name]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m wakeup_sim.fault_matrix", description=__doc__)
    parser.add_argument("--wakes", type=int, default=WAKES, help="wakes per row")
    parser.add_argument("--only", help="run the classes whose name contains this")
    parser.add_argument("--workers", type=int, default=2, help="processes (rows run in parallel)")
    parser.add_argument("--where", action="store_true", help="print where each fault is injected first")
    parser.add_argument(
        "--seed", type=int, help="the run's seed (row i runs seed + i); drawn and printed when not given"
    )
    parser.add_argument("--no-settings", action="store_true", help="leave out the settings sweep")
    args = parser.parse_args(argv)
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1 << 31)
    print(f"seed {seed} (replay: --seed {seed})", flush=True)
    started = time.monotonic()
    if args.where:
        print(where() + "\n", flush=True)
    print(HEADER, flush=True)
    rows: list[Row] = []
    with ProcessPoolExecutor(max_workers=args.workers) as pool:
        for row in pool.map(_run, jobs(args.only, args.wakes, seed, not args.no_settings)):
            print(line(row), flush=True)
            rows.append(row)
    # Every duplicate call put down to its cause; those no allowed cause explains, to what the
    # call after whose 2xx it came met.
    print(
        "\nDuplicates by cause (allowed: after a 2xx the caller could not see, a death before its record,"
        " or a record that could not be written within the lease):"
    )
    for row in rows:
        for cause, n in row.causes:
            print(f"- {row.name} at {row.rate:.0%}: {n} after {cause}")
        for cause, n in row.unexplained_causes:
            print(f"- {row.name} at {row.rate:.0%}: {n} UNEXPLAINED, after a recorded 2xx that met: {cause}")
    failed = [row for row in rows if not row.ok]
    print(
        f"\n{len(rows)} rows in {time.monotonic() - started:.0f} s, {sum(r.cpu_s for r in rows):.0f} s of CPU;"
        f" Lambda timeouts reached: {sum(r.lambda_timeouts for r in rows)}; host calls: {sum(r.calls for r in rows)};"
        f" seed {seed}",
        file=sys.stderr,
    )
    for row in failed:
        print(f"FAILED: {row.name} at {row.rate:.0%} (seed {row.seed})", file=sys.stderr)
    print(summary(rows), flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
