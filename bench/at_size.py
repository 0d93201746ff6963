"""The local stack with a full table: instances seeded through the service's own store, then the
registration rate measured over HTTP, from one client and from many, each with its own connection."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime

import boto3

from bench.stack import BenchStack
from bench.workload import Api
from wakeup.table import DynamoStore
from wakeup.tokens import TokenKind, hash_token, mint
from wakeup_cost.stats import percentile

SEED_THREADS = 4
# Where the seeded instances point: nothing is ever called there (they register no wake).
SEED_URL = "http://127.0.0.1:9/seed"


def seed_instances(stack: BenchStack, count: int) -> float:
    """Registers `count` instances of the stack's first account straight into its table (the
    service's `DynamoStore`, one transaction each, as a POST makes); returns the seconds it took."""
    client = boto3.client(
        "dynamodb",
        endpoint_url=stack.endpoint_url,
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )
    store = DynamoStore(stack.table, client=client)
    owner = store.owner_of(hash_token(stack.account_token))
    assert owner is not None, "the bench stack's account token is unknown to its table"
    started = time.perf_counter()

    def register(index: int) -> None:
        store.register_instance(
            owner.account_id, f"{SEED_URL}{index}", hash_token(mint(TokenKind.INSTANCE)), datetime.now(UTC)
        )

    with ThreadPoolExecutor(max_workers=SEED_THREADS) as pool:
        list(pool.map(register, range(count)))
    client.close()
    return time.perf_counter() - started


@dataclass
class RegistrationRate:
    name: str
    clients: int
    seconds: list[float]
    statuses: list[int]
    wall_s: float

    def row(self) -> list[object]:
        created = self.statuses.count(201)
        return [
            self.name,
            self.clients,
            len(self.statuses),
            f"{created / self.wall_s:.1f}/s",
            f"{percentile(self.seconds, 50) * 1000:.1f} ms",
            f"{percentile(self.seconds, 99) * 1000:.1f} ms",
            self.statuses.count(429),
            len(self.statuses) - created - self.statuses.count(429),
        ]


def registration_rate(api: Api, name: str, clients: int, per_client: int) -> RegistrationRate:
    """`clients` threads, each registering `per_client` new instances one after the other."""
    lock = threading.Lock()
    seconds: list[float] = []
    statuses: list[int] = []

    def client(number: int) -> None:
        for index in range(per_client):
            status, elapsed = api.try_register(f"{SEED_URL}/c{number}/{index}")
            with lock:
                seconds.append(elapsed)
                statuses.append(status)

    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=clients) as pool:
        list(pool.map(client, range(clients)))
    return RegistrationRate(name, clients, seconds, statuses, time.perf_counter() - started)
