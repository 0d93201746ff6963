"""AWS's behaviours that the local stack (real time) and the simulator (virtual time) both model,
written once in `wakeup_awsfacts` and given the time by each: the token bucket, API Gateway's route
throttles, Scheduler's firing within its minute, Lambda's retries of an asynchronous event. Each is
tested here on a clock of the test's own, and in the simulator on its virtual time."""

from __future__ import annotations

import random
from datetime import UTC, datetime
from typing import Any

import pytest

from wakeup.api.routes import REGISTER_WAKE
from wakeup_awsfacts.api_gateway import api_throttles, route_throttle, throttle_of_route
from wakeup_awsfacts.lambda_async import AsyncRetries, after_throttle
from wakeup_awsfacts.scheduler import ExpressionError, fires_at, firing_window_s, parse_at, parse_rate
from wakeup_awsfacts.template import Resolver, load_template
from wakeup_awsfacts.token_bucket import TokenBucket
from wakeup_sim import deployment
from wakeup_sim.engine import Engine
from wakeup_sim.lambdas import Account, Function, Throttled
from wakeup_sim.throughput import Cpus

START = 1_800_000_000.0

# --- the token bucket ----------------------------------------------------------------------------


def test_a_bucket_starts_full_and_refills_at_its_rate_up_to_its_capacity() -> None:
    bucket = TokenBucket(rate=2.0, capacity=3, now=100.0)
    assert [bucket.take(1, 100.0) for _ in range(4)] == [True, True, True, False]
    assert [bucket.take(1, 100.5), bucket.take(1, 100.5)] == [True, False]  # half a second: one token
    assert [bucket.take(1, 160.0) for _ in range(4)] == [True, True, True, False]  # never past 3


def test_a_bucket_says_how_long_until_its_tokens_are_there_and_takes_none() -> None:
    bucket = TokenBucket(rate=4.0, capacity=2, now=0.0)
    assert bucket.take(2, 0.0)
    assert bucket.wait_for(1, 0.0) == pytest.approx(0.25)
    assert bucket.wait_for(1, 0.25) == 0.0
    assert bucket.take(1, 0.25) and not bucket.take(1, 0.25)


def test_a_bucket_of_no_capacity_lets_nothing_through() -> None:
    assert not TokenBucket(rate=100.0, capacity=0, now=0.0).take(1, 5.0)


# --- API Gateway's route throttles, read from template.yaml ------------------------------------------


def test_the_wake_routes_throttle_is_the_templates_for_the_local_stack_and_the_simulator() -> None:
    template = load_template(deployment.TEMPLATE)
    resolver = Resolver(template, "s", rng=random.Random(1))
    local = route_throttle(api_throttles(template, resolver), str(resolver.ref("HttpApi")), REGISTER_WAKE.key)
    simulated = deployment.from_template()

    assert throttle_of_route(template, resolver, REGISTER_WAKE.key) == local
    assert (simulated.api_rate, simulated.api_burst) == (local.rate_per_s, local.burst) == (10000.0, 5000)


def test_the_simulator_follows_the_templates_throttle_parameters() -> None:
    simulated = deployment.from_template(parameters={"ApiThrottlingRateLimit": "70", "ApiThrottlingBurstLimit": "7"})
    assert (simulated.api_rate, simulated.api_burst) == (70.0, 7.0)


# --- Scheduler: expressions, and firing within the minute -------------------------------------------


def test_a_one_time_schedule_fires_anywhere_within_its_minute() -> None:
    rng = random.Random(1)
    moments = [fires_at(1000.0, rng) - 1000.0 for _ in range(2000)]
    assert all(0 <= moment < 60 for moment in moments)
    assert min(moments) < 1 and max(moments) > 59


def test_a_flexible_time_window_lets_it_fire_that_many_minutes_later() -> None:
    assert firing_window_s({"Mode": "OFF"}) == firing_window_s(None) == 60.0
    assert firing_window_s({"Mode": "FLEXIBLE", "MaximumWindowInMinutes": 15}) == 60.0 + 15 * 60


def test_at_expressions_are_read_in_their_time_zone() -> None:
    assert parse_at("at(2026-07-01T09:30:00)") == datetime(2026, 7, 1, 9, 30, tzinfo=UTC)
    assert parse_at("at(2026-07-01T09:30:00)", "Europe/Paris") == datetime(2026, 7, 1, 7, 30, tzinfo=UTC)
    assert parse_at("at(2026-01-01T09:30:00)", "Europe/Paris") == datetime(2026, 1, 1, 8, 30, tzinfo=UTC)


