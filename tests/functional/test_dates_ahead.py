"""The tests that register a wake time and read it back hold in any year: run with the clock moved
to 2031 (time-machine, tests/support/moved_clock.py), they pass as they do today.

They read their dates from `support.moments.year_ahead` or give the code a clock of its own; a
fixed date in one of them (the service, and the client's fake, store an `at` already past as now)
fails this run."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DATED = [
    "tests/client/test_client_fake.py",
    "tests/client/test_client_cli.py",
    "tests/functional/test_wake_function.py",
]


@pytest.mark.slow
def test_the_dated_tests_pass_with_the_clock_in_2031() -> None:
    ran = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "support.moved_clock", "-p", "no:cacheprovider", *DATED],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert "clock moved to 2031-07-01" in ran.stdout
    assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-2000:]
