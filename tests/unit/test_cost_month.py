"""`make cost` (`bench.bill`, `wakeup_cost.cost.idle_month`, `bench.parameters`): what a deployment costs."""

import re
from collections import Counter
from collections.abc import Mapping

import pytest

from bench import bill
from bench.parameters import ParameterError, check, parse
from wakeup.table.items import PENDING_SHARDS
from wakeup_awsfacts.template import Resolver, load_template
from wakeup_cost import cost
from wakeup_sim.deployment import TEMPLATE, from_template

TINY_STEADY_S = 5  # 500 wakes at 100 a second: the output's shape, not its figures


@pytest.fixture(scope="module")
def printed() -> str:
    """`make cost`'s output for template.yaml's defaults (simulations of seconds each: run once a
    worker)."""
    return bill.bill({}, steady_s=TINY_STEADY_S)


def month(overrides: Mapping[str, str] | None = None) -> dict[str, cost.MonthLine]:
    template = load_template(TEMPLATE)
    resolver = Resolver(template, stack_name="t", parameter_overrides=dict(overrides or {}))
    at_rest = bill.at_rest(from_template(TEMPLATE, overrides), resolver.condition("PlannerOn"))
    return {line.item: line for line in cost.idle_month(resolver, at_rest)}


def test_every_price_names_the_aws_pricing_page_it_was_read_from() -> None:
    prices = {name: value for name, value in vars(cost).items() if name.startswith("PRICE_")}
    assert len(prices) >= 15
    for name, price in prices.items():
        assert isinstance(price, cost.Price), name
        assert re.search(r"pricing\b.*, https://aws\.amazon\.com/[a-z0-9-]+/pricing/", price.page), name


def test_the_idle_month_prints_the_sum_of_its_lines(printed: str) -> None:
    charges = [row for row in printed.splitlines() if row.startswith("| ") and "https://aws.amazon.com/" in row]
    usd = [float(row.split(" | ")[2].lstrip("$").replace(",", "")) for row in charges]
    idle = float(re.findall(r"idle stack per month: \$([\d.]+)", printed)[0])
    assert len(charges) == len(month())
    # Each line is printed to the cent (or the hundredth of a cent), the sum from the unrounded lines.
    assert idle == pytest.approx(sum(usd), abs=0.01)
    assert idle == pytest.approx(sum(line.usd for line in month().values()), abs=0.005)


def test_the_output_ends_with_the_idle_month_then_the_price_of_a_million_wakes(printed: str) -> None:
    *before, idle, wakes = printed.splitlines()
    assert re.fullmatch(r"idle stack per month: \$\d+\.\d\d", idle)
    assert re.fullmatch(r"total per million wakes: near \$\d+\.\d\d, far \$\d+\.\d\d", wakes)
    assert not any("idle stack per month" in row or "total per million wakes" in row for row in before)


def test_the_pollers_line_is_the_minimum_pollers_for_every_hour_of_the_month() -> None:
    default = check(load_template(TEMPLATE), {})["CallerMinimumPollers"]
    pollers = "provisioned event pollers (CallerMinimumPollers)"
    assert month()[pollers].usd == pytest.approx(int(default) * 730 * 0.00925)
    assert month({"CallerMinimumPollers": "2"})[pollers].usd == pytest.approx(2 * 730 * 0.00925)


def test_without_provisioned_pollers_the_pollers_line_is_nothing_and_five_pollers_long_poll() -> None:
    off = month({"CallerMinimumPollers": "0"})
    assert off["provisioned event pollers (CallerMinimumPollers)"].usd == 0
    # Lambda's default mode polls with five pollers, each ending a 20 s long poll empty at rest.
    assert off["idle receives (the event source's long polls)"].quantity == pytest.approx(5 * 730 * 3600 / 20)


def test_log_retention_moves_the_log_storage_line_only() -> None:
    storage = "log storage of what runs at rest (LogRetentionDays)"
    thirty, three_hundred_sixty_five = month({"LogRetentionDays": "30"}), month({"LogRetentionDays": "365"})
    assert three_hundred_sixty_five[storage].usd == pytest.approx(thirty[storage].usd * 365 / 30)
    others = set(thirty) - {storage}
    assert all(thirty[item].usd == pytest.approx(three_hundred_sixty_five[item].usd) for item in others)


