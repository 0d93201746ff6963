"""The fault matrix's races on one instance during its calls (sim/wakeup_sim/fault_races.py): the
instance routes' own code run while the caller holds a claim or calls, checked as the account and
the host see it: no call of a wake after its delete's 2xx, none to the old URL after a move's, a
refusal the client can retry, and nothing owed that a delete or a move forgot."""

import pytest

from wakeup.errors import ForbiddenError
from wakeup.table import instances as table_instances
from wakeup_sim import fault_races
from wakeup_sim.fault_matrix import Row, jobs, run_row
from wakeup_sim.fault_races import CLASSES, RATE, Race, RaceClass

WAKES = 200
# The instance routes' writes as they were before the claim held them back: any live claim passes.
ANY_CLAIM = "(attribute_not_exists(claim_until) OR claim_until < :now OR attribute_exists(pk))"


def _row(race: Race) -> Row:
    return run_row(next(c for c in CLASSES if c.race is race), RATE, wakes=WAKES, seed=3)


@pytest.mark.parametrize("race", list(Race))
def test_a_race_row_keeps_the_promise(race: Race) -> None:
    # when: deletes or moves during calls (and conflicts on their writes), through the routes' code
    row = _row(race)
    # then: every route was done, no call after its 2xx, nothing owed lost, no second call at once
    assert row.injected > 0
    assert (row.routes_broken, row.lost, row.concurrent) == (0, 0, 0), row
    assert row.ok


def test_the_conflict_row_meets_transaction_conflicts_on_the_routes_and_the_wake_path() -> None:
    # given: the route requests' own writes, and the wake path's updates while one is under way
    met: dict[bool, int] = {True: 0, False: 0}
    real = fault_races._Races.conflicts

    def counted(self: fault_races._Races, pk: str, own: bool) -> bool:
        conflicted = real(self, pk, own)
        met[own] += conflicted
        return conflicted

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(fault_races._Races, "conflicts", counted)
        row = _row(Race.CONFLICT)
    # then: both sides met conflicts, and the row kept the promise
    assert met[True] > 0 and met[False] > 0, met
    assert row.ok


@pytest.mark.parametrize("race", [Race.DELETE, Race.MOVE])
def test_the_watch_sees_a_call_after_a_routes_2xx(race: Race, monkeypatch: pytest.MonkeyPatch) -> None:
    # given: instance routes whose writes land whatever claim is live (between a claim and its
    # call, the caller then calls the deleted wake, or the old URL)
    monkeypatch.setattr(table_instances, "NO_LIVE_CLAIM", ANY_CLAIM)
    # when
    row = _row(race)
    # then
    assert row.routes_broken > 0 and not row.ok


def test_the_watch_sees_a_refusal_its_client_cannot_retry(monkeypatch: pytest.MonkeyPatch) -> None:
    # given: a delete route that answers 403 for the account's own instance
    def refusing(*_: object, **__: object) -> None:
        raise ForbiddenError()

    monkeypatch.setattr("wakeup.logic.instances.delete", refusing)
    # when
    row = _row(Race.DELETE)
    # then
    assert row.routes_broken > 0 and not row.ok


def test_the_race_rows_are_in_the_matrix_with_their_own_seeds() -> None:
    every = jobs(None, 1000, seed=100, settings=False)
    races = [job for job in every if isinstance(job[0], RaceClass)]
    assert {job[0].race for job in races if isinstance(job[0], RaceClass)} == set(Race)
    assert all(job[2] == fault_races.WAKES for job in races)
    assert len({job[3] for job in every}) == len(every)
