"""The cursors of the instances' listing: an index entry's key, as an opaque url-safe string."""

import base64
import binascii
import json

from wakeup.decoding import decode_object
from wakeup.errors import BadRequestError
from wakeup.table.items import Item


def encode_cursor(key: Item) -> str:
    return base64.urlsafe_b64encode(json.dumps(key, sort_keys=True).encode()).decode().rstrip("=")


def decode_cursor(cursor: str, list_pk: str) -> Item:
    """A cursor back into the key it came from, refused unless it is this account's listing's."""
    refused = BadRequestError("cursor is not one this service gave for this listing; start without it")
    try:
        key = decode_object(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)), "cursor")
    except (binascii.Error, ValueError, BadRequestError):
        raise refused from None
    if key.get("list_pk") != list_pk or set(key) != {"pk", "list_pk", "list_sk"}:
        raise refused
    if not all(isinstance(v, str) for v in key.values()):
        raise refused
    return key
