"""DynamoDB's capacity rules: units for a write or a read, from the item's size and the table's
indexes, and how many units a table and a partition take a second.

The rules are DynamoDB's own, not estimates:
- "DynamoDB item sizes and formats" (developer guide): an item's size is the sum, over its
  attributes, of the name's UTF-8 bytes plus the value's: a string's UTF-8 bytes; a number's one
  byte per two significant digits, plus one; a null or boolean's one byte.
- "DynamoDB read and write operations": a write unit per 1 KB of the item written (the larger of
  the item before and after an update; a write whose condition fails still consumes one unit per
  1 KB); a strongly consistent read of up to 4 KB is one read unit, an eventually consistent one half.
- "Global secondary indexes" (developer guide, "Provisioned throughput considerations for global
  secondary indexes"): a table write costs index writes too. An item that enters an index costs a
  put of its projection, one that leaves it a delete; a change of an index key's value costs both;
  a change of a projected attribute costs one write; a change of attributes the index does not
  project costs the index nothing.
- "Understanding DynamoDB warm throughput" / "Pre-warming a table for on-demand capacity mode": a
  new on-demand table sustains 4,000 writes and 12,000 reads a second; each partition 1,000 write
  and 3,000 read units a second, an index's partition key value included.
"""

import functools
import math
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from wakeup_awsfacts.template import Resolver, Template

TABLE_KEY = ("pk",)
WRITE_UNIT_BYTES = 1024
READ_UNIT_BYTES = 4096
TABLE_WRITE_UNITS_PER_S = 4000
TABLE_READ_UNITS_PER_S = 12000
PARTITION_WRITE_UNITS_PER_S = 1000


def value_size(value: Any) -> int:
    kind = type(value)
    if kind is str:
        return len(value) if value.isascii() else len(value.encode())
    if kind is int:
        digits = str(abs(value)).rstrip("0") or "0"
        return (len(digits) + 1) // 2 + 1
    if value is None or kind is bool:
        return 1
    if isinstance(value, str):
        return len(value.encode())
    if isinstance(value, int | float | Decimal):
        places = Decimal(str(value)).normalize().as_tuple().digits
        significant = len(places) if any(places) else 1
        return (significant + 1) // 2 + 1
    if isinstance(value, bytes):
        return len(value)
    raise TypeError(f"no DynamoDB size rule for {type(value).__name__}")


@functools.lru_cache(maxsize=1 << 16)
def _decimal_size(value: Decimal) -> int:
    """A number read back from DynamoDB (a `Decimal`) has the size of its value, whatever its
    exponent (DynamoDB normalises it): equal values, one entry."""
    return value_size(value)


def item_size(item: Mapping[str, Any]) -> int:
    # Attribute names here are ASCII: their length is their UTF-8 size. ASCII strings and whole
    # numbers, the most common values, are sized here without a call (the simulation sizes
    # millions of items); numbers read back from the table (`Decimal`) are sized once a value.
    total = 0
    for name, value in item.items():
        kind = type(value)
        if kind is str and value.isascii():
            total += len(name) + len(value)
        elif kind is int:
            total += len(name) + (len(str(abs(value)).rstrip("0") or "0") + 1) // 2 + 1
        elif kind is Decimal:
            total += len(name) + _decimal_size(value)
        elif value is not None:
            total += len(name) + value_size(value)
    return total


def write_units(size: int) -> int:
    return max(1, math.ceil(size / WRITE_UNIT_BYTES))


def read_units(size: int, consistent: bool = True) -> float:
    units = max(1, math.ceil(size / READ_UNIT_BYTES))
    return float(units) if consistent else units / 2


@dataclass(frozen=True)
class Index:
    """A global secondary index: its key attributes and what it projects."""

    name: str
    keys: tuple[str, ...]
    projection: str  # ALL, KEYS_ONLY or INCLUDE
    included: tuple[str, ...] = ()

    def holds(self, item: Mapping[str, Any] | None) -> bool:
        if item is None:
            return False
        for key in self.keys:
            if item.get(key) is None:
                return False
        return True

    @functools.cached_property
    def _projected(self) -> frozenset[str] | None:
        """The attributes the index copies (None: all): known once, not at each entry."""
        if self.projection == "ALL":
            return None
        included = self.included if self.projection == "INCLUDE" else ()
        return frozenset((*self.keys, *TABLE_KEY, *included))

    @functools.cached_property
    def _compared(self) -> tuple[str, ...]:
        """The attributes a `KEYS_ONLY` entry is made of: its keys and the table's."""
        return (*self.keys, *TABLE_KEY)

    def entry(self, item: Mapping[str, Any]) -> dict[str, Any]:
        """The index's copy of `item`: its keys, the table's key, and the projected attributes."""
        names = self._projected
        if names is None:
            return {k: v for k, v in item.items() if v is not None}
        return {k: v for k, v in item.items() if k in names and v is not None}

    def write_units(self, old: Mapping[str, Any] | None, new: Mapping[str, Any] | None) -> int:
        if self.projection == "KEYS_ONLY" and old is not None and new is not None:
            if not _differ(old, new, self._compared):
                return 0  # its entry (its keys and the table's) is unchanged, or absent before and after
        before, after = self.holds(old), self.holds(new)
        if before and not after:
            assert old is not None
            return write_units(item_size(self.entry(old)))
        if after and not before:
            assert new is not None
            return write_units(item_size(self.entry(new)))
        if not (before and after):
            return 0
        assert old is not None and new is not None
        if _differ(old, new, self.keys):
            return write_units(item_size(self.entry(old))) + write_units(item_size(self.entry(new)))
        old_entry, new_entry = self.entry(old), self.entry(new)
        return write_units(item_size(new_entry)) if old_entry != new_entry else 0


def _differ(old: Mapping[str, Any], new: Mapping[str, Any], names: tuple[str, ...]) -> bool:
    """Whether any of the attributes `names` has another value in `new` than in `old`."""
    for name in names:
        if old.get(name) != new.get(name):
            return True
    return False


def indexes_of(template: Template, resolver: Resolver, table: str = "Table") -> list[Index]:
    """The table's global secondary indexes as template.yaml defines them."""
    properties = resolver.resolve(template.resources[table]["Properties"])
    found = []
    for index in properties.get("GlobalSecondaryIndexes", []):
        projection = index.get("Projection", {})
        found.append(
            Index(
                name=index["IndexName"],
                keys=tuple(key["AttributeName"] for key in index["KeySchema"]),
                projection=projection.get("ProjectionType", "ALL"),
                included=tuple(projection.get("NonKeyAttributes", [])),
            )
        )
    return found


def table_write_units(old: Mapping[str, Any] | None, new: Mapping[str, Any] | None) -> int:
    """The table's own units for a put, update or delete: the larger of the item before and after."""
    return write_units(max(item_size(old or {}), item_size(new or {})))