def test_alarms_and_dashboards_are_counted_from_the_template() -> None:
    resources = load_template(TEMPLATE).resources.values()
    # CloudWatch prices an alarm per metric it watches: a metric-math alarm's each metric counts.
    alarms = [r["Properties"] for r in resources if r["Type"] == "AWS::CloudWatch::Alarm"]
    alarm_metrics = sum(len([m for m in a.get("Metrics", []) if "MetricStat" in m]) or 1 for a in alarms)
    dashboards = sum(1 for r in resources if r["Type"] == "AWS::CloudWatch::Dashboard")
    assert alarms and dashboards
    assert month()["alarms"].usd == pytest.approx(alarm_metrics * 0.10)
    assert month()["dashboards"].usd == pytest.approx(dashboards * 3.00)


def test_the_sweeper_reads_each_shard_of_the_pending_wakes_index_every_minute() -> None:
    reads = next(line for item, line in month().items() if item.startswith("SweeperFunction reads"))
    assert f"({PENDING_SHARDS} queries a run)" in reads.item
    # A keys-only query that finds nothing is still half a read unit (eventually consistent).
    assert reads.quantity == pytest.approx(730 * 60 * PENDING_SHARDS * 0.5)


def test_a_rate_is_a_rate_the_steady_window_does_not_change_a_wakes_price() -> None:
    deployment = from_template()
    traced = {"CallerFunction", "WakeFunction"}
    short, longer = (bill.per_million(deployment, "near", traced, seconds).usd for seconds in (10, 40))
    # What the stack pays at rest meanwhile (sweeps, idle long polls) is taken out of both.
    assert short == pytest.approx(longer, rel=0.02)


def test_a_bursts_pollers_are_priced_for_their_whole_span() -> None:
    # given the defaults: a run a minute, an update assumed to take 300 s, a 120 s margin, capacity
    # kept 60 s past the burst
    settings = bill.planner_settings(Resolver(load_template(TEMPLATE), stack_name="cost"), from_template())

    # then the raise is sent up to its lead (480 s) before the burst's second, and the "off", sent by
    # the first run past the 60 s kept (a period later at most), applies 300 s after: 15 minutes,
    # the span the simulator's planner bills (tests/unit/test_simulation_planner.py)
    assert bill.raised_span_s(settings) == 480 + 60 + 60 + 300


def test_the_burst_note_prices_the_span_and_no_poller_above_the_raise(printed: str) -> None:
    assert "billed for at most 15 minutes" in printed
    assert f"${100 * 15 / 60 * cost.PRICE_EPU_HOUR:.2f} a burst" in printed
    assert "autoscaling adds none" in printed


def test_a_floor_prices_what_autoscaling_may_add_above_it() -> None:
    overrides = {"CallerMinimumPollers": "10", "CallerMaximumPollers": "100"}
    resolver = Resolver(load_template(TEMPLATE), stack_name="cost", parameter_overrides=overrides)
    note = bill.burst_note(10, resolver, from_template(TEMPLATE, overrides))
    assert "up to 90 pollers above CallerMinimumPollers" in note
    assert bill.dollars(90 * cost.PRICE_EPU_HOUR) + " an hour" in note


def test_memory_moves_the_price_of_a_wake() -> None:
    traced: set[str] = set()
    default = bill.per_million(from_template(), "near", traced, 10)
    larger = bill.per_million(from_template(TEMPLATE, {"CallerMemorySize": "512"}), "near", traced, 10)
    duration = {line.item: line.usd_per_million for line in default.lines}["Lambda duration"]
    assert {line.item: line.usd_per_million for line in larger.lines}["Lambda duration"] > duration


