"""`make simulate`'s compiled modules (sim/build_native.py) against the Python ones.

mypyc compiles the same sources, but runs them otherwise: C calls, fixed-width floats, its own
checks of the annotated types. Each side runs here in a process of its own, scenarios of every kind
the simulator has (near and far, cold and warm, hosts down or failing, a registration burst, a
steady rate, bursts registered ahead, an idle stack), and every figure must be the same.
"""

import pickle
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from sim.build_native import HOT
from wakeup_sim.scenarios import Scenario

ROOT = Path(__file__).resolve().parents[2]
HOT_MODULES = tuple(path.removesuffix(".py").replace("/", ".") for path in HOT)

# make simulate's own small ones, and smaller cuts of its larger kinds: each big enough that its
# kind's paths run (the backoff reaches its cap, a burst fills batches and raises the pollers), no
# bigger, as the figures are compared whatever their size and each run is paid twice.
CHOSEN = [
    Scenario("1,000 at one second, near, idle", 1000, reclaimed_after_s=300.0),
    Scenario("1,000 at one second, far, warm", 1000, path="far", warm=True),
    Scenario("300 at one second, near, idle, planner failing", 300, planner=False, reclaimed_after_s=300.0),
    Scenario("steady 0.2/s, idle", 120, rate_per_s=0.2, reclaimed_after_s=300.0),
    Scenario("one host failing for six hours", 1, failing_for_s=6 * 3600),
    Scenario("500 at one second, 10% of hosts down", 500, warm=True, down_fraction=0.1),
    Scenario("500 hosts register far wakes in one second", 500, path="far", registering_within_s=1.0),
    Scenario("500 at one second, registered over the 30 minutes before", 500, registered_over_s=1800.0),
    Scenario("steady 100/s for 5 s, far", 500, path="far", rate_per_s=100, warm=True),
]

# Runs the scenarios (pickled on stdin); prints, pickled, where each hot module was loaded from and
# every scenario's figures.
RUNNER = """
import dataclasses, importlib, pickle, sys
from pathlib import Path
from wakeup_sim import report
from wakeup_sim.deployment import from_template
from wakeup_sim.scenarios import run
modules, scenarios = pickle.load(sys.stdin.buffer)
files = {name: importlib.import_module(name).__file__ for name in modules}
deployment = from_template(Path(sys.argv[1]))
figures = [dataclasses.asdict(report.figures(run(scenario, deployment))) for scenario in scenarios]
sys.stdout.buffer.write(pickle.dumps((files, figures)))
"""


def _start(path_first: list[Path]) -> "subprocess.Popen[bytes]":
    """The runner, started on CHOSEN with `path_first` before the checkout on its path."""
    runner = subprocess.Popen(
        [sys.executable, "-c", RUNNER, str(ROOT / "template.yaml")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={"PYTHONPATH": ":".join(str(p) for p in [*path_first, ROOT]), "PATH": "/usr/bin:/bin"},
    )
    assert runner.stdin is not None
    runner.stdin.write(pickle.dumps((HOT_MODULES, CHOSEN)))  # a few KB: within the pipe's buffer
    runner.stdin.close()
    runner.stdin = None  # written and closed: `communicate` has only to read
    return runner


def _simulated(runner: "subprocess.Popen[bytes]") -> tuple[dict[str, str], list[dict[str, Any]]]:
    out, err = runner.communicate(timeout=600)
    assert runner.returncode == 0, err.decode()
    files, figures = pickle.loads(out)
    return files, figures


def _build(target: Path) -> None:
    # Unoptimised C: -O3 (make simulate's) takes the C compiler much longer and buys little in a
    # run of seconds. The figures do not depend on the level: without -ffast-math, and with no
    # multiply and add fused (build_native.EXTRA_COMPILE_ARGS), each float operation rounds alike.
    command = [sys.executable, str(ROOT / "sim" / "build_native.py"), str(target), "--opt-level", "0"]
    built = subprocess.run(command, capture_output=True)
    # mypyc prints what it refuses on stdout, a compiler its errors on stderr.
    assert built.returncode == 0, f"{built.stdout.decode()}\n{built.stderr.decode()}"


# The longest of `make pytest`'s CPU-heavy run: slow, so that a worker starts with it (tests/conftest.py)
# rather than taking it last and running on alone after the others have finished.
@pytest.mark.slow
def test_compiled_scenarios_give_every_figure_the_python_ones_give(tmp_path: Path) -> None:
    # One test, so that the build (seconds of CPU) is made once, whichever worker runs it. The Python
    # modules' run needs no build: it runs meanwhile, on a core the build may leave idle.
    with _start([]) as python_runner:  # its pipes closed and it waited for, whatever happens
        try:
            native = tmp_path / "sim"
            _build(native)
            compiled = sorted(
                ".".join(p.relative_to(native).with_suffix("").with_suffix("").parts)
                for p in native.glob("wakeup_*/*.so")
            )
            assert compiled == sorted(HOT_MODULES)
            with _start([native]) as native_runner:
                native_files, native_figures = _simulated(native_runner)
            python_files, python_figures = _simulated(python_runner)
        except BaseException:
            python_runner.kill()  # the build or the compiled run failed: its result is not wanted
            raise
    assert all(f.endswith(".so") for f in native_files.values()), native_files
    assert not any(f.endswith(".so") for f in python_files.values()), python_files
    assert len(native_figures) == len(CHOSEN)
    for scenario, compiled_figures, python in zip(CHOSEN, native_figures, python_figures, strict=True):
        # repr: a figure of no value (NaN, an empty list's percentile) is not equal to itself.
        assert repr(compiled_figures) == repr(python), scenario.name
    # Runs that delivered: each scenario's wakes were late by something, and none lost.
    assert all(f["p99_s"] > 0 and f["lost"] == 0 for f in python_figures)
