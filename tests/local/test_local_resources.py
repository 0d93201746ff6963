"""Tables, queues, schedule groups and secrets created in moto from the template's own definitions."""

import json
import random
import uuid
from collections.abc import Iterator

import pytest
from localstack_helpers import FIXTURE_TEMPLATE, ROOT

from wakeup_awsfacts.template import DYNAMODB_TABLE, SCHEDULE_GROUP, SECRET, SQS_QUEUE, Resolver, load_template
from wakeup_local.aws.clients import AwsClients, make_clients
from wakeup_local.aws.resources import StackResources, create_resources, delete_resources


@pytest.fixture(scope="module")
def endpoint(moto_endpoint: str) -> str:
    return moto_endpoint


@pytest.fixture
def clients(endpoint: str) -> Iterator[AwsClients]:
    made = make_clients(endpoint, "us-east-1")
    yield made
    made.close()


@pytest.fixture
def created(endpoint: str, clients: AwsClients) -> Iterator[tuple[Resolver, StackResources]]:
    template = load_template(FIXTURE_TEMPLATE)
    resolver = Resolver(template, f"r-{uuid.uuid4().hex[:8]}", endpoint_url=endpoint, rng=random.Random())
    resources = create_resources(template, resolver, clients)
    yield resolver, resources
    delete_resources(resources, clients)


def test_the_table_has_the_templates_keys_indexes_and_billing(
    created: tuple[Resolver, StackResources], clients: AwsClients
) -> None:
    resolver, resources = created
    table = clients.dynamodb.describe_table(TableName=resources.tables["Table"])["Table"]
    assert table["TableName"] == resolver.physical_name("Table")
    assert table["KeySchema"] == [{"AttributeName": "pk", "KeyType": "HASH"}]
    assert {item["AttributeName"] for item in table["AttributeDefinitions"]} == {"pk", "list_pk", "list_sk"}
    assert table["BillingModeSummary"]["BillingMode"] == "PAY_PER_REQUEST"
    (index,) = table["GlobalSecondaryIndexes"]
    assert index["IndexName"] == "ByList"
    assert index["KeySchema"] == [
        {"AttributeName": "list_pk", "KeyType": "HASH"},
        {"AttributeName": "list_sk", "KeyType": "RANGE"},
    ]
    assert index["Projection"] == {"ProjectionType": "KEYS_ONLY"}
    backups = clients.dynamodb.describe_continuous_backups(TableName=resources.tables["Table"])
    recovery = backups["ContinuousBackupsDescription"]["PointInTimeRecoveryDescription"]
    assert recovery["PointInTimeRecoveryStatus"] == "ENABLED"


def test_queues_have_their_attributes_and_redrive_to_the_dead_letter_queue(
    created: tuple[Resolver, StackResources], clients: AwsClients
) -> None:
    resolver, resources = created
    queue = resources.queues["Queue"]
    assert resolver.resolve({"Ref": "Queue"}) == queue.url
    attributes = clients.sqs.get_queue_attributes(QueueUrl=queue.url, AttributeNames=["All"])["Attributes"]
    assert attributes["VisibilityTimeout"] == "1"
    assert attributes["QueueArn"] == queue.arn
    redrive = json.loads(attributes["RedrivePolicy"])
    assert redrive["deadLetterTargetArn"] == resources.queues["DeadLetterQueue"].arn
    assert int(redrive["maxReceiveCount"]) == 2
    dead_letter = clients.sqs.get_queue_attributes(
        QueueUrl=resources.queues["DeadLetterQueue"].url, AttributeNames=["MessageRetentionPeriod"]
    )["Attributes"]
    assert dead_letter["MessageRetentionPeriod"] == "1209600"


def test_the_schedule_group_exists(created: tuple[Resolver, StackResources], clients: AwsClients) -> None:
    resolver, resources = created
    group = clients.scheduler.get_schedule_group(Name=resources.schedule_groups["ScheduleGroup"])
    assert group["Name"] == resolver.physical_name("ScheduleGroup")


def test_every_table_queue_and_group_of_the_real_template_is_created(endpoint: str, clients: AwsClients) -> None:
    template = load_template(ROOT / "template.yaml")
    resolver = Resolver(template, f"real-{uuid.uuid4().hex[:8]}", endpoint_url=endpoint)
    resources = create_resources(template, resolver, clients)
    try:
        assert set(resources.tables) == {logical_id for logical_id, _ in template.of_type(DYNAMODB_TABLE)}
        assert set(resources.queues) == {logical_id for logical_id, _ in template.of_type(SQS_QUEUE)}
        assert set(resources.schedule_groups) == {logical_id for logical_id, _ in template.of_type(SCHEDULE_GROUP)}
        assert set(resources.secrets) == {logical_id for logical_id, _ in template.of_type(SECRET)}
        for queue in resources.queues.values():
            assert clients.sqs.get_queue_url(QueueName=queue.name)["QueueUrl"] == queue.url
    finally:
        delete_resources(resources, clients)


def test_a_secret_gets_a_value_generated_as_its_generate_secret_string_asks(endpoint: str, clients: AwsClients) -> None:
    # given the real template's master key: 64 characters, no punctuation
    template = load_template(ROOT / "template.yaml")
    resolver = Resolver(template, f"secret-{uuid.uuid4().hex[:8]}", endpoint_url=endpoint)
    resources = create_resources(template, resolver, clients)
    try:
        arn = resources.secrets["SigningMasterKey"]
        # then Ref gives its ARN, as CloudFormation's does, and the value is a fresh random one
        assert resolver.ref("SigningMasterKey") == arn
        value = clients.secretsmanager.get_secret_value(SecretId=arn)["SecretString"]
        assert len(value) == 64 and value.isalnum()
        again = create_resources(
            template, Resolver(template, f"other-{uuid.uuid4().hex[:8]}", endpoint_url=endpoint), clients
        )
        try:
            other = clients.secretsmanager.get_secret_value(SecretId=again.secrets["SigningMasterKey"])["SecretString"]
            assert other != value
        finally:
            delete_resources(again, clients)
    finally:
        delete_resources(resources, clients)