@pytest.mark.parametrize(
    ("expression", "timezone"),
    [
        ("at(2026-02-30T00:00:00)", "UTC"),
        ("at(tomorrow)", "UTC"),
        ("at(2026-01-01 00:00:00)", "UTC"),
        ("at(2026-01-01T00:00:00)", "Mars/Olympus"),
    ],
)
def test_an_at_expression_that_names_no_moment_is_refused(expression: str, timezone: str) -> None:
    with pytest.raises(ExpressionError):
        parse_at(expression, timezone)


def test_rate_expressions_give_their_period() -> None:
    assert parse_rate("rate(1 minute)") == 60
    assert parse_rate("rate(5 minutes)") == 300
    assert parse_rate("rate(2 hours)") == 7200
    assert parse_rate("rate(1 day)") == 86400
    with pytest.raises(ExpressionError):
        parse_rate("cron(* * * * ? *)")


def test_the_simulators_scheduler_fires_a_schedule_within_its_minute_on_virtual_time() -> None:
    from wakeup_sim.scheduler import Scheduler

    engine = Engine(START)
    fired: list[float] = []
    target: Any = type("Target", (), {"invoke_async": lambda self, payload: fired.append(engine.now)})()
    scheduler = Scheduler(engine, target, 1000, random.Random(3), lambda operation: None)
    at = datetime.fromtimestamp(START + 600, UTC)
    scheduler.create_schedule(
        Name="wake-x",
        ScheduleExpression=f"at({at.strftime('%Y-%m-%dT%H:%M:%S')})",
        ScheduleExpressionTimezone="UTC",
        FlexibleTimeWindow={"Mode": "OFF"},
        Target={"Input": "{}"},
    )
    engine.run(START + 700)

    assert fired == [fires_at(START + 600, random.Random(3))]


# --- Lambda's retries of an asynchronous event ----------------------------------------------------


def test_a_failed_event_runs_again_after_one_minute_then_two_then_is_given_up() -> None:
    retries = AsyncRetries()
    assert retries.after_error(1, 1000.0) == 1060.0
    assert retries.after_error(2, 1060.0) == 1180.0
    assert retries.after_error(3, 1180.0) is None


def test_fewer_retry_attempts_give_an_event_up_sooner() -> None:
    assert AsyncRetries(maximum_retry_attempts=1).after_error(2, 0.0) is None
    assert AsyncRetries(maximum_retry_attempts=0).after_error(1, 0.0) is None


def test_an_event_is_too_old_past_its_maximum_age() -> None:
    retries = AsyncRetries(maximum_event_age_s=60)
    assert not retries.too_old(received=0.0, now=60.0)
    assert retries.too_old(received=0.0, now=60.5)


def test_a_throttled_event_waits_from_a_second_doubling_to_five_minutes() -> None:
    waits = [after_throttle(n, 0.0) for n in range(1, 12)]
    assert waits == [1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 300.0, 300.0]


def test_the_simulators_lambda_retries_a_failing_event_by_the_same_rule_on_virtual_time() -> None:
    engine = Engine(START)
    runs: list[float] = []

    def fails(payload: Any) -> None:
        runs.append(engine.now)
        raise RuntimeError("the handler failed")

    function = Function(
        engine, Cpus(engine), Account(1000), "f", 1769, fails, invocation_cpu_s=0.0, first_call_cpu_s=0.0
    )
    function.invoke_async(None)
    engine.run(START + 3600)

    assert len(runs) == 3
    assert runs[1] - runs[0] == pytest.approx(60.0, abs=1.0)  # each run's own time aside
    assert runs[2] - runs[1] == pytest.approx(120.0, abs=1.0)


def test_the_simulators_lambda_retries_a_throttled_event_by_the_same_rule() -> None:
    engine = Engine(START)
    account = Account(0)  # no concurrency at all: every run is throttled
    function = Function(engine, Cpus(engine), account, "f", 1769, lambda payload: None)
    tries: list[float] = []
    invoke = function.invoke

    def counted(payload: Any, *args: Any, **kwargs: Any) -> Any:
        tries.append(engine.now)
        return invoke(payload, *args, **kwargs)

    function.invoke = counted  # type: ignore[method-assign]
    function.invoke_async(None)
    engine.run(START + 20)

    assert [round(t - START, 6) for t in tries] == [0.0, 1.0, 3.0, 7.0, 15.0]
    with pytest.raises(Throttled):
        invoke(None)
