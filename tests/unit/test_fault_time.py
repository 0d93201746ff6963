"""The fault matrix's functions on their invocation's time (issue 37, hole 3): the simulator gives
each function its time left, its AWS requests retry as the service's clients do, and a row that
injects no Lambda timeout reaches none; and its faults are ones the store can take (keys a
`BatchGetItem` leaves unprocessed are keys it can ask for again)."""

import pytest

from wakeup.deadlines import AWS_REQUEST
from wakeup.table.items import dump, instance_key, load
from wakeup_sim.dynamodb import Io, MemoryTable
from wakeup_sim.fault_hooks import UnprocessedBatches
from wakeup_sim.fault_matrix import _deployment, jobs, run_row
from wakeup_sim.faults import Fault, FaultClass, FaultInjector, Kind, _failure
from wakeup_sim.scenarios import T0
from wakeup_sim.world import World


class AlwaysFails(Io):
    """A table whose every attempt fails retryably, counted."""

    def __init__(self) -> None:
        self.attempts = 0

    def fault(self, operation: str, attempt: int) -> Exception | None:
        self.attempts += 1
        return _failure(Kind.ERROR, f"dynamodb:{operation}")


@pytest.mark.parametrize("request_of", ["read", "write", "query"])
def test_a_simulated_dynamodb_request_makes_the_attempts_the_service_clients_make(request_of: str) -> None:
    # given a table whose every attempt fails
    io = AlwaysFails()
    table = MemoryTable(_deployment().indexes, io)
    # when a request is made
    with pytest.raises(Exception, match="InternalServerError"):
        if request_of == "read":
            table.read("pk")
        elif request_of == "write":
            table.write("pk", lambda item: item)
        else:
            table.query({})
    # then it was tried as often as `wakeup.aws.CLIENT_CONFIG` tries it, no more: a longer chain
    # than the service's would outlast the time the service checks it has for it
    assert io.attempts == AWS_REQUEST.attempts


def test_keys_a_batch_get_leaves_unprocessed_are_keys_the_table_reads_again() -> None:
    # given instances in the table, and a BatchGetItem that leaves some of their keys unprocessed
    world = World(_deployment(), start=T0, seed=3)
    made = [wake.instance_id for wake in world.instances(5)]
    faults = FaultClass("unprocessed", (Fault("dynamodb:BatchGetItem", Kind.UNPROCESSED),))
    client = UnprocessedBatches(FaultInjector(world.engine, faults, 1.0, 3, lambda: None), world.store.client)
    table = world.store.db.table
    request = {table: {"Keys": [dump({"pk": instance_key(instance_id)}) for instance_id in made]}}
    replies = []

    def ask() -> None:  # a request of the simulation takes its time: made in a task
        replies.append(client.batch_get_item(RequestItems=request))
        assert replies[0]["UnprocessedKeys"]
        # when the keys left are asked for again, as DynamoDB's answer gives them
        replies.append(world.store.client.batch_get_item(RequestItems=replies[0]["UnprocessedKeys"]))

    world.engine.spawn(ask)
    world.engine.run(T0 + 60)
    # then every item is read, once
    read = [load(item)["pk"] for reply in replies for item in reply["Responses"][table]]
    assert sorted(read) == sorted(instance_key(instance_id) for instance_id in made)


@pytest.mark.parametrize(
    "name",
    ["dynamodb:Query times out before it applies", "lease race: call 10 s, lease 15 s, caller 30 s, batch 10"],
)
def test_no_function_reaches_lambdas_timeout_in_a_row_that_injects_none(name: str) -> None:
    # given a row whose slow requests (a sweeper's queries timing out, a caller's reads before its
    # calls and its hosts hanging) once ran functions into Lambda's timeout
    [(faults, rate, wakes, seed, deployment)] = [
        job for job in jobs(name, 300, seed=5) if job[0].name == name and job[1] in (0.1, 0.3)
    ]
    # when it runs, each function given its invocation's time left
    row = run_row(faults, rate, wakes, seed, deployment)
    # then every function stopped within it: nothing was left to Lambda's timeout
    assert row.injected > 0 and not row.injects_timeouts
    assert row.lambda_timeouts == 0, row
    assert row.ok, row
