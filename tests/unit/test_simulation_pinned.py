"""`make simulate`'s figures stay where they were when its speed changes (issue 19): a small
scenario's lateness, lost and called twice, pinned to what it was before the speed work.

A change that moves them on purpose (the model, the service's delivery code) pins the new figures
here and reruns `make simulate` for docs/scaling.md. The scenario fixes the template's sizes that a
cost lever may change, so a new default there does not move it.
"""

import pytest

from wakeup_sim import report
from wakeup_sim.deployment import from_template
from wakeup_sim.scenarios import Scenario, run

# template.yaml's sizes when the figures were pinned (2026-12-01). p99 re-pinned when a batch came to read
# its accounts' signing versions once (the delivery code: 0.583981752 before), when the cold start came
# to source back (issue 36: init unthrottled, 0.041460037 and 0.580492496 before), and when a registration
# came to read its item before its write, the simulator to run `DynamoStore`'s own writes and the caller
# to wait out the clocks' error past a wake's time (issue 37: 0.034550907 and 0.330082417 before), and
# when an invocation's calls came to be kept in the history by one BatchWriteItem after them (issue 36:
# p99 0.243259668 before).
SIZES = {
    "caller_memory_mb": 1024,
    "wake_memory_mb": 1769,
    "sweeper_memory_mb": 512,
    "batch_size": 10,
    "batching_window_s": 1.0,
}


def test_a_small_bursts_figures_are_those_before_the_speed_work() -> None:
    # given make simulate's "1,000 at one second, near, cold" (the planner raising its pollers)
    figures = report.figures(run(Scenario("pinned", 1000, levers=SIZES), from_template()))

    # then its lateness to the microsecond, and no wake lost or called twice
    assert figures.p50_s == pytest.approx(0.051460028, abs=1e-6)
    assert figures.p99_s == pytest.approx(0.245700359, abs=1e-6)
    assert (figures.lost, figures.called_twice) == (0, 0)
