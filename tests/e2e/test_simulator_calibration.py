"""The simulator against the local stack (issue 10): the same burst on both, the same lateness.

The local profile is measured on this machine (`wakeup_sim.local_profile`: CPU time of moto, the
caller's environments and the stack's process, per request, per batch and per cold start), a burst
of near wakes due at one second runs on the local stack as `make bench` runs one, and the simulator
runs the same scenario with that profile on the cores other work left. p50 and p99 must each agree
within 25% or 100 ms, whichever is larger. The same measured burst must disagree with profiles that
leave out what the local stack's lateness is made of, so that the tolerance proves something.
"""

from dataclasses import replace

import pytest

from wakeup_sim import calibrate
from wakeup_sim.local_profile import measure

WAKES = 100


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_the_simulator_reproduces_the_local_stacks_lateness_at_a_burst() -> None:
    measured = measure()
    comparison = calibrate.compare(measured, WAKES)

    assert len(comparison.local.late_s) == WAKES  # every wake called on the local stack
    assert calibrate.within(comparison.simulated.p50_s, comparison.local_p50_s), calibrate.row(comparison)
    assert calibrate.within(comparison.simulated.p99_s, comparison.local_p99_s), calibrate.row(comparison)

    # Profiles that leave out the machine's shared cores, or the cold starts' CPU, are refused.
    for wrong in (replace(comparison.profile, cores=None), replace(comparison.profile, init_cpu_s=0.0)):
        figures = calibrate.simulate(WAKES, wrong)
        assert not (
            calibrate.within(figures.p50_s, comparison.local_p50_s)
            and calibrate.within(figures.p99_s, comparison.local_p99_s)
        ), wrong
