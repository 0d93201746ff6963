"""Races on one instance during its calls, through the instance routes' own code, for the fault
matrix (`wakeup_sim.fault_matrix` runs each `RaceClass` as a row).

When the caller claims a registration, at the row's rate, the instance's account sends a route
request a moment later (within the claim's wait and the call: `RACE_SPAN_S`): `DELETE
/wakeup/instances/{id}` or `POST /wakeup/instances` with the instance's token and a new URL. The
request runs `wakeup.logic.instances.delete` or `register` over the world's `DynamoStore` (its
expressions evaluated by `wakeup_sim.expressions`) and triggers, and its client retries what the
API would answer 429 or 5xx (`_Races._send`; an AWS error that reaches the route is its 503,
`wakeup.api.http.unexpected_reply`). A moved host registers its next wake once the move is
answered, as DESIGN section 2 asks of it (a move forgets the wake); a deleted one stops. Hosts hang
until the call's timeout at the row's rate too, so that routes meet calls under way for seconds.

`TransactionConflict`: DynamoDB cancels a `TransactWriteItems` when a write to one of its items is
under way, and refuses a `PutItem`/`UpdateItem`/`DeleteItem` of an item an ongoing transaction
holds with `TransactionConflictException` ("Transaction conflict handling in DynamoDB",
https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/transaction-apis.html#transaction-conflict-handling).
botocore retries neither (`retries/standard.py` lists `TransactionInProgressException` only). The
conflict row injects both while a route request is under way: its own writes (the delete's
transaction, the move's update) and the wake path's updates of the same instance each meet one at
`CONFLICT_RATE`.

The checker, as the account and the host see it (`RaceWatch`):
- after a delete's 2xx, no call starts for the instance (a call already under way may finish);
- after a move's 2xx, no call starts to the old URL;
- a refusal the client cannot retry (a 4xx other than 429, or 404 for an instance not gone) is a
  broken route;
- what is owed: a delete ends the instance's wakes, a move those registered before it applied,
  whenever their 2xx came (the requests overlapped and the table ordered them); the row's `lost`
  counts the wakes registered after it.
"""

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError
from greenlet import getcurrent

from wakeup.arrival import EARLY_REARM_S
from wakeup.errors import NotFoundError, WakeupError
from wakeup.logic import instances
from wakeup.model import TokenOwner
from wakeup.table.items import instance_key, token_key
from wakeup.tokens import TokenKind
from wakeup_sim.faults import HOST, Fault, FaultClass, FaultInjector, Kind
from wakeup_sim.world import Wake, World

# The route request comes this long after the claim at most: the claim's wait before its call
# (`EARLY_REARM_S`), the call itself, and a second past it.
RACE_SPAN_S = EARLY_REARM_S + 3.0
RATE = 0.20  # of the calls claimed
WAKES = 500
CONFLICT_RATE = 0.5
# The route's client: retries 429 and 5xx after a jittered wait, from a second, doubling to 20 s.
FIRST_RETRY_S, MAX_RETRY_S, MAX_TRIES = 1.0, 20.0, 30
RETRYABLE = (429, 500, 502, 503, 504)


class Race(StrEnum):
    DELETE = "instance deleted during its call"
    MOVE = "instance moved to a new URL during its call"
    CONFLICT = "TransactionConflict on the instance routes (deleted or moved during its call)"


@dataclass
class RaceWatch:
    """What the account and the hosts saw of the races."""

    deleted: dict[str, float] = field(default_factory=dict)  # instance -> its delete's 2xx
    moved_away: dict[tuple[str, str], float] = field(default_factory=dict)  # (instance, old url) -> the move's 2xx
    after_route: int = 0  # calls started after their instance's delete, or to its old URL after its move
    refused: int = 0  # route refusals the client cannot retry, or retried for minutes in vain
    routes: int = 0  # route requests answered 2xx
    retried: int = 0  # route answers its client retried (429, 5xx)
    conflicts: int = 0  # TransactionConflicts injected

    @property
    def broken(self) -> int:
        return self.after_route + self.refused


@dataclass(frozen=True)
class RaceClass(FaultClass):
    """A row of races on one instance during its calls (its `faults`: the hosts' own, at its rate)."""

    race: Race = Race.DELETE

    def arm(self, world: World, injector: FaultInjector, wakes: dict[str, Wake]) -> RaceWatch:
        """Wires the races into the row's world, after `fault_matrix.install`."""
        return _Races(self.race, world, injector, wakes).watch


# Hosts that hang until the call's timeout, at the row's rate: calls under way for seconds, which a
# route request meets as often as the moment between a claim and its call.
CLASSES = [RaceClass(f"race: {race.value}", (Fault(HOST, Kind.READ),), race) for race in Race]


