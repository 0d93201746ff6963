"""The template's tables, queues and schedule groups, created in moto from their own definitions."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from typing import Any

from wakeup_awsfacts.template import (
    DYNAMODB_TABLE,
    SCHEDULE_GROUP,
    SECRET,
    SQS_QUEUE,
    Resolver,
    Template,
    TemplateError,
)
from wakeup_local.aws.clients import AwsClients

log = logging.getLogger(__name__)

# CloudFormation's queue properties that are SQS queue attributes under the same name.
_QUEUE_ATTRIBUTES = (
    "ContentBasedDeduplication",
    "DeduplicationScope",
    "DelaySeconds",
    "FifoQueue",
    "FifoThroughputLimit",
    "KmsDataKeyReusePeriodSeconds",
    "KmsMasterKeyId",
    "MaximumMessageSize",
    "MessageRetentionPeriod",
    "ReceiveMessageWaitTimeSeconds",
    "SqsManagedSseEnabled",
    "VisibilityTimeout",
)
_JSON_QUEUE_ATTRIBUTES = ("RedrivePolicy", "RedriveAllowPolicy")


@dataclass(frozen=True)
class Queue:
    logical_id: str
    name: str
    url: str
    arn: str


@dataclass
class StackResources:
    """What was created, by logical id."""

    tables: dict[str, str] = field(default_factory=dict)
    queues: dict[str, Queue] = field(default_factory=dict)
    schedule_groups: dict[str, str] = field(default_factory=dict)
    # Secrets Manager secrets by logical id: their ARNs (what `Ref` gives).
    secrets: dict[str, str] = field(default_factory=dict)

    def queue_by_arn(self, arn: str) -> Queue:
        for queue in self.queues.values():
            if queue.arn == arn:
                return queue
        raise TemplateError(f"no queue of the template has the ARN {arn}")


def create_resources(template: Template, resolver: Resolver, clients: AwsClients) -> StackResources:
    """Creates every table, queue, schedule group and secret the template defines (and its
    conditions allow)."""
    created = StackResources()
    # Secrets first: functions' settings and other resources may name them.
    for logical_id, definition in template.of_type(SECRET):
        if resolver.is_created(logical_id):
            created.secrets[logical_id] = _create_secret(logical_id, definition, resolver, clients)
    for logical_id, definition in template.of_type(DYNAMODB_TABLE):
        if resolver.is_created(logical_id):
            created.tables[logical_id] = _create_table(logical_id, definition, resolver, clients)
    _create_queues(template, resolver, clients, created)
    for logical_id, definition in template.of_type(SCHEDULE_GROUP):
        if resolver.is_created(logical_id):
            created.schedule_groups[logical_id] = _create_schedule_group(logical_id, definition, resolver, clients)
    return created


def delete_resources(resources: StackResources, clients: AwsClients) -> None:
    """Removes what `create_resources` made (a test's own resources, after the test)."""
    for table in resources.tables.values():
        clients.dynamodb.delete_table(TableName=table)
    for queue in resources.queues.values():
        clients.sqs.delete_queue(QueueUrl=queue.url)
    for group in resources.schedule_groups.values():
        clients.scheduler.delete_schedule_group(Name=group)
    for secret in resources.secrets.values():
        clients.secretsmanager.delete_secret(SecretId=secret, ForceDeleteWithoutRecovery=True)


def _properties(definition: dict[str, Any], resolver: Resolver) -> dict[str, Any]:
    properties = resolver.resolve(definition.get("Properties") or {})
    if not isinstance(properties, dict):
        raise TemplateError("a resource's Properties must be a mapping")
    return properties


# --- DynamoDB --------------------------------------------------------------------------------------


def _throughput(value: dict[str, Any]) -> dict[str, int]:
    return {
        "ReadCapacityUnits": int(value["ReadCapacityUnits"]),
        "WriteCapacityUnits": int(value["WriteCapacityUnits"]),
    }


def _index(index: dict[str, Any], provisioned: bool) -> dict[str, Any]:
    request: dict[str, Any] = {
        "IndexName": index["IndexName"],
        "KeySchema": index["KeySchema"],
        "Projection": index.get("Projection", {"ProjectionType": "ALL"}),
    }
    if provisioned and "ProvisionedThroughput" in index:
        request["ProvisionedThroughput"] = _throughput(index["ProvisionedThroughput"])
    return request


def _create_table(logical_id: str, definition: dict[str, Any], resolver: Resolver, clients: AwsClients) -> str:
    properties = _properties(definition, resolver)
    name = resolver.physical_name(logical_id)
    billing_mode = str(properties.get("BillingMode", "PROVISIONED"))
    provisioned = billing_mode == "PROVISIONED"
    request: dict[str, Any] = {
        "TableName": name,
        "KeySchema": properties["KeySchema"],
        "AttributeDefinitions": properties["AttributeDefinitions"],
        "BillingMode": billing_mode,
    }
    if provisioned:
        request["ProvisionedThroughput"] = _throughput(properties["ProvisionedThroughput"])
    if properties.get("GlobalSecondaryIndexes"):
        request["GlobalSecondaryIndexes"] = [
            _index(index, provisioned) for index in properties["GlobalSecondaryIndexes"]
        ]
    if properties.get("LocalSecondaryIndexes"):
        request["LocalSecondaryIndexes"] = [_index(index, False) for index in properties["LocalSecondaryIndexes"]]
    stream = properties.get("StreamSpecification")
    if stream:
        request["StreamSpecification"] = {"StreamEnabled": True, "StreamViewType": stream["StreamViewType"]}
    if properties.get("Tags"):
        request["Tags"] = properties["Tags"]
    clients.dynamodb.create_table(**request)

    time_to_live = properties.get("TimeToLiveSpecification")
    if time_to_live:
        clients.dynamodb.update_time_to_live(
            TableName=name,
            TimeToLiveSpecification={
                "Enabled": _flag(time_to_live.get("Enabled", False)),
                "AttributeName": time_to_live["AttributeName"],
            },
        )
    recovery = properties.get("PointInTimeRecoverySpecification")
    if recovery:
        clients.dynamodb.update_continuous_backups(
            TableName=name,
            PointInTimeRecoverySpecification={
                "PointInTimeRecoveryEnabled": _flag(recovery.get("PointInTimeRecoveryEnabled", False))
            },
        )
    log.info("table created: %s (%s)", name, logical_id)
    return name


# --- SQS -------------------------------------------------------------------------------------------


def _create_queues(template: Template, resolver: Resolver, clients: AwsClients, created: StackResources) -> None:
    pending = {
        logical_id: _properties(definition, resolver)
        for logical_id, definition in template.of_type(SQS_QUEUE)
        if resolver.is_created(logical_id)
    }
    # A queue's dead-letter queue must exist before the redrive policy can name it (moto checks, as
    # SQS does), so queues are created once what they redrive to exists.
    while pending:
        made = {queue.arn for queue in created.queues.values()}
        ours = {resolver.arn(logical_id) for logical_id in pending}
        ready = [
            logical_id
            for logical_id, properties in pending.items()
            if _dead_letter_arn(properties) is None
            or _dead_letter_arn(properties) in made
            or _dead_letter_arn(properties) not in ours
        ]
        if not ready:
            raise TemplateError(f"the queues {sorted(pending)} redrive to each other in a cycle")
        for logical_id in ready:
            created.queues[logical_id] = _create_queue(logical_id, pending.pop(logical_id), resolver, clients)


def _dead_letter_arn(properties: dict[str, Any]) -> str | None:
    policy = properties.get("RedrivePolicy")
    if isinstance(policy, str):
        policy = json.loads(policy)
    return str(policy["deadLetterTargetArn"]) if policy else None


def _create_queue(logical_id: str, properties: dict[str, Any], resolver: Resolver, clients: AwsClients) -> Queue:
    name = resolver.physical_name(logical_id)
    attributes = {key: _attribute(properties[key]) for key in _QUEUE_ATTRIBUTES if key in properties}
    for key in _JSON_QUEUE_ATTRIBUTES:
        if key in properties:
            value = properties[key]
            attributes[key] = value if isinstance(value, str) else json.dumps(value)
    request: dict[str, Any] = {"QueueName": name, "Attributes": attributes}
    if properties.get("Tags"):
        request["tags"] = {tag["Key"]: str(tag["Value"]) for tag in properties["Tags"]}
    url = clients.sqs.create_queue(**request)["QueueUrl"]
    resolver.set_ref(logical_id, url)
    log.info("queue created: %s (%s)", name, logical_id)
    return Queue(logical_id=logical_id, name=name, url=url, arn=resolver.arn(logical_id))


def _attribute(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


# --- EventBridge Scheduler -------------------------------------------------------------------------


def _create_schedule_group(logical_id: str, definition: dict[str, Any], resolver: Resolver, clients: AwsClients) -> str:
    properties = _properties(definition, resolver)
    name = resolver.physical_name(logical_id)
    tags = properties.get("Tags") or []
    clients.scheduler.create_schedule_group(
        Name=name, Tags=[{"Key": str(tag["Key"]), "Value": str(tag["Value"])} for tag in tags]
    )
    log.info("schedule group created: %s (%s)", name, logical_id)
    return name


# --- Secrets Manager -------------------------------------------------------------------------------

# GenerateSecretString's options that GetRandomPassword takes under the same names
# (AWS::SecretsManager::Secret GenerateSecretString, CloudFormation template reference).
_PASSWORD_OPTIONS = (
    "ExcludeCharacters",
    "ExcludeLowercase",
    "ExcludeNumbers",
    "ExcludePunctuation",
    "ExcludeUppercase",
    "IncludeSpace",
    "PasswordLength",
    "RequireEachIncludedType",
)


def _create_secret(logical_id: str, definition: dict[str, Any], resolver: Resolver, clients: AwsClients) -> str:
    """The secret with its `SecretString`, or one generated as CloudFormation's
    `GenerateSecretString` asks (a random password, put under `GenerateStringKey` of
    `SecretStringTemplate` when both are given); `Ref` is its ARN."""
    properties = _properties(definition, resolver)
    name = resolver.physical_name(logical_id)
    value = properties.get("SecretString")
    generate = properties.get("GenerateSecretString")
    if value is None and generate is not None:
        options = {key: _password_option(key, generate[key]) for key in _PASSWORD_OPTIONS if key in generate}
        password = clients.secretsmanager.get_random_password(**options)["RandomPassword"]
        if "GenerateStringKey" in generate:
            document = json.loads(generate.get("SecretStringTemplate") or "{}")
            document[generate["GenerateStringKey"]] = password
            value = json.dumps(document)
        else:
            value = password
    request: dict[str, Any] = {"Name": name, "SecretString": value or ""}
    if properties.get("Description"):
        request["Description"] = str(properties["Description"])
    if properties.get("Tags"):
        request["Tags"] = [{"Key": str(tag["Key"]), "Value": str(tag["Value"])} for tag in properties["Tags"]]
    arn = clients.secretsmanager.create_secret(**request)["ARN"]
    resolver.set_ref(logical_id, arn)
    log.info("secret created: %s (%s)", name, logical_id)
    return str(arn)


def _password_option(key: str, value: Any) -> Any:
    if key == "ExcludeCharacters":
        return str(value)
    if key == "PasswordLength":
        return int(value)
    return _flag(value)


def _flag(value: Any) -> bool:
    return value is True or str(value).lower() == "true"
