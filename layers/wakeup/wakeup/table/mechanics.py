"""DynamoDB's mechanics, apart from what is stored: reads by key with backoff, paged index
queries, the retry-safe conditional update, and reading a refused write or a cancelled transaction."""

import random
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from wakeup import aws
from wakeup.errors import UnavailableError
from wakeup.observability import logger
from wakeup.table.items import Item, dump, load

# BatchGetItem's most keys a request, BatchWriteItem's most puts; how often a batch's unprocessed
# keys or items are sent again, and the longest wait between two sends.
BATCH_GET_KEYS = 100
BATCH_WRITE_ITEMS = 25
_UNPROCESSED_ATTEMPTS = 8
_UNPROCESSED_BACKOFF_CAP_S = 2.0


def unprocessed_wait_s(ask: int) -> float:
    """The wait before a batch's `ask`-th send of what it left unprocessed: exponential, with full
    jitter, as DynamoDB advises for both batch requests."""
    return random.uniform(0, min(_UNPROCESSED_BACKOFF_CAP_S, 0.05 * 2**ask))


@dataclass(frozen=True)
class Written:
    """What a conditional write came to: applied or not, and the item as it is now (None: gone, or
    an applied write that asked for no item)."""

    applied: bool
    item: Item | None


def condition_failed(exc: ClientError) -> bool:
    return aws.error_code(exc) == "ConditionalCheckFailedException"


def refused_item(exc: ClientError) -> Item | None:
    """The item as it stood when a write's condition refused it (asked for with
    `ReturnValuesOnConditionCheckFailure`); any other error is raised again."""
    if not condition_failed(exc):
        raise exc
    item = exc.response.get("Item")
    return load(item) if isinstance(item, dict) else None


def cancellation_reasons(exc: ClientError, actions: int) -> list[dict[str, Any]]:
    """A cancelled transaction's reason for each of its `actions`, in order ({} where none is given)."""
    reasons: list[dict[str, Any]] = [dict(reason) for reason in exc.response.get("CancellationReasons", [])]
    return (reasons + [{}] * actions)[:actions]


