"""moto's item size check (DynamoDB's 400 KB a item), with a string's and a number's size read
without `DynamoType.size`'s dispatch.

moto keeps an item's attributes in a `LimitedSizeDict`, which adds up the size of every attribute
name and value each time one attribute is set: an item made or updated sets a dozen, so its sizes
are added up a dozen times over, a share of moto's CPU for each registration and delivered wake
(docs/benchmark.md, "The local stack"). Here the sum is the same, value for value, and the same
limit refuses the same items with the same error: only a string's size (its UTF-8 bytes) and a
number's (the characters of its text), nearly all of an item, are read directly; any other value
is sized by moto's own `size()`, and anything not a `DynamoType` (the names) by its text, as moto
sizes it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from moto.dynamodb.exceptions import ItemSizeTooLarge
from moto.dynamodb.models.dynamo_type import DynamoType
from moto.dynamodb.models.utilities import bytesize

# moto's limit (`LimitedSizeDict.__setitem__`): above DynamoDB's 400,000 bytes, where moto's authors
# measured DynamoDB's own refusals.
MOTO_ITEM_LIMIT = 405_000


def size_of(value: Any) -> int:
    """What moto's `LimitedSizeDict` counts for one attribute name or value."""
    if type(value) is DynamoType:
        kind = value.type
        if kind == "S" and type(value.value) is str:
            return len(value.value.encode("utf-8"))
        if kind == "N" and type(value.value) is str:
            return len(value.value)
        return int(value.size())
    return bytesize(str(value))


def sized_as_moto_sizes(setitem: Callable[[Any, str, Any], None]) -> Callable[[Any, str, Any], None]:
    """moto's `LimitedSizeDict.__setitem__` (`setitem`, kept for its name only), its sums read as above."""

    def __setitem__(self: dict[str, Any], key: str, value: Any) -> None:  # noqa: N807 - the method it replaces
        current = sum(map(size_of, self.keys())) + sum(map(size_of, self.values()))
        if current + bytesize(key) + size_of(value) > MOTO_ITEM_LIMIT:
            raise ItemSizeTooLarge
        dict.__setitem__(self, key, value)

    __setitem__.__wrapped__ = setitem  # type: ignore[attr-defined]
    return __setitem__
