"""The table on DynamoDB: every read and write of accounts, tokens, instances and calls.

Conditional writes keep the rules that concurrent requests could otherwise break: a token names
one instance, only the newest registration records an outcome, only one call holds a claim. Each
kind of item has a class of its own; `DynamoStore` puts them together behind `Store`.
"""

import time
from collections.abc import Callable
from datetime import datetime
from typing import Any

from wakeup import aws
from wakeup.model import Account, CallRecord, Instance, TokenOwner, Trigger
from wakeup.signing import SigningVersions
from wakeup.table.accounts import Accounts
from wakeup.table.history import History
from wakeup.table.instances import Instances, Page, Registered
from wakeup.table.mechanics import Table
from wakeup.table.rates import Rates, RequestWindow
from wakeup.table.registrations import Claim, Registrations, WakeWindow


class DynamoStore:
    """The table, through one DynamoDB client (given, or made from the environment)."""

    def __init__(self, table: str, client: Any = None, sleep: Callable[[float], None] = time.sleep) -> None:
        self.db = Table(table, client or aws.client("dynamodb"), sleep)
        self.accounts = Accounts(self.db)
        self.instances = Instances(self.db, self.accounts)
        self.registrations = Registrations(self.db)
        self.history = History(self.db)
        self.rates = Rates(self.db)

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

    # -- accounts and tokens ---------------------------------------------------------------------

    def owner_of(self, token_hash: str) -> TokenOwner | None:
        return self.accounts.owner_of(token_hash)

    def get_account(self, account_id: str) -> Account | None:
        return self.accounts.get_account(account_id)

    def signing_versions(self, account_id: str) -> SigningVersions | None:
        return self.accounts.signing_versions(account_id)

    def list_accounts(self) -> list[Account]:
        return self.accounts.list_accounts()

    def create_account(self, label: str, token_hash: str, now: datetime, master: int = 1) -> Account:
        return self.accounts.create_account(label, token_hash, now, master)

    def rotate_signing(self, account: Account, previous_until: datetime, master: int = 1) -> Account | None:
        return self.accounts.rotate_signing(account, previous_until, master)

    def set_account_limit(self, account_id: str, max_instances: int | None) -> Account | None:
        return self.accounts.set_account_limit(account_id, max_instances)

    def rotate_token(self, account_id: str, token_hash: str, previous_until: datetime) -> Account | None:
        return self.accounts.rotate_token(account_id, token_hash, previous_until)

    def revoke_account(self, account_id: str, now: datetime) -> bool:
        return self.accounts.revoke_account(account_id, now)

    def count_request(self, account_id: str, window: RequestWindow, started: bool = True) -> None:
        self.rates.count_request(account_id, window, started)

    def set_account_rate(self, account_id: str, per_s: int | None, window_s: int) -> Account | None:
        return self.rates.set_account_rate(account_id, per_s, window_s)

    # -- instances -------------------------------------------------------------------------------

    def get_instance(self, instance_id: str) -> Instance | None:
        return self.instances.get_instance(instance_id)

    def all_instances(self, account_id: str) -> list[Instance]:
        return self.instances.all_instances(account_id)

    def list_instances(self, account_id: str, limit: int, cursor: str | None) -> Page:
        return self.instances.list_instances(account_id, limit, cursor)

    def register_instance(
        self, account_id: str, url: str, token_hash: str, now: datetime, max_instances: int | None = None
    ) -> Registered:
        return self.instances.register_instance(account_id, url, token_hash, now, max_instances)

    def delete_instance(self, instance: Instance) -> Instance | None:
        return self.instances.delete_instance(instance)

    def revoke_instance(self, instance_id: str, now: datetime) -> None:
        self.instances.revoke_instance(instance_id, now)

    # -- registrations ---------------------------------------------------------------------------

    def register_wake(
        self, instance_id: str, at: datetime, reg: str, window: WakeWindow | None = None
    ) -> Instance | None:
        return self.registrations.register_wake(instance_id, at, reg, window)

    def claim(self, trigger: Trigger, now_ms: int, lease_ms: int) -> int | None:
        return self.registrations.claim(trigger, now_ms, lease_ms)

    def claim_if_due(self, trigger: Trigger, now_ms: int, due_by: datetime, lease_ms: int) -> Claim:
        return self.registrations.claim_if_due(trigger, now_ms, due_by, lease_ms)

    def record_success(self, trigger: Trigger, called_at: datetime) -> bool:
        return self.registrations.record_success(trigger, called_at)

    def record_failure(self, trigger: Trigger, error: str, next_due: datetime | None) -> bool:
        return self.registrations.record_failure(trigger, error, next_due)

    def postpone(self, trigger: Trigger, due: datetime, now_ms: int) -> bool:
        return self.registrations.postpone(trigger, due, now_ms)

    def overdue(self, shard: int, before: datetime) -> list[Instance]:
        return self.registrations.overdue(shard, before)

    # -- the history of calls --------------------------------------------------------------------

    def record_call(self, call: CallRecord) -> None:
        self.history.record_call(call)

    def read_calls(self, instance_id: str, seqs: list[int]) -> list[CallRecord]:
        return self.history.read_calls(instance_id, seqs)
