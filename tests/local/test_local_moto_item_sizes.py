"""The local stack's moto checks an item's size as moto does (moto_item_sizes.py): the same sums,
value for value, and the same items refused at the same attribute with moto's own error.

moto's `LimitedSizeDict` runs here as it comes, beside a subclass with the replaced method (this
process's moto stays unpatched).
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from moto.dynamodb.exceptions import ItemSizeTooLarge
from moto.dynamodb.models.dynamo_type import DynamoType, LimitedSizeDict
from moto.dynamodb.models.utilities import bytesize

from wakeup_local.aws.moto_item_sizes import MOTO_ITEM_LIMIT, size_of, sized_as_moto_sizes


class Sized(LimitedSizeDict):
    __setitem__ = sized_as_moto_sizes(LimitedSizeDict.__setitem__)  # type: ignore[assignment]


def moto_size(value: Any) -> int:
    """What moto's own `__setitem__` counts for one name or value."""
    return int(value.size()) if type(value) is DynamoType else bytesize(str(value))


numbers = st.decimals(allow_nan=False, allow_infinity=False, places=3).map(str)
scalars = st.one_of(
    st.text(max_size=20).map(lambda s: {"S": s}),
    numbers.map(lambda n: {"N": n}),
    st.binary(max_size=12).map(lambda b: {"B": b}),
    st.booleans().map(lambda b: {"BOOL": b}),
    st.just({"NULL": True}),
    st.lists(st.text(max_size=6), min_size=1, max_size=3, unique=True).map(lambda v: {"SS": v}),
    st.lists(numbers, min_size=1, max_size=3, unique=True).map(lambda v: {"NS": v}),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3).map(lambda v: {"L": v}),
        st.dictionaries(st.text(min_size=1, max_size=6), inner, max_size=3).map(lambda v: {"M": v}),
    ),
    max_leaves=6,
)
items = st.dictionaries(st.text(min_size=1, max_size=10), values, max_size=12)


@settings(max_examples=200, deadline=None)
@given(item=items)
def test_each_name_and_value_counts_what_moto_counts(item: dict[str, Any]) -> None:
    for name, value in item.items():
        typed = DynamoType(value)
        assert size_of(typed) == moto_size(typed)
        assert size_of(name) == moto_size(name)


def set_each(attributes: type[LimitedSizeDict], item: list[tuple[str, Any]]) -> tuple[int, dict[str, Any]]:
    """Sets the item's attributes one by one: how many were set before a refusal (all: none), and
    what the dict holds."""
    held = attributes()
    for count, (name, value) in enumerate(item):
        try:
            held[name] = value
        except ItemSizeTooLarge:
            return count, dict(held)
    return len(item), dict(held)


@settings(max_examples=100, deadline=None)
@given(
    sizes=st.lists(st.integers(min_value=1, max_value=150_000), min_size=1, max_size=6),
    number=st.booleans(),
)
def test_an_item_is_refused_at_the_attribute_moto_refuses_it_at(sizes: list[int], number: bool) -> None:
    item = [
        (f"a{index}", DynamoType({"N": "1" * size} if number else {"S": "é" * (size // 2)}))
        for index, size in enumerate(sizes)
    ]
    assert set_each(Sized, item) == set_each(LimitedSizeDict, item)


@pytest.mark.parametrize("extra", [0, 1])
def test_the_limit_is_moto_s_to_the_byte(extra: int) -> None:
    # one attribute "a" whose string is the rest of the limit (and one byte more)
    value = DynamoType({"S": "x" * (MOTO_ITEM_LIMIT - 1 + extra)})
    for attributes in (Sized, LimitedSizeDict):
        held = attributes()
        if extra:
            with pytest.raises(ItemSizeTooLarge):
                held["a"] = value
        else:
            held["a"] = value
            assert held["a"] is value
