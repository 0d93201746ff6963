"""What Lambda logs of a function by itself, as its LoggingConfig sets it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# Levels of Lambda's system logs that let its INFO events (START, END, REPORT) through.
SYSTEM_LEVELS_WITH_REPORT = ("DEBUG", "INFO")


def logs_system_lines(properties: Mapping[str, Any]) -> bool:
    """Whether Lambda logs a function's `START`, `END` and `REPORT` (system logs at INFO), from its
    resolved properties: always in the text format; in JSON, unless SystemLogLevel is WARN (INFO
    when unset). "Log-level filtering", Lambda developer guide:
    https://docs.aws.amazon.com/lambda/latest/dg/monitoring-cloudwatchlogs-log-level.html"""
    config = properties.get("LoggingConfig") or {}
    return config.get("LogFormat") != "JSON" or config.get("SystemLogLevel", "INFO") in SYSTEM_LEVELS_WITH_REPORT
