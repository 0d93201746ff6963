"""The local stack's own boto3 clients: every set made in a process reads each service's model once."""

import uuid
from concurrent.futures import ThreadPoolExecutor

from wakeup_local.aws.clients import make_clients


def test_clients_made_again_share_the_service_models_already_read(moto_endpoint: str) -> None:
    first, second = make_clients(moto_endpoint, "us-east-1"), make_clients(moto_endpoint, "us-east-1")
    try:
        for name in ("dynamodb", "sqs", "scheduler", "secretsmanager", "awslambda", "iam"):
            one, other = getattr(first, name).meta.service_model, getattr(second, name).meta.service_model
            assert one._service_description is other._service_description, name
    finally:
        first.close()
        second.close()


def test_sets_of_clients_made_in_many_threads_at_once_each_work(moto_endpoint: str) -> None:
    def own_queue(_: int) -> tuple[str, str, str]:
        clients = make_clients(moto_endpoint, "us-east-1")
        try:
            name = f"q-{uuid.uuid4().hex[:12]}"
            made = clients.sqs.create_queue(QueueName=name)["QueueUrl"]
            return name, made, clients.sqs.get_queue_url(QueueName=name)["QueueUrl"]
        finally:
            clients.close()

    with ThreadPoolExecutor(16) as pool:
        queues = list(pool.map(own_queue, range(32)))
    assert all(made == found and made.endswith(name) for name, made, found in queues)
