"""The per-account rate's prices (cost/wakeup_cost/cost.py): a refusal costs less than the request it refuses."""

from pathlib import Path

import pytest

from wakeup_awsfacts.template import load_template
from wakeup_cost.cost import PRICE_WRITE_UNIT, account_request_costs

TEMPLATE = load_template(Path(__file__).parents[2] / "template.yaml")
# The instances function's memory (it sets none of its own: the template's global one).
INSTANCES_MEMORY_GB = float(TEMPLATE.function_globals["MemorySize"]) / 1024


@pytest.mark.parametrize("seconds", [0.0, 0.005, 0.05, 1.0])
def test_a_refusal_costs_less_than_the_cheapest_request_it_refuses(seconds: float) -> None:
    costs = account_request_costs(INSTANCES_MEMORY_GB, seconds)

    assert costs.refusal_usd < costs.cheapest_admitted_usd


def test_the_count_adds_one_write_unit_to_an_admitted_request() -> None:
    assert account_request_costs(INSTANCES_MEMORY_GB, 0.02).count_usd == PRICE_WRITE_UNIT


def test_the_instances_function_takes_the_templates_memory() -> None:
    assert "MemorySize" not in TEMPLATE.resources["InstancesFunction"]["Properties"]
