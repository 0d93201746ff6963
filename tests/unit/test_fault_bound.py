"""The fault matrix's bound on a wake's recovery (sim/wakeup_sim/fault_matrix.py, `bound_s`) follows
the service's retry schedule: each failed attempt waits by its count of failures in a row
(`wakeup.logic.retry`), whatever failed it, a host or a call that could not be signed."""

import uuid

from wakeup.logic.delivery import Delivery, Result
from wakeup.logic.retry import retry_delay_s
from wakeup.model import Origin, Trigger
from wakeup_sim.engine import Engine
from wakeup_sim.fault_matrix import _deployment, bound_s
from wakeup_sim.faults import FaultClass, FaultInjector, watch_deliveries


def test_a_wakes_bound_waits_out_the_retry_delay_of_each_failed_attempt_whatever_failed_it() -> None:
    # given a wake whose first ten attempts failed in a row, none of them at its host (each call
    # could not be signed: its signing versions' read timed out), as the caller reports them
    instance_id, reg = str(uuid.uuid4()), uuid.uuid4().hex
    injector = FaultInjector(Engine(0.0), FaultClass("none", ()), 0.0, 1, lambda: None)
    deliver = watch_deliveries(injector, lambda trigger, source: Delivery(Result.FAILED, recorded=True))
    for attempt in range(10):
        deliver(Trigger(instance_id, reg, attempt), Origin.QUEUE)
    # when its bound is reckoned
    bound = bound_s(_deployment(), injector, instance_id, at=0.0, called=0.0)
    # then it holds the retries' delays, each doubling from the one before
    assert bound >= sum(retry_delay_s(failures) for failures in range(1, 11))
