"""The service's log lines as CloudWatch Logs bills them: their bytes, counted, not written.

A steady scenario logs a line a wake. Through `logging` and Powertools' formatter each line cost
about a tenth of the simulation's CPU: a `LogRecord`, the formatter's dictionary, a JSON decode of
the message that fails, the JSON. A line is its statement's fixed part (level, location, message,
timestamp and service: the same length for every line one statement logs, so read from the
formatter once) and its keys' JSON; here `info` and `warning` count those two. A line with
arguments, `extra` or an exception goes through the logger, into a stream that counts its bytes.
tests/unit/test_simulation_logs.py holds the count equal to the formatter's lines.
"""

import io
import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

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
        self._formatter: Any = handler.formatter
        self._terminator = len(handler.terminator)  # type: ignore[attr-defined]
        self._fixed: dict[tuple[int, object, str, int], int] = {}
        self._enabled = logging.getLogger(logger.name).isEnabledFor  # Powertools' own logger

    @property
    def bytes(self) -> int:
        return self.counted + self.stream.bytes

    def _count(self, level: int, msg: object, kwargs: dict[str, Any]) -> None:
        if not self._enabled(level):
            return
        statement = sys._getframe(2)  # the service's line that logs (under `counted_logs`'s `log`)
        code, line = statement.f_code, statement.f_lineno
        key = (level, msg, code.co_name, line)
        fixed = self._fixed.get(key)
        if fixed is None:
            record = logging.LogRecord(logger.name, level, code.co_filename, line, msg, (), None, code.co_name)
            fixed = self._fixed[key] = _size(self._formatter.format(record)) + self._terminator
        keys = {name: value for name, value in kwargs.items() if value is not None}
        # Each key after the fixed part: `,"name":value`, as the formatter's JSON writes it.
        self.counted += fixed + (_size(self._formatter.json_serializer(keys)) - 1 if keys else 0)


# What Powertools' `info` and `warning` take besides the line's keys.
_LOGGERS_OWN = frozenset(("extra", "exc_info", "stack_info", "stacklevel"))


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
            if args or not _LOGGERS_OWN.isdisjoint(kwargs):
                kwargs["stacklevel"] = kwargs.get("stacklevel", 2) + 1  # the statement, not this function
                through(msg, *args, **kwargs)
            else:
                logs._count(level, msg, kwargs)

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
