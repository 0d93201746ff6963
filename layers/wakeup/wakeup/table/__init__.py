"""The data layer: the table's items and keys (`items`), DynamoDB's mechanics (`mechanics`), one
class per kind of item, composed into `DynamoStore`, behind the `Store` protocol the logic uses."""

from wakeup.table.dynamodb import DynamoStore
from wakeup.table.instances import AccountRefused, Page, Registered
from wakeup.table.rates import RateFull, RequestWindow
from wakeup.table.registrations import Claim, WakeWindow, WindowFull
from wakeup.table.store import Store

__all__ = [
    "AccountRefused",
    "Claim",
    "DynamoStore",
    "Page",
    "RateFull",
    "Registered",
    "RequestWindow",
    "Store",
    "WakeWindow",
    "WindowFull",
]
