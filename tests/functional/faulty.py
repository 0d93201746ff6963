"""Faults at the AWS requests the functions make, for tests: a boto3 client whose named operations
fail, or end the process, before they reach AWS (moto); every other request goes through.

    dynamodb = FaultyClient(env.clients.dynamodb, put_item=throttled("PutItem"))
    store = DynamoStore(env.settings.table, client=dynamodb)
"""

from typing import Any

from botocore.exceptions import ClientError


class Died(BaseException):
    """The function's process ending at this point (SIGKILL, a timeout): nothing after it runs,
    and no `except Exception` catches it."""


def throttled(operation: str) -> ClientError:
    """The error AWS answers a throttled request with, once botocore's retries are spent."""
    return ClientError({"Error": {"Code": "ThrottlingException", "Message": "Rate exceeded"}}, operation)


class FaultyClient:
    """`client`, except that each operation named in `faults` raises its exception (every time, until
    it is removed from `faults`); `calls` counts the faulted operations' attempts."""

    def __init__(self, client: Any, **faults: BaseException) -> None:
        self.client = client
        self.faults = faults
        self.calls: list[str] = []

    def __getattr__(self, name: str) -> Any:
        method = getattr(self.client, name)
        if name not in self.faults:
            return method

        def fail(*args: Any, **kwargs: Any) -> Any:
            fault = self.faults.get(name)
            self.calls.append(name)
            if fault is None:  # healed since the method was looked up
                return method(*args, **kwargs)
            raise fault

        return fail


class BatchWrites:
    """The store's client (moto's, or the simulator's own), counting the BatchWriteItem requests
    made through it; the first `unprocessed` of them make only their first half of the puts and
    answer the rest unprocessed, as DynamoDB may under throttling ("BatchWriteItem", DynamoDB API
    reference)."""

    def __init__(self, client: object, unprocessed: int = 0) -> None:
        self._client, self.unprocessed = client, unprocessed
        self.requests: list[int] = []  # the puts of each request

    def batch_write_item(self, RequestItems: dict[str, list[object]]) -> dict[str, object]:  # noqa: N803
        ((name, puts),) = RequestItems.items()
        self.requests.append(len(puts))
        made, left = (puts[: len(puts) // 2], puts[len(puts) // 2 :]) if self.unprocessed else (puts, [])
        if self.unprocessed:
            self.unprocessed -= 1
        if made:
            self._client.batch_write_item(RequestItems={name: made})  # type: ignore[attr-defined]
        return {"UnprocessedItems": {name: left} if left else {}}

    def __getattr__(self, name: str) -> object:
        return getattr(self._client, name)
