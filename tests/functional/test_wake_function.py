"""The wake function's real handler (`PUT /wakeup/wake`), given API Gateway events from `events/`,
over moto: the body (base64 too), the instance token whatever the header's case, and failures
underneath. The whole contract is tested over HTTP in `tests/e2e/test_api_contract.py`."""

import json
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import pytest
from api_reply import Reply
from botocore.stub import Stubber
from moto_env import Deployed, LambdaContext, imported_handler
from sample_events import PUT_WAKE, api_event, load_event

from support.moments import year_ahead
from wakeup import factories
from wakeup.errors import WakeupError
from wakeup.model import Trigger
from wakeup.times import format_time, now, parse_stored
from wakeup.tokens import TokenKind, hash_token, mint

wake_handler = imported_handler("wake")

URL = "https://host.example.com/app"


@dataclass
class Instance:
    id: str
    token: str


@pytest.fixture
def instance(env: Deployed) -> Instance:
    """A registered instance and its token."""
    token = mint(TokenKind.INSTANCE)
    account = env.store.create_account("functional", hash_token(mint(TokenKind.ACCOUNT)), now())
    registered = env.store.register_instance(account.id, URL, hash_token(token), now())
    return Instance(registered.instance.id, token)


def invoke(event: dict[str, Any]) -> Reply:
    return Reply.of(wake_handler.lambda_handler(event, LambdaContext(function_name="wake")))


def put_wake(token: str | None, at: Any, **changes: Any) -> Reply:
    return invoke(api_event(PUT_WAKE, token=token, body={"at": at}, **changes))


def in_a_day() -> str:
    return format_time(now() + timedelta(days=1))


def test_the_sample_with_a_minted_token_registers_the_wake_204(env: Deployed, instance: Instance) -> None:
    # given the sample, its placeholder token replaced by the instance's and its time by one a day
    # ahead (a time this test reads back exactly)
    sample_body = json.loads(load_event(PUT_WAKE)["body"])
    at = parse_stored(in_a_day())
    event = api_event(PUT_WAKE, token=instance.token, body={**sample_body, "at": format_time(at)})
    # when
    reply = invoke(event)
    # then
    assert (reply.status, reply.body) == (204, None)
    stored = env.store.get_instance(instance.id)
    assert stored is not None and stored.at == at


def test_a_wake_a_day_ahead_is_armed_as_a_schedule(env: Deployed, instance: Instance) -> None:
    reply = put_wake(instance.token, in_a_day())

    assert reply.status == 204
    stored = env.store.get_instance(instance.id)
    assert stored is not None and stored.reg is not None
    assert env.schedule_input(instance.id) == Trigger(instance.id, stored.reg, 0)


@pytest.mark.parametrize(
    ("before", "operation", "reads"),
    [
        pytest.param(None, "CreateSchedule", 2, id="a-first-wake-creates-it"),
        pytest.param(timedelta(minutes=5), "CreateSchedule", 2, id="a-near-wake-moved-far-creates-it"),
        pytest.param(timedelta(days=1), "UpdateSchedule", 3, id="a-far-wake-moved-updates-it"),
    ],
)
def test_a_far_wake_arms_its_schedule_in_one_request_and_re_reads_only_one_it_replaced(
    env: Deployed, instance: Instance, before: timedelta | None, operation: str, reads: int
) -> None:
    # given the instance's wake before this one, if any: near (through SQS) or far (a schedule)
    if before is not None:
        assert put_wake(instance.token, format_time(now() + before)).status == 204
    operations: list[str] = []
    scheduler = factories.get_triggers().scheduler
    scheduler.meta.events.register("before-call.scheduler", lambda model, **_: operations.append(model.name))
    table_operations: list[str] = []
    factories.get_store().client.meta.events.register(
        "before-call.dynamodb", lambda model, **_: table_operations.append(model.name)
    )
    # when the host registers a wake a day and an hour ahead
    reply = put_wake(instance.token, format_time(now() + timedelta(days=1, hours=1)))
    # then its schedule is created or updated at once, the right way round: not refused first (a
    # create meeting a `ConflictException`, an update a `ResourceNotFoundException`)
    assert reply.status == 204
    assert operations == [operation]
    # and the table read for the token, the item before the registration's write (its version:
    # `wakeup.table.registrations`), then, after a schedule replaced (a racing request's, maybe),
    # re-read for the registration (`wakeup.logic.wakes.converge`); not after one created
    assert [name for name in table_operations if name != "UpdateItem"] == ["GetItem"] * reads
    stored = env.store.get_instance(instance.id)
    assert stored is not None and stored.reg is not None
    assert env.schedule_input(instance.id) == Trigger(instance.id, stored.reg, 0)


def test_a_time_with_an_offset_is_stored_in_utc(env: Deployed, instance: Instance) -> None:
    year = year_ahead()
    reply = put_wake(instance.token, f"{year}-01-01T10:30:00.250+01:00")

    assert reply.status == 204
    stored = env.store.get_instance(instance.id)
    assert stored is not None and stored.at is not None
    assert format_time(stored.at) == f"{year}-01-01T09:30:00.250Z"


def test_a_base64_encoded_body_is_decoded(env: Deployed, instance: Instance) -> None:
    year = year_ahead()
    reply = put_wake(instance.token, f"{year}-01-01T00:00:00Z", base64_body=True)

    assert reply.status == 204
    stored = env.store.get_instance(instance.id)
    assert stored is not None and stored.at is not None and format_time(stored.at) == f"{year}-01-01T00:00:00.000Z"


