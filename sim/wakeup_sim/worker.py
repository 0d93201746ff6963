"""One scenario in a process of its own: what `make simulate`'s workers run (`wakeup_sim.__main__`).

Each scenario gets a process forked for it alone, from a server process that has imported the
simulator (and matplotlib) once, and which ends with it. A worker that ran scenarios one after
another kept each one's world (its greenlets' frames hold it, and Python's collector does not look
into them), so the later ones ran beside gigabytes of the earlier ones' objects, and a wake's CPU
grows with the heap (docs/scaling.md): a process each leaves a scenario only its own objects.
"""

import gc
import multiprocessing
import time
from collections.abc import Mapping
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from wakeup_sim import report
from wakeup_sim.deployment import from_template
from wakeup_sim.profile import AWS, Profile
from wakeup_sim.scenarios import Scenario, run


def pool(workers: int, plots: bool) -> ProcessPoolExecutor:
    """`workers` processes at a time, each for one scenario, forked from a server that imported this."""
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload([__name__, *(["matplotlib.pyplot"] if plots else [])])
    return ProcessPoolExecutor(max_workers=workers, mp_context=context, max_tasks_per_child=1)


def slug(name: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in name.lower()).strip("-").replace("--", "-")


def simulate(
    scenario: Scenario,
    plots: Path | None,
    parameters: Mapping[str, str] | None = None,
    profile: Profile = AWS,
) -> tuple[report.Figures, float, report.Points]:
    """The scenario's figures, the CPU it took and its lateness points (`report.points`), with
    template.yaml's `parameters` overridden and on `profile`; its plot drawn in `plots` (None: none)."""
    started = time.process_time()
    # The cyclic collector stays off (`run` turns it off while it runs; off here, it stays off after):
    # the process ends with the scenario, and a pass would walk every object the run made.
    gc.disable()
    outcome = run(scenario, from_template(parameters=parameters), profile)
    points = report.points(outcome)
    if plots is not None:
        report.plot(points, scenario.name, plots / f"{slug(scenario.name)}.png")
    # CPU, not wall time: what the scenario needs of a core, however busy the machine is.
    return report.figures(outcome), time.process_time() - started, points
