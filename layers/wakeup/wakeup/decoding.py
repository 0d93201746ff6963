"""The one way the service reads JSON it is sent: a request's body, or a cursor it gave out.

Bytes are UTF-8, strictly; the text is JSON as RFC 8259 defines it (no `NaN` or `Infinity`),
holding no lone surrogate (`"\\ud800"` escapes to no character), nested no deeper than
`MAX_DEPTH`, and an object. Anything else is a `BadRequestError` that names what was wrong, never
an exception that would reach a 5xx.
"""

import json
import sys
from typing import Any

from wakeup.errors import BadRequestError

# Every valid body is one object of strings; this leaves room and stops a `[[[[...` of 16 KiB.
MAX_DEPTH = 8


def decode_object(raw: bytes, what: str = "the body") -> dict[str, Any]:
    """`raw` as a JSON object; `what` names it in the refusal (`the body`, `cursor`)."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise BadRequestError(f"{what} must be JSON encoded in UTF-8") from None
    try:
        value = json.loads(text, parse_constant=_refuse_constant)
    except RecursionError:
        raise BadRequestError(_too_deep(what)) from None
    except json.JSONDecodeError as exc:
        raise BadRequestError(_not_json(what, text, exc)) from None
    except _NotAJsonValue as exc:
        raise BadRequestError(f"{what} is not valid JSON: {exc} is no JSON value") from None
    except ValueError:  # a whole number of more digits than Python converts
        raise BadRequestError(f"{what} holds a number of more than {sys.get_int_max_str_digits()} digits") from None
    if not isinstance(value, dict):
        raise BadRequestError(f"{what} must be a JSON object")
    _check(value, what)
    return value


def _not_json(what: str, text: str, exc: json.JSONDecodeError) -> str:
    """Where the text stops being JSON, in words of our own: the parser's own vary with Python's
    version (Lambda's is not every client's), and its position is all a sender needs. An empty
    body is simply not the object asked for."""
    if not text.strip():
        return f"{what} must be a JSON object"
    return f"{what} is not valid JSON: its first error is at line {exc.lineno}, column {exc.colno}"


class _NotAJsonValue(ValueError):
    """NaN, Infinity or -Infinity, which Python's parser reads and JSON does not have."""


def _refuse_constant(name: str) -> Any:
    raise _NotAJsonValue(name)


def _too_deep(what: str) -> str:
    return f"{what} is nested deeper than {MAX_DEPTH} levels, deeper than any valid request"


def _check(value: dict[str, Any], what: str) -> None:
    """Refuses nesting past `MAX_DEPTH` and strings with a lone surrogate (keys included)."""
    level: list[Any] = [value]
    for _ in range(MAX_DEPTH):
        below: list[Any] = []
        for item in level:
            members = [*item.keys(), *item.values()] if isinstance(item, dict) else item
            for member in members:
                if isinstance(member, str):
                    _check_text(member, what)
                elif isinstance(member, dict | list):
                    below.append(member)
        if not below:
            return
        level = below
    raise BadRequestError(_too_deep(what))


def _check_text(text: str, what: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise BadRequestError(
            f"{what} holds a lone UTF-16 surrogate (such as \\ud800), which is no character"
        ) from None
