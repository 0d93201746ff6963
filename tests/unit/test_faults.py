"""The fault matrix (`make faults`, sim/wakeup_sim/fault_matrix.py) on a small size: its list of
requests is the layer's, its faults reach every place it names, a few rows keep the promise, and
its watch sees a broken promise when the service is made to break one."""

import ast
from datetime import UTC, datetime, timedelta
from pathlib import Path

import botocore.session
import pytest
from botocore import xform_name
from botocore.exceptions import ReadTimeoutError

from wakeup.logic import sweeper
from wakeup.model import Trigger
from wakeup.table import registrations
from wakeup.times import epoch_ms
from wakeup_sim import fault_matrix
from wakeup_sim.deployment import from_template
from wakeup_sim.dynamodb import Io, MemoryStore
from wakeup_sim.fault_matrix import CLASSES, run_row
from wakeup_sim.faults import HOST, NOT_SIMULATED, PLACES, Fault, FaultClass, Kind

ROOT = Path(__file__).resolve().parents[2]
SERVICES = ("dynamodb", "sqs", "scheduler", "secretsmanager", "lambda")


def requests_the_layer_makes() -> set[str]:
    """`service:Operation` for every call in the layer and the handlers whose method is a botocore
    operation of the services the functions use; Powertools' `SecretsProvider` reads the secret."""
    session = botocore.session.get_session()
    operations: dict[str, str] = {}
    for service in SERVICES:
        for operation in session.get_service_model(service).operation_names:
            operations.setdefault(xform_name(operation), f"{service}:{operation}")
    found = set()
    for path in [*(ROOT / "layers" / "wakeup").rglob("*.py"), *(ROOT / "functions").rglob("*.py")]:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in operations:
                found.add(operations[node.func.attr])
            if isinstance(node, ast.Name) and node.id == "SecretsProvider":
                found.add("secretsmanager:GetSecretValue")
    return found


def test_every_request_the_layer_makes_has_its_faults_in_the_matrix() -> None:
    # given: what the code calls; when / then: each is a place of the matrix or named as left out
    made = requests_the_layer_makes()
    assert "dynamodb:UpdateItem" in made and "sqs:SendMessage" in made  # the scan finds calls
    assert made - set(PLACES) - set(NOT_SIMULATED) == set()
    # and the matrix names no request the code no longer makes
    assert {place for place in PLACES if ":" in place and not place.startswith("function:")} <= made


def test_every_place_of_the_matrix_is_reached_and_every_class_has_rows() -> None:
    # when: the mix of every fault, on a small size, often enough to meet the rarest requests
    row = run_row(next(c for c in CLASSES if c.name == "mix: everything"), 0.25, wakes=300)
    # then: every place was reached (a request, a function's point, a host call) and met faults
    reached = dict(row.by_place)
    assert all(reached.get(place, 0) > 0 for place in PLACES), reached
    faulted = {label.split(" ")[0] for label, _ in row.by_fault}
    assert set(PLACES) <= faulted, set(PLACES) - faulted
    # and each place's kinds are rows of their own
    single = {(f.place, f.kind) for c in CLASSES if len(c.faults) == 1 for f in c.faults}
    assert single == {(place, kind) for place, (_, kinds) in PLACES.items() for kind in kinds}


@pytest.mark.parametrize(
    "name",
    [
        "dynamodb:UpdateItem applies, reply lost",
        "function:CallerFunction dies",
        "host resets mid-reply",
        "mix: everything",
    ],
)
def test_a_row_keeps_the_promise(name: str) -> None:
    faults = next(c for c in CLASSES if c.name == name)
    row = run_row(faults, 0.1, wakes=200)
    assert row.injected > 0
    assert (row.lost, row.concurrent, row.early, row.over_bound, row.inconsistent) == (0, 0, 0, 0, 0), row
    assert row.ok


def test_the_watch_sees_an_early_call(monkeypatch: pytest.MonkeyPatch) -> None:
    # given: a caller that does not wait out the moment before a wake's time
    monkeypatch.setattr("wakeup.logic.delivery.Caller._wait_until", lambda self, due, now: None)
    # when
    row = run_row(next(c for c in CLASSES if c.name == "host hangs on read"), 0.01, wakes=100)
    # then
    assert row.early > 0 and not row.ok