@pytest.mark.parametrize(
    ("override", "reason"),
    [
        ("CallerMinimumPollers=1", "CallerMinimumPollers must be 0 (provisioned mode off) or from 2 to 200"),
        ("CallerMemorySize=64", "CallerMemorySize must be at least 128, not 64"),
        ("CallerMemorySize=lots", "CallerMemorySize must be a number"),
        ("CallerBatchingWindowSeconds=5", "CallerBatchingWindowSeconds must be one of 0, 1"),
        ("AlarmEmail=nobody", "AlarmEmail must match"),
        ("CallerMinPollers=0", "template.yaml has no parameter CallerMinPollers"),
        ("CallerMemorySize", "is not Key=Value"),
    ],
)
def test_a_value_the_template_would_refuse_is_refused_with_its_reason(
    override: str, reason: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert bill.main(["--parameter-overrides", override]) == 2
    assert reason in capsys.readouterr().err


def test_a_rule_of_the_template_refuses_a_lead_not_below_the_horizon() -> None:
    with pytest.raises(ParameterError, match="SqsHorizonSeconds must be greater than ScheduleLeadSeconds"):
        check(load_template(TEMPLATE), parse(["ScheduleLeadSeconds=120", "SqsHorizonSeconds=100"]))


def test_overrides_are_read_as_sam_deploy_writes_them() -> None:
    assert parse(["A=1", "ParameterKey=B,ParameterValue=x=y", "C="]) == {"A": "1", "B": "x=y", "C": ""}


def test_x_ray_records_the_first_invocation_each_second_and_one_in_twenty_of_the_rest() -> None:
    assert cost.traces_a_second(0.5) == pytest.approx(0.5)
    assert cost.traces_a_second(101) == pytest.approx(1 + 0.05 * 100)


def test_the_custom_metrics_at_rest_are_those_a_sweep_and_a_plan_with_nothing_to_do_publish() -> None:
    # The sweeper counts its recoveries and the planner its pollers, zero included, so that their
    # heartbeat alarms always have data: one metric each.
    assert bill.custom_metrics_at_rest() == 2


def test_the_planner_reads_each_shard_of_the_pending_wakes_index_every_minute() -> None:
    reads = next(line for item, line in month().items() if item.startswith("PlannerFunction reads"))
    assert f"({PENDING_SHARDS} queries a run)" in reads.item
    assert reads.quantity == pytest.approx(730 * 60 * PENDING_SHARDS * 0.5)


def test_with_the_planner_off_nothing_of_it_is_paid() -> None:
    off = month({"PlannerEnabled": "false"})
    assert not [item for item in off if item.startswith("PlannerFunction")]
    assert off["custom metrics published at rest"].quantity == 1
    assert off["alarms"].quantity == month()["alarms"].quantity - 3  # its heartbeat, errors and pollers-left alarms


def test_the_idle_month_with_the_defaults_is_at_most_eight_dollars() -> None:
    # Issue 16's goal: nothing paid at rest but what the stack keeps running (no provisioned poller).
    idle = month()
    assert idle["provisioned event pollers (CallerMinimumPollers)"].usd == 0
    assert sum(line.usd for line in idle.values()) <= 8.00


def test_x_ray_is_paid_only_when_the_tracing_parameter_turns_it_on() -> None:
    traces = "SweeperFunction X-Ray traces"
    assert traces not in month()
    assert month({"Tracing": "Active"})[traces].quantity == pytest.approx(730 * 60)


def test_the_price_with_tracing_on_is_printed_beside_the_default(printed: str) -> None:
    near, far = map(float, re.findall(r"total per million wakes: near \$([\d.]+), far \$([\d.]+)", printed)[0])
    found = re.search(
        r"Tracing=Active the stack at rest costs \$([\d.]+) a month.* \$([\d.]+) near, \$([\d.]+) far", printed
    )
    assert found is not None
    idle = float(re.findall(r"idle stack per month: \$([\d.]+)", printed)[0])
    assert float(found[1]) > idle and float(found[2]) > near and float(found[3]) > far


def test_lambdas_own_log_lines_are_paid_only_when_the_system_log_level_logs_them() -> None:
    logs = "log ingestion of what runs at rest"
    assert month({"SystemLogLevel": "INFO"})[logs].usd > month()[logs].usd
    default, info = (from_template(TEMPLATE, overrides) for overrides in ({}, {"SystemLogLevel": "INFO"}))
    assert default.quiet_functions == {"CallerFunction", "WakeFunction", "SweeperFunction"}
    assert info.quiet_functions == frozenset()
    wake = cost.Usage(invocations=Counter({"CallerFunction": 1}))
    own = cost.LAMBDA_OWN_LOG_BYTES / 1e3
    assert {line.item: line.quantity for line in cost.lines(wake, 1.0)}["CloudWatch Logs"] == pytest.approx(own)
    quiet = cost.lines(wake, 1.0, default.quiet_functions)
    assert {line.item: line.quantity for line in quiet}["CloudWatch Logs"] == 0


def test_one_of_a_counted_charge_is_said_in_the_singular(printed: str) -> None:
    # template.yaml's defaults make one dashboard and one secret
    assert "| 1 dashboard |" in printed and "| 1 secret |" in printed
    assert "1 dashboards" not in printed and "1 secrets" not in printed
