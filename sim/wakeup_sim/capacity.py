"""The write units a near wake costs, as the simulator meters them: what `make bench` prices its
counted writes at (DynamoDB's rules themselves are `wakeup_awsfacts.dynamodb`)."""

import functools
from datetime import UTC, datetime, timedelta

from wakeup.model import Trigger
from wakeup_awsfacts.dynamodb import indexes_of
from wakeup_awsfacts.template import Resolver, load_template
from wakeup_sim.deployment import TEMPLATE
from wakeup_sim.dynamodb import MemoryStore


@functools.cache
def units_per_instance_write(template_path: str | None = None) -> float:
    """Write units per instance write of a near wake (its registration, claim and outcome), the
    table's and its indexes' together, on the indexes template.yaml defines."""
    template = load_template(template_path or TEMPLATE)
    store = MemoryStore(indexes_of(template, Resolver(template, stack_name="units", region="us-east-1")))
    at = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
    account = store.create_account("units", "a" * 64, at - timedelta(days=1))
    instance = store.register_instance(account.id, "https://host.example", "b" * 64, at - timedelta(days=1)).instance
    store.register_wake(instance.id, at, "c" * 32)
    trigger = Trigger(instance.id, "c" * 32, 0)
    store.claim_if_due(trigger, int(at.timestamp() * 1000), at, 40_000)
    store.record_success(trigger, at + timedelta(milliseconds=150))
    metered = store.metered
    return (metered.write_units + sum(metered.index_write_units.values())) / metered.requests["dynamodb:UpdateItem"]
