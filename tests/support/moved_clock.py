"""A pytest plugin that runs a session with the clock moved to mid-2031 (time-machine), from before
the tests are imported, so that a date a test module computes at import moves too.

`pytest -p support.moved_clock tests/...` shows that the tests it runs hold in a year other than
today's (tests/functional/test_dates_ahead.py). The clock ticks on from there; only this process's
clock moves (time.time, datetime.now), not a local stack's in processes of its own.
"""

from datetime import UTC, datetime

import pytest
import time_machine

MOVED_TO = datetime(2031, 7, 1, 12, 0, tzinfo=UTC)
_travel = time_machine.travel(MOVED_TO, tick=True)


def pytest_configure(config: pytest.Config) -> None:
    _travel.start()


def pytest_unconfigure(config: pytest.Config) -> None:
    _travel.stop()


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    terminalreporter.write_line(f"clock moved to {datetime.now(UTC):%Y-%m-%d}")
