"""An account token rotated without an outage: the new token works at once, the one it replaced
works beside it for the overlap and is refused (401) once the overlap is over, and a revocation
ends both. The end of an overlap is reached without waiting: a rotation dated in the past."""

from datetime import timedelta
from typing import Any

import pytest
from api_reply import Reply
from botocore.exceptions import ClientError
from moto_env import Deployed, LambdaContext, imported_handler
from sample_events import LIST_INSTANCES, REGISTER_INSTANCE, api_event

from wakeup.logic.accounts import mint_account, revoke_account, rotate_token
from wakeup.table import DynamoStore
from wakeup.times import now
from wakeup.tokens import TokenKind, hash_token, is_token, mint

instances_handler = imported_handler("instances")
OVERLAP = timedelta(hours=1)
REPLACED = "this account token was replaced by a new one and no longer works: use the new one"


def listed(token: str) -> Reply:
    event = api_event(LIST_INSTANCES, token=token)
    return Reply.of(instances_handler.lambda_handler(event, LambdaContext(function_name="instances")))


def register(token: str, instance_token: str) -> Reply:
    body: dict[str, Any] = {"url": "https://host.example.com/app", "token": instance_token}
    event = api_event(REGISTER_INSTANCE, token=token, body=body)
    return Reply.of(instances_handler.lambda_handler(event, LambdaContext(function_name="instances")))


@pytest.fixture
def minted(env: Deployed) -> tuple[str, str]:
    account, token = mint_account(env.store, "rotating")
    return account.id, token


def test_during_the_overlap_both_tokens_work(env: Deployed, minted: tuple[str, str]) -> None:
    account_id, old = minted

    rotated = rotate_token(env.store, account_id, OVERLAP)

    assert rotated is not None
    _, new = rotated
    assert is_token(new, TokenKind.ACCOUNT) and new != old
    assert listed(new).status == 200
    assert listed(old).status == 200
    assert register(old, mint(TokenKind.INSTANCE)).status == 201


def test_once_the_overlap_is_over_the_old_token_is_401_and_the_new_one_works(
    env: Deployed, minted: tuple[str, str]
) -> None:
    account_id, old = minted

    # Rotated two overlaps ago: its overlap ended an overlap ago.
    rotated = rotate_token(env.store, account_id, OVERLAP, moment=now() - 2 * OVERLAP)

    assert rotated is not None
    assert listed(rotated[1]).status == 200
    refused = listed(old)
    assert (refused.status, refused.error) == (401, REPLACED)


def test_the_overlap_ends_at_its_time_not_before(env: Deployed, minted: tuple[str, str]) -> None:
    account_id, old = minted

    # Rotated an overlap ago, less a minute: a minute of it is left.
    assert rotate_token(env.store, account_id, OVERLAP, moment=now() - OVERLAP + timedelta(minutes=1)) is not None

    assert listed(old).status == 200


def test_an_instance_registered_before_the_rotation_keeps_its_token(env: Deployed, minted: tuple[str, str]) -> None:
    account_id, old = minted
    instance_token = mint(TokenKind.INSTANCE)
    assert register(old, instance_token).status == 201

    rotate_token(env.store, account_id, timedelta(0))

    owner = env.store.owner_of(hash_token(instance_token))
    assert owner is not None and owner.valid_at(now())
    assert listed(old).status == 401


def test_a_second_rotation_ends_the_first_one_s_overlap(env: Deployed, minted: tuple[str, str]) -> None:
    account_id, first = minted
    second = rotate_token(env.store, account_id, OVERLAP)
    assert second is not None

    third = rotate_token(env.store, account_id, OVERLAP)

    assert third is not None
    assert listed(first).status == 401  # its item is gone: unknown
    assert listed(second[1]).status == 200 and listed(third[1]).status == 200


def test_revoking_a_rotated_account_ends_both_its_tokens(env: Deployed, minted: tuple[str, str]) -> None:
    account_id, old = minted
    rotated = rotate_token(env.store, account_id, OVERLAP)
    assert rotated is not None

    revoke_account(env.store, account_id)

    assert listed(old).status == 401 and listed(rotated[1]).status == 401
    assert env.store.owner_of(hash_token(old)) is None and env.store.owner_of(hash_token(rotated[1])) is None


def test_a_revoked_or_unknown_account_is_not_rotated(env: Deployed, minted: tuple[str, str]) -> None:
    account_id, _ = minted
    revoke_account(env.store, account_id)

    assert rotate_token(env.store, account_id, OVERLAP) is None
    assert rotate_token(env.store, "0b7e1f0e-6f43-4c5e-9d55-3b1f6d3c2a10", OVERLAP) is None


class ConflictsOnce:
    """A DynamoDB client whose first transaction is cancelled for a concurrent one on the same item,
    as DynamoDB cancels it (a reason `TransactionConflict` for the item in conflict)."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.conflicts = 1

    def __getattr__(self, name: str) -> Any:
        return getattr(self.client, name)

    def transact_write_items(self, **request: Any) -> Any:
        if self.conflicts:
            self.conflicts -= 1
            reasons = [{"Code": "TransactionConflict"}] + [{"Code": "None"}] * (len(request["TransactItems"]) - 1)
            raise ClientError(
                {"Error": {"Code": "TransactionCanceledException"}, "CancellationReasons": reasons},
                "TransactWriteItems",
            )
        return self.client.transact_write_items(**request)


def test_a_rotation_cancelled_by_a_concurrent_transaction_is_tried_again(
    env: Deployed, minted: tuple[str, str]
) -> None:
    account_id, old = minted
    conflicting = ConflictsOnce(env.clients.dynamodb)

    rotated = rotate_token(DynamoStore(env.settings.table, conflicting), account_id, OVERLAP)

    assert conflicting.conflicts == 0
    assert rotated is not None
    assert listed(rotated[1]).status == 200
