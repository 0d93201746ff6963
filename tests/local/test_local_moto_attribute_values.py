"""The local stack's moto writes DynamoDB's items into a reply as they are (moto_attribute_values.py),
and its replies are byte for byte what moto's own walk through the service model writes; it reads a
request's keys, items and expression values as they are, into what moto's own parse makes of them.

moto's serializer runs here in this process, as it comes and with the two methods replaced (on a
subclass: this process's moto stays unpatched), on the results moto's DynamoDB handler gives it
(`DynamoResult`: items made of `DynamoType`s, as moto's tables hold them).
"""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from moto.core.parse import JSONParser
from moto.core.serialize import JSONSerializer, XFormedAttributePicker
from moto.core.utils import get_service_model
from moto.dynamodb.models.dynamo_type import DynamoType
from moto.dynamodb.responses import DynamoResult

from wakeup_local.aws import moto_attribute_values
from wakeup_local.aws.moto_attribute_values import items_as_they_are, requests_as_they_are, values_as_they_are

DYNAMODB = get_service_model("dynamodb")


class WalkCounted(JSONSerializer):
    """moto's serializer, counting the attribute values it walks member by member."""

    walked = 0

    def _serialize_type_structure(self, serialized: Any, value: Any, shape: Any, key: str) -> None:
        if shape.name == "AttributeValue":
            WalkCounted.walked += 1
        super()._serialize_type_structure(serialized, value, shape, key)


class AsTheyAre(WalkCounted):
    """The same, with the local stack's two methods."""

    _serialize_type_map = items_as_they_are(WalkCounted._serialize_type_map)
    _serialize_type_structure = values_as_they_are(WalkCounted._serialize_type_structure)


def reply(serializer: type[JSONSerializer], operation: str, result: dict[str, Any]) -> str:
    """The body moto's DynamoDB handler answers `result` with (`ActionResult.execute_result`)."""
    picker = XFormedAttributePicker(response_transformers={})
    made = serializer(operation_model=DYNAMODB.operation_model(operation), value_picker=picker)
    body = made.serialize(DynamoResult(result).result)["body"]
    assert isinstance(body, str)
    return body


names = st.text(min_size=1, max_size=8)
any_names = st.text(max_size=8)  # the empty name too, which moto stores and its walk merges away
numbers = st.decimals(allow_nan=False, allow_infinity=False, places=3).map(str)
plain_scalars = st.one_of(
    st.text(max_size=12).map(lambda s: {"S": s}),
    numbers.map(lambda n: {"N": n}),
    st.booleans().map(lambda b: {"BOOL": b}),
    st.just({"NULL": True}),
    st.lists(st.text(max_size=6), min_size=1, max_size=4, unique=True).map(lambda s: {"SS": s}),
    st.lists(numbers, min_size=1, max_size=4, unique=True).map(lambda n: {"NS": n}),
)
binary_scalars = st.one_of(
    st.binary(max_size=12).map(lambda b: {"B": b}),
    st.lists(st.binary(min_size=1, max_size=6), min_size=1, max_size=3, unique=True).map(lambda b: {"BS": b}),
)


def attribute_values(
    scalars: st.SearchStrategy[dict[str, Any]], keys: st.SearchStrategy[str] = names
) -> st.SearchStrategy[dict[str, Any]]:
    return st.recursive(
        scalars,
        lambda inner: st.one_of(
            st.dictionaries(keys, inner, max_size=4).map(lambda m: {"M": m}),
            st.lists(inner, max_size=4).map(lambda items: {"L": items}),
        ),
        max_leaves=12,
    )


def stored(item: dict[str, dict[str, Any]]) -> dict[str, DynamoType]:
    """The item as moto's table holds it."""
    return {name: DynamoType(value) for name, value in item.items()}


plain_items = st.dictionaries(names, attribute_values(plain_scalars), min_size=1, max_size=8)
any_items = st.dictionaries(
    any_names, attribute_values(st.one_of(plain_scalars, binary_scalars), any_names), min_size=1, max_size=8
)


@settings(max_examples=60, deadline=None)
@given(item=any_items, old=plain_items, more=st.lists(any_items, max_size=3))
def test_replies_are_byte_for_byte_moto_s_own(
    item: dict[str, Any], old: dict[str, Any], more: list[dict[str, Any]]
) -> None:
    # given the results of the item operations the service makes: a read, an update's new image
    # and a failed condition's old one, a query's page
    capacity = {"TableName": "t", "CapacityUnits": 0.5}
    results = [
        ("GetItem", {"Item": stored(item)}),
        ("UpdateItem", {"Attributes": stored(item), "ConsumedCapacity": capacity}),
        ("PutItem", {"Attributes": stored(old)}),
        ("Query", {"Items": [stored(one) for one in [item, *more]], "Count": 1 + len(more), "ScannedCount": 3}),
        ("BatchGetItem", {"Responses": {"t": [stored(one) for one in more]}, "UnprocessedKeys": {}}),
    ]
    for operation, result in results:
        # then the local stack's moto answers each as moto does
        assert reply(AsTheyAre, operation, result) == reply(WalkCounted, operation, result)


@settings(max_examples=50, deadline=None)
@given(item=plain_items)
def test_a_plain_item_is_not_walked_member_by_member(item: dict[str, Any]) -> None:
    WalkCounted.walked = 0
    body = reply(AsTheyAre, "UpdateItem", {"Attributes": stored(item)})
    assert WalkCounted.walked == 0
    assert json.loads(body) == {"Attributes": item}