def test_the_watch_sees_two_calls_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    # given: a table whose claim does not keep a second call out, messages sent twice, and hosts
    # that hang until the call's timeout (the second message comes a read timeout later)
    monkeypatch.setattr(registrations, "NO_LIVE_CLAIM", "(claim_until < :now OR attribute_exists(pk))")
    faults = FaultClass("test", (Fault("sqs:SendMessage", Kind.LOST), Fault(HOST, Kind.READ)))
    # when
    row = run_row(faults, 0.5, wakes=100)
    # then
    assert row.concurrent > 0 and not row.ok


def test_the_watch_sees_a_lost_wake(monkeypatch: pytest.MonkeyPatch) -> None:
    # given: a sweeper that re-arms nothing (the scenario loses one trigger in fifty)
    monkeypatch.setattr(sweeper, "_rearm", lambda store, triggers, instance, now: False)
    monkeypatch.setattr(fault_matrix, "MAX_SETTLE_S", fault_matrix.SETTLE_S)
    # when
    row = run_row(next(c for c in CLASSES if c.name == "host hangs on read"), 0.01, wakes=100)
    # then
    assert row.lost > 0 and not row.ok


def test_a_duplicate_is_put_down_to_its_fault() -> None:
    # when: hosts whose 2xx the caller never sees
    row = run_row(next(c for c in CLASSES if c.name == "host answers 2xx after the timeout"), 0.1, wakes=200)
    # then: each call after a 2xx is counted and explained by that fault
    assert row.duplicates > 0
    assert dict(row.causes) == {"host answers 2xx after the timeout": row.duplicates}


class _LosesReplies(Io):
    """The table answers, but the replies of the next `count` requests to `operation` are lost."""

    def __init__(self, operation: str, count: int) -> None:
        self.operation, self.count = operation, count

    def reply_lost(self, operation: str) -> Exception | None:
        if operation != self.operation or not self.count:
            return None
        self.count -= 1
        return ReadTimeoutError(endpoint_url="https://dynamodb.simulated")


def _store_with_wake(io: Io) -> tuple[MemoryStore, Trigger]:
    store = MemoryStore(from_template().indexes)
    now = datetime.now(UTC)
    account = store.create_account("test", "a" * 64, now)
    instance = store.register_instance(account.id, "https://host.example", "b" * 64, now).instance
    store.register_wake(instance.id, now, "reg-1")
    store.memory.io = io
    return store, Trigger(instance.id, "reg-1", 0)


def test_a_claim_whose_reply_was_lost_is_still_the_callers() -> None:
    # given: the claim's reply lost once; botocore sends it again, and its own write refuses it
    store, trigger = _store_with_wake(_LosesReplies("UpdateItem", 1))
    now = datetime.now(UTC)
    # when
    claim = store.claim_if_due(trigger, epoch_ms(now), now + timedelta(seconds=2), 32_000)
    # then: as DynamoStore's write_id tells, the claim is this caller's
    assert claim.claimed


def test_a_registration_whose_reply_was_lost_returns_its_own_write_as_the_previous_one() -> None:
    # given
    store, trigger = _store_with_wake(_LosesReplies("UpdateItem", 1))
    # when: registered again, its first reply lost (the retry applies it again, ALL_OLD)
    previous = store.register_wake(trigger.instance_id, datetime.now(UTC) + timedelta(hours=1), "reg-2")
    # then
    assert previous is not None and previous.reg == "reg-2"


def test_a_write_whose_every_reply_is_lost_fails_after_botocores_attempts_yet_applied() -> None:
    # given: every attempt's reply lost (an unconditional write: each attempt applies again)
    store, trigger = _store_with_wake(_LosesReplies("UpdateItem", 3))
    # when / then
    with pytest.raises(ReadTimeoutError):
        store.register_wake(trigger.instance_id, datetime.now(UTC), "reg-2")
    assert store.get_instance(trigger.instance_id).reg == "reg-2"  # type: ignore[union-attr]
