"""Wake times for tests that register one and read it back: ahead of now in any year they run.

The service (and the client's fake) stores an `at` already past as the moment it was received,
so a fixed date in a test passes one day and breaks the test with it. The year after next is
always ahead: `f"{year_ahead()}-01-01T09:30:00Z"` names a time that has not come, every time the
test runs. Read it when the test runs, not when its module is imported, so that a test run with a
moved clock (tests/unit/test_dates_ahead.py) moves it too.
"""

from datetime import UTC, datetime


def year_ahead() -> int:
    """A year that has not begun: each of its dates lies ahead of now."""
    return datetime.now(UTC).year + 2