class _Races:
    def __init__(self, race: Race, world: World, injector: FaultInjector, wakes: dict[str, Wake]) -> None:
        self.race, self.world, self.injector, self.wakes = race, world, injector, wakes
        self.engine = world.engine
        self.rng = random.Random(injector.rng.getrandbits(64))
        self.watch = RaceWatch()
        self.account = TokenOwner(TokenKind.ACCOUNT, world.account_id)
        self.moves = 0
        self.under_way: set[str] = set()  # instances a route request is under way for
        self.route_tasks: set[Any] = set()
        # The order in which registrations and moves applied: a move forgets the registrations
        # applied before it, whenever their 2xx comes.
        self.applied = 0
        self.registered: dict[tuple[str, str], int] = {}  # (instance, reg) -> when applied
        self.moved: dict[str, int] = {}  # instance -> when its last move applied
        self._order_writes()
        self._race_claims()
        if race is Race.CONFLICT:
            world.store.client = _ConflictingClient(world.store.client, self)
        self._watch_calls()
        self._stop_deleted_hosts()

    # -- the wiring --------------------------------------------------------------------------------

    def _order_writes(self) -> None:
        """Numbers registrations and moves as they apply; an acknowledgement of a registration a
        delete or a move forgot is not a wake owed (`_forgotten`)."""
        store, injector = self.world.store, self.injector
        register_wake, register_instance, acknowledge = (
            store.register_wake,
            store.register_instance,
            injector.acknowledge,
        )

        def registered(instance_id: str, at: Any, reg: str, window: Any = None) -> Any:
            previous = register_wake(instance_id, at, reg, window)
            self.applied += 1
            self.registered[(instance_id, reg)] = self.applied
            return previous

        def moved(account_id: str, url: str, *args: Any, **kwargs: Any) -> Any:
            result = register_instance(account_id, url, *args, **kwargs)
            if result.moved_from is not None:
                self.applied += 1
                self.moved[result.instance.id] = self.applied
            return result

        def acknowledged(instance_id: str, reg: str, sent: float | None = None) -> None:
            if not self._forgotten(instance_id, reg):
                acknowledge(instance_id, reg, sent)

        store.register_wake = registered  # type: ignore[method-assign]
        store.register_instance = moved  # type: ignore[method-assign]
        injector.acknowledge = acknowledged  # type: ignore[method-assign]

    def _race_claims(self) -> None:
        """At the row's rate, a claim taken is followed by its account's route request, within
        `RACE_SPAN_S`: during the claim's wait, its call, or just after."""
        store = self.world.store
        claim = store.claim_if_due

        def claim_if_due(trigger: Any, *args: Any, **kwargs: Any) -> Any:
            claimed = claim(trigger, *args, **kwargs)
            if claimed.claimed and self.rng.random() < RATE:
                when = self.engine.now + self.rng.random() * RACE_SPAN_S
                self.engine.spawn(self._route, trigger.instance_id, when=when)
            return claimed

        store.claim_if_due = claim_if_due  # type: ignore[method-assign]

    def _watch_calls(self) -> None:
        """Each call the caller makes, as its host sees it start (`_check_call`)."""
        call, watch = self.world.caller.call, self.injector.watch

        def watched_call(url: str, instance_id: str, *args: Any, **kwargs: Any) -> Any:
            before, started = watch.calls, self.engine.now
            try:
                return call(url, instance_id, *args, **kwargs)
            finally:
                if watch.calls > before:  # the call was made (its function did not end before it)
                    self._check_call(url, instance_id, started)

        self.world.caller.call = watched_call

    def _stop_deleted_hosts(self) -> None:
        """A deleted instance's host is answered 401 and stops registering (the simulated client
        retries until accepted: here it is let go)."""
        store, handler = self.world.store, self.world.wake_function.handler

        def wake_handler(payload: Any) -> Any:
            if token_key(payload[0].token_hash) not in store.items:
                return None
            return handler(payload)

        self.world.wake_function.handler = wake_handler

    # -- the checker -------------------------------------------------------------------------------

    def _forgotten(self, instance_id: str, reg: str) -> bool:
        """Whether a delete or a move applied after this registration: its 2xx, even one that
        comes later, promises no call (the requests overlapped; the table ordered them)."""
        if instance_key(instance_id) not in self.world.store.items:
            return True  # deleted: no registration applies after a delete
        return self.registered.get((instance_id, reg), 0) < self.moved.get(instance_id, 0)

    def _check_call(self, url: str, instance_id: str, started: float) -> None:
        deleted = self.watch.deleted.get(instance_id)
        moved = self.watch.moved_away.get((instance_id, url))
        if (deleted is not None and started >= deleted) or (moved is not None and started >= moved):
            self.watch.after_route += 1

    # -- the account's route requests ---------------------------------------------------------------

    def _route(self, instance_id: str) -> None:
        wake = self.wakes.get(instance_id)
        if wake is None or instance_id in self.watch.deleted or instance_id in self.under_way:
            return
        delete = self.race is Race.DELETE or (self.race is Race.CONFLICT and self.rng.random() < 0.5)
        self.injector.injected[f"race: {'delete' if delete else 'move'} during a call"] += 1
        self.under_way.add(instance_id)
        self.route_tasks.add(getcurrent())
        try:
            if delete:
                gone = lambda: instance_key(instance_id) not in self.world.store.items  # noqa: E731
                ok = self._send(lambda: self._delete(instance_id), gone)
                if ok:
                    self.watch.deleted[instance_id] = self.engine.now
                    self.injector.watch.acked.pop(instance_id, None)  # nothing is owed any more
                return
            old = wake.url
            self.moves += 1
            new = f"https://moved{self.moves}.host.example"
            if not self._send(lambda: self._move(wake, new)):
                return
            self.watch.moved_away[(instance_id, old)] = self.engine.now
            wake.url = new
            acked = self.injector.watch.acked.get(instance_id)
            if acked is not None and self._forgotten(instance_id, acked[1]):
                del self.injector.watch.acked[instance_id]  # the move forgot it
        finally:
            self.under_way.discard(instance_id)
            self.route_tasks.discard(getcurrent())
        # The moved host registers its next wake (a move leaves none).
        now = self.engine.now
        self.world.register(wake, now + 1.0 + self.rng.random() * 29.0, now)

    def _delete(self, instance_id: str) -> None:
        instances.delete(self.world.store, self.world.triggers, self.account, instance_id, self.engine.clock())

    def _move(self, wake: Wake, url: str) -> None:
        settings = self.world.deployment.settings
        registered = instances.register(
            self.world.store,
            self.world.triggers,
            self.account,
            url,
            wake.token,
            self.engine.clock(),
            settings.address_policy,
            settings.max_instances_per_account,
        )
        assert registered.instance.id == wake.instance_id and registered.instance.url == url

    def _send(self, request: Callable[[], None], gone: Callable[[], bool] | None = None) -> bool:
        """The account's client: the request until answered 2xx (True); False when refused for
        good. A refusal it cannot retry is counted as a broken route, but a delete's 404 when
        `gone` says the instance is gone indeed."""
        wait = FIRST_RETRY_S
        for _ in range(MAX_TRIES):
            try:
                request()
                self.watch.routes += 1
                return True
            except WakeupError as error:
                status = error.status
                if gone is not None and isinstance(error, NotFoundError) and gone():
                    return True  # deleted by an earlier attempt of this client's
            except (ClientError, BotoCoreError):
                status = 503  # `wakeup.api.http.unexpected_reply`: AWS failing underneath
            if status not in RETRYABLE:
                self.watch.refused += 1
                return False
            self.watch.retried += 1
            self.engine.sleep(self.rng.random() * wait)
            wait = min(wait * 2, MAX_RETRY_S)
        self.watch.refused += 1  # retried for minutes, never done
        return False

    def conflicts(self, instance_pk: str, own: bool) -> bool:
        """Whether this write meets a TransactionConflict: the route's own writes, and the wake
        path's updates of an instance a route request is under way for."""
        if not own and instance_pk.removeprefix(instance_key("")) not in self.under_way:
            return False
        if self.rng.random() >= CONFLICT_RATE:
            return False
        self.watch.conflicts += 1
        self.injector.injected["TransactionConflict on the instance routes"] += 1
        self.engine.sleep(self.world.profile.dynamodb_latency_s)  # the refusal's round trip
        return True


