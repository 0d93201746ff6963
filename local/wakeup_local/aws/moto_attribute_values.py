"""DynamoDB's items written into moto's replies, and read from the requests, as they are, not member
by member through the model.

moto serialises a reply by walking the operation's output shape. For an item that means, for each
attribute, trying each of AttributeValue's ten members (S, N, B, ... BOOL) under several spellings
of its name (moto's `XFormedAttributePicker`): a large share of moto's CPU for a registration or a
delivered wake, whose replies carry the instance's item (docs/benchmark.md, "The local stack").

An item here is already what the JSON reply holds: moto's DynamoDB handler turns its values into
`{"S": "..."}`-shaped dicts (`dynamo_to_dict`), and walking the shape gives the same dicts back. So
an attribute value whose one member is a string, a number's string, a boolean, a set of strings
or numbers, or a map or list of such values is written as it is. Anything else (a binary value,
which moto base64-encodes on the way, or a shape moto did not make) goes through moto's own walk.

A request is read the same way: moto parses its JSON, then walks the operation's input shape to
build each value again, trying the ten members of each attribute value of a key, an item or the
expression values (a delivered wake's two writes and its history's batch carry a hundred). Its
JSON parser keeps a string, a number's string or a boolean as it is, so a map of plain attribute
values is taken as one copy of itself; a binary value (which moto decodes from base64) and
anything else go through moto's walk.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

_SCALARS = {"S": str, "N": str, "BOOL": bool, "NULL": bool}
_SETS = frozenset({"SS", "NS"})
_VALUE_SHAPE = "AttributeValue"  # botocore's DynamoDB model: an item is a map of these
_SERVICE = "dynamodb"

Serializer = Any  # moto.core.serialize.BaseJSONSerializer, whose private methods are replaced


def plain_copy(value: Any) -> dict[str, Any] | None:
    """A copy of `value` if it is an attribute value that moto's walk would give back unchanged,
    else None."""
    if type(value) is not dict or len(value) != 1:
        return None
    ((kind, inner),) = value.items()
    scalar = _SCALARS.get(kind)
    if scalar is not None:
        return {kind: inner} if type(inner) is scalar else None
    if kind in _SETS:
        return {kind: list(inner)} if type(inner) is list and all(type(v) is str for v in inner) else None
    if kind == "M":
        members = plain_map(inner)
        return None if members is None else {"M": members}
    if kind == "L" and type(inner) is list:
        items = [plain_copy(item) for item in inner]
        return None if any(item is None for item in items) else {"L": items}
    return None


def plain_map(values: Any) -> dict[str, Any] | None:
    """A copy of a map of attribute values (an item, a key) if each is plain, else None."""
    if type(values) is not dict:
        return None
    copied = {}
    for name, value in values.items():
        plain = plain_copy(value)
        # An empty name moto's walk merges into the map around it (its serializer's empty key).
        if type(name) is not str or not name or plain is None:
            return None
        copied[name] = plain
    return copied


def _mine(serializer: Serializer) -> bool:
    # DynamoDB's replies only, and none that a response transformer could change (the handler
    # class's `RESPONSE_KEY_PATH_TO_TRANSFORMER`, empty for DynamoDB's today).
    return serializer.service_model.service_name == _SERVICE and not getattr(
        serializer._value_picker, "response_transformers", None
    )


def _as_they_are(
    serialize: Callable[..., None], takes: Callable[[Any, str], bool], plain_of: Callable[[Any], Any]
) -> Callable[..., None]:
    """`serialize` (one of moto's JSON serializer's methods), which writes what `takes` a shape and
    key for as it is, when `plain_of` it is not None."""

    def as_they_are(self: Serializer, serialized: Any, value: Any, shape: Any, key: str) -> None:
        if takes(shape, key) and _mine(self):
            plain = plain_of(value)
            if plain is not None:
                serialized[self.get_serialized_name(shape, key)] = plain
                return
        serialize(self, serialized, value, shape, key)

    return as_they_are


def items_as_they_are(serialize_map: Callable[..., None]) -> Callable[..., None]:
    """moto's JSON `_serialize_type_map`, which writes a map of plain attribute values as it is."""
    return _as_they_are(serialize_map, lambda shape, key: getattr(shape.value, "name", None) == _VALUE_SHAPE, plain_map)


def values_as_they_are(serialize_structure: Callable[..., None]) -> Callable[..., None]:
    """moto's JSON `_serialize_type_structure`, which writes a plain attribute value as it is (one
    outside an item: a list's member, a condition check's)."""
    return _as_they_are(serialize_structure, lambda shape, key: bool(key) and shape.name == _VALUE_SHAPE, plain_copy)


def requests_as_they_are(parse_map: Callable[[Any, Any, Any], Any]) -> Callable[[Any, Any, Any], Any]:
    """moto's JSON request parser's `_parse_map`, which takes a DynamoDB map of plain attribute values
    (a key, an item, the expression values) as a copy of itself."""

    def parsed(self: Any, shape: Any, value: Any) -> Any:
        if (
            self.MAP_TYPE is dict
            and getattr(shape.value, "name", None) == _VALUE_SHAPE
            and self.operation_model.service_model.service_name == _SERVICE
        ):
            plain = plain_map(value)
            if plain is not None:
                return plain
        return parse_map(self, shape, value)

    return parsed