class Table:
    """One DynamoDB table through one client: the requests every kind of item shares."""

    def __init__(self, table: str, client: Any, sleep: Callable[[float], None]) -> None:
        self.table = table
        self.client = client
        self.sleep = sleep

    def get(self, pk: str) -> Item | None:
        """The item by one consistent read; None when there is none."""
        found = self.client.get_item(TableName=self.table, Key=dump({"pk": pk}), ConsistentRead=True)
        return load(found["Item"]) if "Item" in found else None

    def put_new(self, item: Item) -> dict[str, Any]:
        """A transaction's action that writes `item` only where no item is."""
        return {"Put": {"TableName": self.table, "Item": dump(item), "ConditionExpression": "attribute_not_exists(pk)"}}

    # Both indexes project keys only (template.yaml: `KEYS_ONLY`, "Projection" in the DynamoDB API
    # reference: https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_Projection.html),
    # so that a claim or an outcome, which change no index key, costs no index write. A query of
    # an index therefore returns keys (`pk` and the index's own), and the items are read by key.
    def query_keys(self, **kwargs: Any) -> Iterator[Item]:
        """The index entries a query finds, page after page (DynamoDB stops a page at 1 MB)."""
        while True:
            page = self.client.query(TableName=self.table, **kwargs)
            yield from (load(entry) for entry in page["Items"])
            if "LastEvaluatedKey" not in page:
                return
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    def read_items(self, pks: Sequence[str], consistent: bool = False) -> list[Item]:
        """The items with these keys, in the order given; a key whose item is gone is left out.

        BatchGetItem reads at most 100 keys a request, and may answer part of them, the rest in
        `UnprocessedKeys`, which DynamoDB advises asking for again with exponential backoff
        ("BatchGetItem", DynamoDB API reference:
        https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_BatchGetItem.html).
        """
        found: dict[str, Item] = {}
        unique = list(dict.fromkeys(pks))  # BatchGetItem refuses a key asked for twice
        for start in range(0, len(unique), BATCH_GET_KEYS):
            keys = [dump({"pk": pk}) for pk in unique[start : start + BATCH_GET_KEYS]]
            request: dict[str, Any] = {self.table: {"Keys": keys, "ConsistentRead": consistent}}
            for ask in range(_UNPROCESSED_ATTEMPTS):
                if ask:
                    self.sleep(unprocessed_wait_s(ask))
                answer = self.client.batch_get_item(RequestItems=request)
                for item in answer.get("Responses", {}).get(self.table, []):
                    loaded = load(item)
                    found[loaded["pk"]] = loaded
                request = answer.get("UnprocessedKeys") or {}
                if not request:
                    break
            else:
                raise UnavailableError("the table is too busy to read this now; retry the request")
        return [found[pk] for pk in pks if pk in found]

    def put_items(self, items: Sequence[Item], may_wait: Callable[[float], bool]) -> list[str]:
        """Puts `items` (no condition, each whole), 25 a `BatchWriteItem`; returns the keys of those
        not written, for the caller to log: a request's that failed, botocore's retries included, and
        those still unprocessed when the sends run out or `may_wait(seconds)` refuses the next wait.

        Each put of a BatchWriteItem is the PutItem it stands for, atomic and billed alike, but the
        batch is not: under throttling or an internal error it answers the puts it did not make in
        `UnprocessedItems`, which DynamoDB advises sending again with exponential backoff
        ("BatchWriteItem", DynamoDB API reference:
        https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_BatchWriteItem.html).
        A put sent again is the same whole item, so one applied twice leaves what one leaves.
        """
        unwritten: list[str] = []
        for start in range(0, len(items), BATCH_WRITE_ITEMS):
            batch = items[start : start + BATCH_WRITE_ITEMS]
            left = [str(item["pk"]) for item in batch]
            request: dict[str, Any] = {self.table: [{"PutRequest": {"Item": dump(item)}} for item in batch]}
            try:
                for ask in range(_UNPROCESSED_ATTEMPTS):
                    if ask:
                        wait_s = unprocessed_wait_s(ask)
                        if not may_wait(wait_s):
                            break
                        self.sleep(wait_s)
                    answer = self.client.batch_write_item(RequestItems=request)
                    request = answer.get("UnprocessedItems") or {}
                    left = [str(load(put["PutRequest"]["Item"])["pk"]) for put in request.get(self.table, [])]
                    if not left:
                        break
            except (ClientError, BotoCoreError) as exc:
                logger.warning("batch write failed", items=len(left), error=str(exc))
            unwritten.extend(left)
        return unwritten

    def conditional_update(
        self, pk: str, update: str, condition: str, values: Item, *, new_item: bool = True
    ) -> Written:
        """Applies `update` (a `SET ...`, then maybe `REMOVE ...`) to the item if `condition` holds.

        botocore retries a request whose reply was lost, and a write applied before its reply was
        lost then fails its own condition on the retry. So each write stamps a fresh `write_id`:
        a refusal whose item carries this write's id is this write, applied. DynamoDB returns the
        item with the refusal when asked (`ReturnValuesOnConditionCheckFailure`, UpdateItem's API
        reference: https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_UpdateItem.html).

        With `new_item` False, an applied write's reply carries no item (`ReturnValues` NONE, and
        `Written.item` is then None): for a writer that needs only whether it applied. The same
        page: a returned item costs no capacity, only the reply's size to send and read, which
        is what is spared (a refusal still returns the item, as above).
        """
        write_id = uuid.uuid4().hex
        sets, removes = update.partition(" REMOVE ")[::2]
        try:
            found = self.client.update_item(
                TableName=self.table,
                Key=dump({"pk": pk}),
                UpdateExpression=f"{sets}, write_id = :write_id" + (f" REMOVE {removes}" if removes else ""),
                ConditionExpression=condition,
                ExpressionAttributeValues=dump({**values, ":write_id": write_id}),
                ReturnValues="ALL_NEW" if new_item else "NONE",
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except ClientError as exc:
            current = refused_item(exc)
            # This very write, applied before its reply was lost, or someone else's first.
            applied = current is not None and current.get("write_id") == write_id
            return Written(applied=applied, item=current)
        return Written(applied=True, item=load(found["Attributes"]) if new_item else None)