def test_a_binary_value_goes_through_moto_s_walk_base64_encoded() -> None:
    WalkCounted.walked = 0
    body = reply(AsTheyAre, "GetItem", {"Item": stored({"pk": {"S": "a"}, "b": {"B": b"\x00\xff"}})})
    assert WalkCounted.walked > 0
    assert json.loads(body) == {"Item": {"pk": {"S": "a"}, "b": {"B": "AP8="}}}


@pytest.mark.parametrize(
    "value",
    [{"S": 1}, {"N": 2}, {"S": "a", "N": "1"}, {}, {"SS": ["a", 1]}, {"BOOL": "yes"}, {"X": "a"}, "S", {"L": "ab"}],
)
def test_a_value_moto_did_not_make_is_not_taken_as_it_is(value: Any) -> None:
    assert moto_attribute_values.plain_copy(value) is None


def test_replies_of_other_services_are_moto_s_own_walk(monkeypatch: pytest.MonkeyPatch) -> None:
    # given a DynamoDB Streams reply, whose items are DynamoDB's shapes under another service
    streams = get_service_model("dynamodbstreams")
    records = {"Records": [{"dynamodb": {"NewImage": {"pk": {"S": "a"}}}}]}
    WalkCounted.walked = 0
    picker = XFormedAttributePicker(response_transformers={})
    made = AsTheyAre(operation_model=streams.operation_model("GetRecords"), value_picker=picker)
    # then it is walked as moto walks it
    assert json.loads(made.serialize(records)["body"]) == records
    assert WalkCounted.walked == 1


def test_a_map_with_an_empty_name_goes_through_moto_s_walk() -> None:
    # moto's walk merges an empty name's value into the map around it; it is left to moto
    assert moto_attribute_values.plain_map({"": {"S": "x"}}) is None
    assert moto_attribute_values.plain_copy({"M": {"": {"S": "x"}}}) is None


class ParseCounted(JSONParser):
    """moto's JSON request parser, counting the attribute values it parses member by member."""

    walked = 0

    def _parse_structure(self, shape: Any, value: Any) -> Any:
        if shape.name == "AttributeValue":
            ParseCounted.walked += 1
        return super()._parse_structure(shape, value)


class ReadAsTheyAre(ParseCounted):
    """The same, with the local stack's `_parse_map`."""

    _parse_map = requests_as_they_are(ParseCounted._parse_map)


def parsed(parser: type[JSONParser], operation: str, request: dict[str, Any], service: Any = DYNAMODB) -> Any:
    """What moto's handler reads from `request`'s JSON body (`BaseResponse.parse_parameters`)."""
    made = parser(service.operation_model(operation), map_type=dict)
    return made.parse({"method": "POST", "values": {}, "headers": {}, "body": json.dumps(request).encode()})


def _requests(item: dict[str, Any], values: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """The requests of a registration, a delivered wake and its history carrying `item` and `values`."""
    key = {"pk": {"S": "INSTANCE#1"}}
    return [
        ("PutItem", {"TableName": "t", "Item": item, "ExpressionAttributeValues": values}),
        (
            "UpdateItem",
            {"TableName": "t", "Key": key, "UpdateExpression": "SET a = :a", "ExpressionAttributeValues": values},
        ),
        ("BatchWriteItem", {"RequestItems": {"t": [{"PutRequest": {"Item": item}}, {"DeleteRequest": {"Key": key}}]}}),
        ("GetItem", {"TableName": "t", "Key": key}),
    ]


@settings(max_examples=60, deadline=None)
@given(item=any_items, values=any_items)
def test_requests_are_read_as_moto_s_own_parse_reads_them(item: dict[str, Any], values: dict[str, Any]) -> None:
    encoded = {name: _json_ready(value) for name, value in item.items()}
    encoded_values = {name: _json_ready(value) for name, value in values.items()}
    for operation, request in _requests(encoded, encoded_values):
        assert parsed(ReadAsTheyAre, operation, request) == parsed(JSONParser, operation, request)


@settings(max_examples=50, deadline=None)
@given(item=plain_items)
def test_a_request_s_plain_item_is_not_parsed_member_by_member(item: dict[str, Any]) -> None:
    ParseCounted.walked = 0
    read = parsed(ReadAsTheyAre, "PutItem", {"TableName": "t", "Item": item})
    assert ParseCounted.walked == 0
    assert read["Item"] == item


def test_a_request_s_binary_value_goes_through_moto_s_parse_decoded() -> None:
    ParseCounted.walked = 0
    read = parsed(ReadAsTheyAre, "PutItem", {"TableName": "t", "Item": {"pk": {"S": "a"}, "b": {"B": "AP8="}}})
    assert ParseCounted.walked > 0
    assert read["Item"] == {"pk": {"S": "a"}, "b": {"B": b"\x00\xff"}}


def test_requests_of_other_services_are_moto_s_own_parse() -> None:
    # given a DynamoDB Streams request (no attribute value map), then it is read as moto reads it
    streams = get_service_model("dynamodbstreams")
    request = {"ShardIterator": "abc", "Limit": 5}
    assert parsed(ReadAsTheyAre, "GetRecords", request, streams) == parsed(JSONParser, "GetRecords", request, streams)


def _json_ready(value: Any) -> Any:
    """An attribute value as it travels in a request's JSON: bytes base64-encoded, as botocore sends them."""
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    if isinstance(value, dict):
        return {key: _json_ready(inner) for key, inner in value.items()}
    if isinstance(value, list):
        return [_json_ready(inner) for inner in value]
    return value
