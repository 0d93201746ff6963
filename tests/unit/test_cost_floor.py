"""The least a wake can cost under DESIGN.md (`bench.cost_floor`) is a true lower bound of the code."""

import pytest

from bench import cost_floor
from wakeup_cost import cost
from wakeup_sim import report
from wakeup_sim.deployment import from_template
from wakeup_sim.scenarios import Scenario, run


@pytest.mark.parametrize("path", ["near", "far"])
def test_the_simulator_never_meters_less_than_the_floor_line_by_line(path: str) -> None:
    outcome = run(Scenario("steady", 200, path=path, rate_per_s=20, warm=True), from_template())
    measured = {line.item: line for line in report.cost_lines(outcome)}
    for item, least in cost_floor.by_line(path).items():
        assert measured[item].quantity >= least - 1e-9, item
    assert report.usd_per_million(outcome) >= cost_floor.usd_per_million(path)


def test_each_charge_is_priced_as_the_cost_model_prices_its_line() -> None:
    # A charge priced apart from its line would make the floor disagree with `make bench`.
    prices = {
        "API Gateway requests": cost.PRICE_API_REQUEST,
        "Lambda invocations": cost.PRICE_LAMBDA_REQUEST,
        "DynamoDB reads": cost.PRICE_READ_UNIT,
        "DynamoDB writes": cost.PRICE_WRITE_UNIT,
        "SQS requests": cost.PRICE_SQS_REQUEST,
        "Scheduler invocations": cost.PRICE_SCHEDULER_INVOCATION,
        "Attempt history (DynamoDB writes)": cost.PRICE_WRITE_UNIT,
    }
    items = {line.item for line in cost.lines(cost.Usage(read_units=0.0, write_units=0.0), 1.0)}
    for charge in cost_floor.charges("far"):
        assert charge.line in items, charge.item
        assert charge.price == prices[charge.line], charge.item
