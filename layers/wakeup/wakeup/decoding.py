"""The one way the service reads JSON it is sent: a request's body, or a cursor it gave out.

Bytes are UTF-8, strictly; the text is JSON as RFC 8259 defines it (no `NaN` or `Infinity`),
holding no lone surrogate (`"\\ud800"` escapes to no character), nested no deeper than
`MAX_DEPTH`, and an object. Anything else is a `BadRequestError` that names what was wrong, never
an exception that would reach a 5xx.
"""

import json
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
    except ValueError as exc:  # NaN or Infinity, which JSON does not have (`_refuse_constant`)
        raise BadRequestError(f"{what} is not valid JSON: {exc}") from None
    if not isinstance(value, dict):
        raise BadRequestError(f"{what} must be a JSON object")
    _check(value, what)
    return value


def _not_json(what: str, text: str, exc: json.JSONDecodeError) -> str:
    """Where the text stops being JSON, in the parser's words (never the text itself): an empty body
    is simply not the object asked for."""
    if not text.strip():
        return f"{what} must be a JSON object"
    return f"{what} is not valid JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}"


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


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