def _conflict(operation: str, transaction: bool) -> ClientError:
    if transaction:
        return ClientError(
            {
                "Error": {"Code": "TransactionCanceledException", "Message": "Transaction cancelled"},
                "CancellationReasons": [
                    {"Code": "TransactionConflict", "Message": "Transaction is ongoing for the item"},
                    {"Code": "None"},
                    {"Code": "None"},
                ],
            },
            operation,
        )
    return ClientError(
        {"Error": {"Code": "TransactionConflictException", "Message": "Transaction is ongoing for the item"}},
        operation,
    )


class _ConflictingClient:
    """The store's client, its instance writes meeting TransactionConflicts (see the module's docstring)."""

    def __init__(self, inner: Any, races: _Races) -> None:
        self.inner, self.races = inner, races

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def _own(self) -> bool:
        return getcurrent() in self.races.route_tasks

    def update_item(self, **request: Any) -> Any:
        pk = str(request["Key"]["pk"].get("S", ""))
        if pk.startswith(instance_key("")) and self.races.conflicts(pk, self._own()):
            raise _conflict("UpdateItem", transaction=False)
        return self.inner.update_item(**request)

    def transact_write_items(self, **request: Any) -> Any:
        if self._own() and self.races.conflicts("", own=True):
            raise _conflict("TransactWriteItems", transaction=True)
        return self.inner.transact_write_items(**request)
