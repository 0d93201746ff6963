"""An SQS event source mapping in moto, as the caller's is on AWS, for the planner's tests: a
function of its own on a queue of its own (moto serves Lambda's mapping calls without Docker)."""

import io
import uuid
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import boto3
from moto_env import REGION


@contextmanager
def sqs_mapping(endpoint: str) -> Iterator[tuple[Any, str]]:
    """(a Lambda client on moto, the mapping's UUID); everything made is removed afterwards."""
    name = f"caller-{uuid.uuid4().hex[:8]}"
    lambda_client = boto3.client("lambda", endpoint_url=endpoint, region_name=REGION)
    iam = boto3.client("iam", endpoint_url=endpoint, region_name=REGION)
    sqs = boto3.client("sqs", endpoint_url=endpoint, region_name=REGION)
    role = iam.create_role(RoleName=name, AssumeRolePolicyDocument="{}")["Role"]["Arn"]
    code = io.BytesIO()
    with zipfile.ZipFile(code, "w") as archive:
        archive.writestr("handler.py", "def handler(event, context):\n    return None\n")
    lambda_client.create_function(
        FunctionName=name, Runtime="python3.13", Role=role, Handler="handler.handler", Code={"ZipFile": code.getvalue()}
    )
    queue = sqs.create_queue(QueueName=name)["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    mapping = lambda_client.create_event_source_mapping(EventSourceArn=arn, FunctionName=name, BatchSize=1)
    try:
        yield lambda_client, mapping["UUID"]
    finally:
        lambda_client.delete_event_source_mapping(UUID=mapping["UUID"])
        lambda_client.delete_function(FunctionName=name)
        sqs.delete_queue(QueueUrl=queue)
        iam.delete_role(RoleName=name)
