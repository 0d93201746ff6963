"""The simulator counts the service's log lines as many bytes as Powertools' logger writes for them
(wakeup_sim.logs), without writing them."""

import io
import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from wakeup.observability import logger
from wakeup_sim import scenarios
from wakeup_sim.deployment import from_template
from wakeup_sim.logs import counted_logs
from wakeup_sim.scenarios import Scenario


@dataclass
class Written:
    stream: io.StringIO

    @property
    def bytes(self) -> int:
        return len(self.stream.getvalue().encode())


@contextmanager
def written_logs() -> Iterator[Written]:
    """The logger as the functions run it, writing its lines whole (into memory)."""
    handler = logger.registered_handler
    previous = handler.stream  # type: ignore[attr-defined]
    written = Written(io.StringIO())
    handler.stream = written.stream  # type: ignore[attr-defined]
    try:
        yield written
    finally:
        handler.stream = previous  # type: ignore[attr-defined]


def log_through(method: Callable[..., None], message: str, keys: dict[str, Any]) -> None:
    method(message, **keys)  # one line, so that both ways log from the same location


values = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=30),  # any Unicode: the formatter writes it unescaped, so bytes != characters
)


# Names a line's key may share with what the formatter writes itself (the logger's own keys, one
# appended as the wake handler appends `instance_id`, the formatter's reserved ones).
SHARED_NAMES = ["service", "level", "location", "timestamp", "sampling_rate", "xray_trace_id", "exception_name"]
names = st.one_of(st.from_regex(r"[a-z][a-z_]{0,15}", fullmatch=True), st.sampled_from([*SHARED_NAMES, "instance_id"]))


@given(
    level=st.sampled_from(["info", "warning"]),
    message=st.text(max_size=40),
    keys=st.dictionaries(names, values, max_size=6),
    appended=st.booleans(),
)
def test_a_counted_line_is_as_many_bytes_as_the_logger_writes(
    level: str, message: str, keys: dict[str, Any], appended: bool
) -> None:
    if appended:  # as a wake handler leaves it, when it ran before in this process
        logger.append_keys(instance_id="i-appended-before")
    try:
        with written_logs() as written:
            log_through(getattr(logger, level), message, keys)
        with counted_logs() as counted:
            log_through(getattr(logger, level), message, keys)
    finally:
        logger.remove_keys(["instance_id"])
    assert written.bytes > 0
    assert counted.bytes == written.bytes


def test_a_plain_line_is_counted_without_the_logger_and_keys_appended_meanwhile_are_not_missed() -> None:
    with written_logs() as written:
        log_through(logger.info, "wake called", {"instance_id": "i-1", "status": 200})
        logger.append_keys(account_id="a-1")
        log_through(logger.info, "wake called", {"instance_id": "i-1", "status": 200})
    logger.remove_keys(["account_id"])
    with counted_logs() as counted:
        log_through(logger.info, "wake called", {"instance_id": "i-1", "status": 200})
        assert counted.counted > 0 and counted.stream.bytes == 0  # counted from its parts
        logger.append_keys(account_id="a-1")
        log_through(logger.info, "wake called", {"instance_id": "i-1", "status": 200})
    logger.remove_keys(["account_id"])
    assert counted.stream.bytes > 0  # the second through the logger, with the key appended
    assert counted.bytes == written.bytes


def test_a_line_below_the_loggers_level_counts_nothing() -> None:
    previous = logger.log_level
    logger.setLevel(logging.WARNING)
    try:
        with counted_logs() as counted:
            logger.info("not written", instance_id="i-1")
            quiet = counted.bytes
            logger.warning("written", instance_id="i-1")
    finally:
        logger.setLevel(previous)
    assert quiet == 0 and counted.bytes > 0


def test_a_line_with_an_exception_goes_through_the_logger_and_is_counted() -> None:
    try:
        raise ValueError("boom")
    except ValueError:
        with written_logs() as written:
            log_through(logger.warning, "failed", {"exc_info": True, "instance_id": "i-1"})
        with counted_logs() as counted:
            log_through(logger.warning, "failed", {"exc_info": True, "instance_id": "i-1"})
    assert "Traceback" in written.stream.getvalue() and '"location":"log_through:' in written.stream.getvalue()
    assert counted.bytes == written.bytes


def test_the_loggers_methods_are_its_own_again_after_counting() -> None:
    with counted_logs():
        with counted_logs():
            pass
        assert "info" in vars(logger)  # the outer count's, kept
    assert "info" not in vars(logger) and "warning" not in vars(logger)


def test_a_scenarios_log_bytes_are_what_its_lines_through_the_logger_would_be(monkeypatch: pytest.MonkeyPatch) -> None:
    # Hosts down and hanging: "wake called", "wake call failed", retries and re-arms, at info and warning.
    scenario = Scenario("down", 300, warm=True, down_fraction=0.2)
    counted = scenarios.run(scenario, from_template()).log_bytes
    monkeypatch.setattr(scenarios, "counted_logs", written_logs)
    written = scenarios.run(scenario, from_template()).log_bytes
    assert counted == written > 300 * 200
