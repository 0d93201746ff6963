"""`bench.processes`: the benchmark meters a stack's every process, moto's included: the stack
starts moto's fork server, which forks each moto, a grandchild of the stack."""

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.processes import family
from bench.stack import rss_mb

# A process that runs the command it is given (JSON), prints its id and what it printed, then waits.
PARENT = (
    "import json, subprocess, sys; below = subprocess.Popen(json.loads(sys.argv[1]), stdout=subprocess.PIPE,"
    " text=True); print(below.pid, below.stdout.readline().strip(), flush=True); below.wait()"
)
SLEEPER = [sys.executable, "-c", "import time; print(flush=True); time.sleep(60)"]


@pytest.fixture
def three_generations() -> Iterator[list[int]]:
    """A process, its child and its grandchild, in that order."""
    middle = [sys.executable, "-c", PARENT, json.dumps(SLEEPER)]
    top = subprocess.Popen([sys.executable, "-c", PARENT, json.dumps(middle)], stdout=subprocess.PIPE, text=True)
    assert top.stdout is not None
    below = [int(pid) for pid in top.stdout.readline().split()]
    yield [top.pid, *below]
    os.kill(below[-1], 9)
    top.wait(timeout=10)
    top.stdout.close()


def resident_kb(pid: int) -> int:
    [line] = [line for line in Path(f"/proc/{pid}/status").read_text().splitlines() if line.startswith("VmRSS:")]
    return int(line.split()[1])


def test_a_family_is_the_process_its_children_and_theirs(three_generations: list[int]) -> None:
    assert family(three_generations[0]) == three_generations
    assert set(three_generations) <= set(family(os.getpid()))


def test_the_memory_counts_the_grandchildren(three_generations: list[int]) -> None:
    top, child, grandchild = three_generations
    # (half the grandchild's: the processes idle, but their memory is read at other moments)
    assert rss_mb(top) * 1024 > resident_kb(top) + resident_kb(child) + resident_kb(grandchild) / 2
