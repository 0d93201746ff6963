"""The table on DynamoDB: every read and write of accounts, tokens, instances and calls.

Conditional writes keep the rules that concurrent requests could otherwise break: a token names
one instance, only the newest registration records an outcome, only one call holds a claim. Each
kind of item has a class of its own; `DynamoStore` is all of them over one table, behind `Store`.
"""

import time
from collections.abc import Callable
from typing import Any

from wakeup import aws
from wakeup.table.accounts import Accounts
from wakeup.table.history import History
from wakeup.table.instances import Instances
from wakeup.table.mechanics import Table
from wakeup.table.rates import Rates
from wakeup.table.registrations import Registrations


class DynamoStore(Accounts, Instances, Registrations, History, Rates):
    """The table, through one DynamoDB client (given, or made from the environment).

    Each kind of item's class reads and writes through `db`, the table's mechanics; the store is
    all of them at once over one `db`, so each of `Store`'s methods is the part's own, with no
    method here that only hands a call on."""

    def __init__(self, table: str, client: Any = None, sleep: Callable[[float], None] = time.sleep) -> None:
        self.db = Table(table, client or aws.client("dynamodb"), sleep)
        # The accounts' reads an instance's registration makes (`Instances`), as the part itself
        # makes them: not through a subclass's own reads (the simulator's `MemoryStore`).
        self.accounts = Accounts(self.db)

    # The client and the sleep are the mechanics' (a test may swap them for a racing one).
    @property
    def table(self) -> str:
        return self.db.table

    @property
    def client(self) -> Any:
        return self.db.client

    @client.setter
    def client(self, client: Any) -> None:
        self.db.client = client

    @property
    def sleep(self) -> Callable[[float], None]:
        return self.db.sleep

    @sleep.setter
    def sleep(self, sleep: Callable[[float], None]) -> None:
        self.db.sleep = sleep
