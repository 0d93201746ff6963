"""The fault matrix (`make faults`, sim/wakeup_sim/fault_matrix.py) on a small size: its list of
requests is the layer's, its faults reach every place it names, a few rows keep the promise, and
its watch sees a broken promise when the service is made to break one."""

import ast
from pathlib import Path

import botocore.session
import pytest
from botocore import xform_name

from wakeup.logic import sweeper
from wakeup.table import registrations
from wakeup_sim import fault_matrix
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
