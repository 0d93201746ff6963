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
