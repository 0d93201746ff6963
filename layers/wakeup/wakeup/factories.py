"""The store and the triggers each handler uses, made once per cold start; tests reset them."""

import functools

from wakeup.settings import get_settings
from wakeup.store import Store
from wakeup.triggers import Triggers


@functools.cache
def get_store() -> Store:
    return Store(get_settings().table)


@functools.cache
def get_triggers() -> Triggers:
    return Triggers(get_settings())


def reset() -> None:
    """Forgets settings, store and triggers, so the next call reads the environment again."""
    get_settings.cache_clear()
    get_store.cache_clear()
    get_triggers.cache_clear()