@pytest.mark.parametrize("name", ["Authorization", "AUTHORIZATION", "authorization"])
def test_the_authorization_header_is_read_whatever_its_case(instance: Instance, name: str) -> None:
    reply = put_wake(None, in_a_day(), headers={name: f"bearer {instance.token}"})

    assert reply.status == 204


@pytest.mark.parametrize(
    "token",
    [
        pytest.param(None, id="none"),
        pytest.param("swi_short", id="malformed"),
        pytest.param(mint(TokenKind.INSTANCE), id="unknown"),
        pytest.param(mint(TokenKind.ACCOUNT), id="an-account-token"),
    ],
)
def test_without_a_live_instance_token_it_is_401(env: Deployed, token: str | None) -> None:
    reply = put_wake(token, in_a_day())

    assert reply.status == 401
    assert "token" in reply.error


def test_an_account_token_that_is_live_is_still_401(env: Deployed) -> None:
    account_token = mint(TokenKind.ACCOUNT)
    env.store.create_account("functional", hash_token(account_token), now())

    reply = put_wake(account_token, in_a_day())

    assert reply.status == 401
    assert "instance token" in reply.error


def test_the_token_of_a_deleted_instance_is_401(env: Deployed, instance: Instance) -> None:
    stored = env.store.get_instance(instance.id)
    assert stored is not None and env.store.delete_instance(stored, now()) is not None

    reply = put_wake(instance.token, in_a_day())

    assert reply.status == 401


@pytest.mark.parametrize(
    "at",
    [
        pytest.param("2099-01-01", id="a-date"),
        pytest.param("2099-01-01T09:30:00", id="no-zone"),
        pytest.param("2099-02-30T09:30:00Z", id="impossible"),
        pytest.param(1893456000, id="a-number"),
        pytest.param(None, id="null"),
    ],
)
def test_an_at_that_breaks_the_contract_is_400(env: Deployed, instance: Instance, at: Any) -> None:
    reply = put_wake(instance.token, at)

    assert reply.status == 400
    assert reply.error.startswith("at ")
    stored = env.store.get_instance(instance.id)
    assert stored is not None and stored.at is None


@pytest.mark.parametrize("body", ['"2099-01-01T00:00:00Z"', "[]", "", None])
def test_a_body_that_is_not_a_json_object_is_400(instance: Instance, body: Any) -> None:
    reply = invoke(api_event(PUT_WAKE, token=instance.token, body=body))

    assert (reply.status, reply.error) == (400, "the body must be a JSON object")


def test_a_json_object_over_16_kib_is_413(env: Deployed, instance: Instance) -> None:
    # given a body that is valid in every way but its size (one byte over 16 KiB)
    body = {"at": in_a_day(), "padding": ""}
    body["padding"] = "x" * (16 * 1024 + 1 - len(json.dumps(body)))
    assert len(json.dumps(body)) == 16 * 1024 + 1
    # when
    reply = invoke(api_event(PUT_WAKE, token=instance.token, body=body))
    # then
    assert (reply.status, reply.error) == (413, "the body is larger than 16 KiB")
    stored = env.store.get_instance(instance.id)
    assert stored is not None and stored.at is None


def test_a_json_object_of_exactly_16_kib_is_accepted(instance: Instance) -> None:
    body = {"at": in_a_day(), "padding": ""}
    body["padding"] = "x" * (16 * 1024 - len(json.dumps(body)))

    assert invoke(api_event(PUT_WAKE, token=instance.token, body=body)).status == 204


def test_arming_failing_underneath_is_503_and_the_wake_stays_recorded(env: Deployed, instance: Instance) -> None:
    # given SQS refusing the trigger of a wake due in a minute (within the horizon: SQS's to arm)
    at = now() + timedelta(minutes=1)
    with Stubber(factories.get_triggers().sqs) as sqs:
        sqs.add_client_error("send_message", service_error_code="ThrottlingException", http_status_code=400)
        # when
        reply = put_wake(instance.token, format_time(at))
    # then the request may be retried, and the table holds the wake for the sweeper meanwhile
    assert reply.status == 503
    assert "retry" in reply.error and "Throttling" not in reply.error
    stored = env.store.get_instance(instance.id)
    assert stored is not None and stored.pending and stored.at is not None
    assert abs(stored.at - at) < timedelta(milliseconds=1)


def test_dynamodb_failing_underneath_is_503(instance: Instance) -> None:
    with Stubber(factories.get_store().client) as dynamodb:
        dynamodb.add_client_error("get_item", service_error_code="InternalServerError", http_status_code=500)
        reply = put_wake(instance.token, in_a_day())

    assert reply.status == 503
    assert "retry" in reply.error


def test_an_unexpected_failure_is_500_with_a_fixed_sentence_and_no_trace(
    instance: Instance, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*args: object) -> None:
        raise KeyError("internal detail: reg")

    monkeypatch.setattr(wake_handler, "register_wake", broken)

    reply = put_wake(instance.token, in_a_day())

    assert reply.status == 500
    assert reply.error == WakeupError.message
    assert "internal detail" not in json.dumps(reply.body) and "Traceback" not in json.dumps(reply.body)


def test_the_sample_event_file_is_the_wake_route(env: Deployed) -> None:
    # `sam local invoke -e events/api_put_wake.json WakeFunction` sends this: its placeholder token
    # has the form of an instance token, so an empty table answers 401 rather than 400.
    reply = invoke(load_event(PUT_WAKE))

    assert reply.status == 401
