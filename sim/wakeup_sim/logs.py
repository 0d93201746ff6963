"""The service's log lines as CloudWatch Logs bills them: their bytes, counted, not written.

A steady scenario logs a line a wake. Through `logging` and Powertools' formatter each line costs
a `LogRecord`, the formatter's dictionary, a JSON decode of the message that fails, and the JSON.
A line is its statement's fixed part (level, location, message, timestamp and service: the same
length for every line one statement logs, so read from the formatter once) and its keys' JSON;
here `info` and `warning` count those two. A line with arguments, `extra` or an exception, a key
the formatter holds or sets itself, or one logged after the logger's own keys changed goes
through the logger, into a stream that counts its bytes.
tests/unit/test_simulation_logs.py holds the count equal to the formatter's lines.
"""

import io
import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from aws_lambda_powertools.logging.formatter import RESERVED_LOG_ATTRS

from wakeup.observability import logger


class _CountingStream(io.TextIOBase):
    """Where the lines that go through the logger go: only their bytes are kept."""

    def __init__(self) -> None:
        self.bytes = 0

    def write(self, text: str) -> int:
        self.bytes += _size(text)
        return len(text)


class LogBytes:
    """The bytes the service's logger wrote while counted (`counted_logs`)."""

    def __init__(self) -> None:
        self.stream = _CountingStream()
        self.counted = 0  # the lines `info` and `warning` counted themselves
        handler = logger.registered_handler
        formatter: Any = handler.formatter  # Powertools' LambdaPowertoolsFormatter
        self._formatter = formatter
        self._terminator = len(handler.terminator)  # type: ignore[attr-defined]
        self._fixed: dict[tuple[int, object, str, int], int] = {}
        self._enabled = logging.getLogger(logger.name).isEnabledFor  # Powertools' own logger
        # The fixed parts are read with the keys the logger holds now: counted only while it holds
        # the same (a handler's `append_keys` stays on the shared logger after it ran).
        self._keys = dict(formatter.get_current_keys()), dict(formatter.thread_safe_get_current_keys())
        # A line's own key of one of these names the formatter drops or puts in another's place.
        self._taken = frozenset(
            (*RESERVED_LOG_ATTRS, *logging.makeLogRecord({}).__dict__, *_FORMATTERS_OWN, *self._keys[0], *self._keys[1])
        )
        # Only a line on one line: `,"name":value` is the formatter's JSON without indents.
        self._compact = formatter.json_indent is None

    @property
    def bytes(self) -> int:
        return self.counted + self.stream.bytes

    def count(self, level: int, msg: object, kwargs: dict[str, Any]) -> bool:
        """Counts the line a statement asked `info` or `warning` for (that statement is two frames
        up: it called `counted_logs`'s `log`, which called this); False when the line must go
        through the logger instead."""
        formatter = self._formatter
        if not (
            self._compact
            and self._taken.isdisjoint(kwargs)
            and formatter.get_current_keys() == self._keys[0]
            and formatter.thread_safe_get_current_keys() == self._keys[1]
        ):
            return False
        if not self._enabled(level):
            return True
        statement = sys._getframe(2)  # the service's line that logs (under `counted_logs`'s `log`)
        code, line = statement.f_code, statement.f_lineno
        key = (level, msg, code.co_name, line)
        fixed = self._fixed.get(key)
        if fixed is None:
            record = logging.LogRecord(logger.name, level, code.co_filename, line, msg, (), None, code.co_name)
            fixed = self._fixed[key] = _size(formatter.format(record)) + self._terminator
        keys = {name: value for name, value in kwargs.items() if value is not None}
        # Each key after the fixed part: `,"name":value`, as the formatter's JSON writes it.
        self.counted += fixed + (_size(formatter.json_serializer(keys)) - 1 if keys else 0)
        return True


# What Powertools' `info` and `warning` take besides the line's keys.
_LOGGERS_OWN = frozenset(("extra", "exc_info", "stack_info", "stacklevel"))
# Keys the formatter sets itself on each line, after a line's own.
_FORMATTERS_OWN = ("message", "exception", "exception_name", "exception_notes", "stack_trace", "xray_trace_id")


def _size(text: str) -> int:
    """`text`'s bytes in UTF-8."""
    return len(text) if text.isascii() else len(text.encode())


@contextmanager
def counted_logs() -> Iterator[LogBytes]:
    """The service's logger, counting its lines' bytes for the simulation's length."""
    logs = LogBytes()
    handler = logger.registered_handler
    previous = handler.stream  # type: ignore[attr-defined]
    handler.stream = logs.stream  # type: ignore[attr-defined]
    own = {name: logger.__dict__[name] for name in ("info", "warning") if name in logger.__dict__}
    info, warning = logger.info, logger.warning

    def counted(level: int, through: Any) -> Any:
        def log(msg: object, *args: object, **kwargs: Any) -> None:
            if args or not _LOGGERS_OWN.isdisjoint(kwargs) or not logs.count(level, msg, kwargs):
                kwargs["stacklevel"] = kwargs.get("stacklevel", 2) + 1  # the statement, not this function
                through(msg, *args, **kwargs)

        return log

    logger.info = counted(logging.INFO, info)  # type: ignore[method-assign]
    logger.warning = counted(logging.WARNING, warning)  # type: ignore[method-assign]
    try:
        yield logs
    finally:
        for name in ("info", "warning"):  # as they were: the class's methods, or an outer count's
            if name in own:
                setattr(logger, name, own[name])
            else:
                delattr(logger, name)
        handler.stream = previous  # type: ignore[attr-defined]
