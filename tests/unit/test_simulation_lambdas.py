"""Lambda in the simulator (wakeup_sim.lambdas): a cold start as published measurements have it,
and a configuration change as "Lambda function states" describes it."""

import pytest

from wakeup_awsfacts.quotas import MB_PER_VCPU
from wakeup_sim import deployment as aws
from wakeup_sim.engine import Engine
from wakeup_sim.lambdas import Account, Function, UpdateInProgress
from wakeup_sim.throughput import Cpus

START = 1_800_000_000.0


def function(engine: Engine, memory_mb: int, **changes: object) -> Function:
    """A function whose handler does nothing: an invocation takes its cold start and overhead alone."""
    return Function(engine, Cpus(engine), Account(1000), "f", memory_mb, lambda payload: None, **changes)  # type: ignore[arg-type]


def took(f: Function, engine: Engine) -> float:
    """How long one invocation from now takes, on virtual time."""
    ended: list[float] = []

    def invoke() -> None:
        f.invoke(None)
        ended.append(engine.now)

    began = engine.now
    engine.spawn(invoke)
    engine.run(began + 10)
    return ended[0] - began


def test_the_init_figure_is_the_published_one_for_python_on_arm64() -> None:
    # cebert/aws-lambda-performance-benchmarks (November 2025): Python 3.13, boto3 and a DynamoDB
    # client at init, about 430 ms on arm64 at 128, 1,024 and 1,769 MB; Powertools' load tests
    # (powertools-lambda-layer-cdk #10): 446 ms at 128 MB
    assert aws.INIT_S_AT_ONE_VCPU == pytest.approx(0.43, abs=0.02)
    assert aws.INIT_UNTHROTTLED
    # the first invocation's lazy setup: about +0.3 s at 128 MB
    assert aws.FIRST_CALL_CPU_S * MB_PER_VCPU / 128 == pytest.approx(0.3)


@pytest.mark.parametrize("memory_mb", [128, 512, 1024, 1769])
def test_an_on_demand_init_takes_its_one_vcpu_time_at_every_memory(memory_mb: int) -> None:
    engine = Engine(START)
    f = function(engine, memory_mb, invocation_cpu_s=0.0, first_call_cpu_s=0.0)

    assert took(f, engine) == pytest.approx(aws.INIT_S_AT_ONE_VCPU, abs=1e-5)


def test_the_first_call_and_the_handlers_work_run_at_the_memorys_share() -> None:
    # given a function at 128 MB (128 / 1,769 of a vCPU)
    engine = Engine(START)
    f = function(engine, 128)
    share = 128 / MB_PER_VCPU

    # then its cold invocation is init at one vCPU, and the lazy setup (about 0.3 s) and the
    # handler's own overhead at its share
    cold = took(f, engine)
    assert cold == pytest.approx(aws.INIT_S_AT_ONE_VCPU + 0.3 + aws.INVOCATION_CPU_S / share, abs=1e-5)
    # and a warm one the handler's overhead alone, at its share
    assert took(f, engine) == pytest.approx(aws.INVOCATION_CPU_S / share, abs=1e-5)


def test_without_the_boost_init_runs_at_the_memorys_share() -> None:
    # the assumption's other end: 5.9 s at 128 MB
    engine = Engine(START)
    f = function(engine, 128, invocation_cpu_s=0.0, first_call_cpu_s=0.0, init_unthrottled=False)

    assert took(f, engine) == pytest.approx(aws.INIT_S_AT_ONE_VCPU * MB_PER_VCPU / 128)


def test_an_environment_started_before_a_configuration_change_serves_nothing_after_it_completes() -> None:
    # given a function at 128 MB with a warm environment, whose memory is changed to 1,024 MB, the
    # change applying for 10 s
    engine = Engine(START)
    f = function(engine, 128)
    took(f, engine)
    assert f.cold_starts == 1
    f.update_memory(1024, takes_s=30.0)

    # then meanwhile an invocation runs the previous configuration, on the warm environment, and a
    # second change is refused (ResourceConflictException)
    took(f, engine)
    assert (f.cold_starts, f.memory_mb) == (1, 128)
    with pytest.raises(UpdateInProgress):
        f.update_memory(2048, takes_s=30.0)

    # and once it completes, the next invocation needs a new environment, made at the new memory
    engine.run(engine.now + 30)
    assert f.updating_until is None
    took(f, engine)
    assert (f.cold_starts, f.memory_mb) == (2, 1024)
    assert all(environment.configuration == f.configuration for environment in f.idle)
