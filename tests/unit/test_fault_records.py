"""The fault matrix allows a duplicate whose record could not be written within its claim's lease
(sim/wakeup_sim/fault_records.py): every attempt of the caller's outcome write, made after a 2xx it
saw, failed or applied only after the lease's end, and the caller went on trying until the lease
ended. Any other duplicate after a seen and recorded 2xx is still unexplained and fails its row."""

import math
from typing import Any

import pytest
from botocore.exceptions import ReadTimeoutError
from greenlet import getcurrent

from wakeup.deadlines import AWS_REQUEST
from wakeup.logic.outcomes import Outcomes
from wakeup.model import Trigger
from wakeup_sim import faults
from wakeup_sim.fault_matrix import run_row
from wakeup_sim.fault_records import UNRECORDED, RecordAttempt, RecordLog
from wakeup_sim.faults import CallNote, FaultClass, FaultInjector

LEASE_END = 100.0
AFTER = LEASE_END + 1.0  # the second call's start


def _timed_out(sent: float) -> RecordAttempt:
    return RecordAttempt(sent=sent, ended=sent + 2.0, failed=True, left_s=20.0)


@pytest.mark.parametrize(
    ("attempts", "out_of_time", "now", "lapsed"),
    [
        # every attempt in the lease timed out, the last one past its end: the floor
        ([_timed_out(90.0), _timed_out(94.0), _timed_out(98.5)], False, AFTER, True),
        # the last one still under way when the second call starts
        ([_timed_out(90.0), RecordAttempt(sent=99.0)], False, AFTER, True),
        # one its client timed out on, which landed and applied after the lease
        ([_timed_out(90.0), RecordAttempt(99.0, 101.0, failed=True, applied=105.0)], False, AFTER, True),
        # the caller stopped for its invocation's time: the last attempt left too little for a request
        ([RecordAttempt(90.0, 92.0, failed=True, left_s=AWS_REQUEST.worst_s - 1)], False, AFTER, True),
        # or its next request was not sent for it
        ([_timed_out(90.0)], True, AFTER, True),
        # an attempt applied within the lease (its reply lost): the table knew of the 2xx
        ([_timed_out(90.0), RecordAttempt(93.0, 95.0, failed=False, applied=93.0)], False, AFTER, False),
        # one its client timed out on that landed within the lease
        ([RecordAttempt(90.0, 92.0, failed=True, applied=97.0), _timed_out(98.5)], False, AFTER, False),
        # an attempt refused within the lease: no fault explains it
        ([_timed_out(90.0), RecordAttempt(93.0, 93.1, left_s=20.0), _timed_out(98.5)], False, AFTER, False),
        # the caller gave up long before the lease's end, with time left
        ([_timed_out(90.0)], False, AFTER, False),
        # never tried
        ([], False, AFTER, False),
        # a second call within the lease is never the floor
        ([_timed_out(90.0), _timed_out(98.5)], False, LEASE_END - 1.0, False),
    ],
)
def test_a_record_lapses_only_when_no_attempt_could_write_it_within_the_lease(
    attempts: list[RecordAttempt], out_of_time: bool, now: float, lapsed: bool
) -> None:
    assert RecordLog(LEASE_END, attempts, out_of_time).lapsed(now) is lapsed


def test_a_record_whose_lease_end_is_unknown_never_lapses() -> None:
    assert not RecordLog(math.inf, [_timed_out(90.0)]).lapsed(AFTER)


def _first_records_time_out(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every attempt of the record after each registration's first seen 2xx times out before it
    applies, at the row's DynamoDB seam (`FaultInjector.fault`), for as long as it is tried."""
    real = FaultInjector.fault
    first: dict[tuple[str, str], CallNote] = {}

    def fault(self: FaultInjector, place: str, attempt: int) -> Exception | None:
        note = self.call_note.get(getcurrent())
        if place == "dynamodb:UpdateItem" and note is not None and note.seen:
            if first.setdefault(note.key, note) is note:
                self.note("dynamodb:UpdateItem times out before it applies")
                self.engine.sleep(faults.READ_TIMEOUT_S)
                return ReadTimeoutError(endpoint_url="https://dynamodb.simulated")
        return real(self, place, attempt)

    monkeypatch.setattr(FaultInjector, "fault", fault)


def test_a_duplicate_after_a_record_no_attempt_could_write_within_the_lease_is_allowed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # given: each wake's first record fails at every attempt, and the caller tries until its
    # lease ends (the service's own `Outcomes.write`)
    _first_records_time_out(monkeypatch)
    # when
    row = run_row(FaultClass("no fault", ()), 0.0, wakes=10)
    # then: each wake is called again once the lease has ended, a duplicate the table could not
    # have prevented, and the row passes
    assert row.duplicates > 0 and row.unexplained == 0 and row.ok
    assert dict(row.causes) == {UNRECORDED: row.duplicates}


def test_a_duplicate_after_a_record_given_up_within_the_lease_is_unexplained(monkeypatch: pytest.MonkeyPatch) -> None:
    # given: the same failing records, and a caller that gives its record up after one request,
    # with its lease and its time still left
    _first_records_time_out(monkeypatch)

    def once(self: Outcomes, write: Any, trigger: Trigger, lease_until_ms: int) -> bool:
        return bool(write())  # a failed request raised as it is

    monkeypatch.setattr(Outcomes, "write", once)
    # when
    row = run_row(FaultClass("no fault", ()), 0.0, wakes=10)
    # then: the second calls are the service's, and fail the row
    assert row.unexplained > 0 and not row.ok
    assert UNRECORDED not in dict(row.causes)
