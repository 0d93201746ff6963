"""The mapping watcher reports a change of a mapping's scaling once it has applied, not before."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import boto3
import pytest

from support.waiting import wait_until
from wakeup_local.aws.moto_process import MotoProcess
from wakeup_local.event_sources.mappings import LocalMapping, MappingWatcher, empty_package

MAPPING_UPDATE_S = 1.0


@pytest.fixture(scope="module")
def awslambda() -> Iterator[Any]:
    process = MotoProcess(mapping_update_s=MAPPING_UPDATE_S)
    process.start()
    yield boto3.client("lambda", endpoint_url=process.endpoint_url, region_name="us-east-1")
    process.stop()


def make_mapping(awslambda: Any) -> str:
    endpoint = awslambda.meta.endpoint_url
    name = f"f-{uuid.uuid4().hex[:8]}"
    iam = boto3.client("iam", endpoint_url=endpoint, region_name="us-east-1")
    sqs = boto3.client("sqs", endpoint_url=endpoint, region_name="us-east-1")
    role = iam.create_role(RoleName=name, AssumeRolePolicyDocument="{}")["Role"]["Arn"]
    awslambda.create_function(
        FunctionName=name, Runtime="python3.13", Role=role, Handler="h.h", Code={"ZipFile": empty_package()}
    )
    queue = sqs.create_queue(QueueName=name)["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    return str(awslambda.create_event_source_mapping(EventSourceArn=arn, FunctionName=name)["UUID"])


def test_a_change_is_reported_once_the_mapping_is_enabled_again(awslambda: Any) -> None:
    # given a watched mapping in standard mode
    mapping_uuid = make_mapping(awslambda)
    changes: list[tuple[float, str, dict[str, Any]]] = []
    lock = threading.Lock()

    def record(name: str, scaling: dict[str, Any]) -> None:
        with lock:
            changes.append((time.monotonic(), name, scaling))

    watcher = MappingWatcher([LocalMapping("F.Queue", mapping_uuid, {})], awslambda, record, interval_s=0.05)
    watcher.start()
    try:
        # when provisioned mode is turned on
        updated_at = time.monotonic()
        awslambda.update_event_source_mapping(
            UUID=mapping_uuid, ProvisionedPollerConfig={"MinimumPollers": 3, "MaximumPollers": 10}
        )
        # then it is reported once, after the mapping's Updating
        wait_until(lambda: changes, timeout=MAPPING_UPDATE_S + 5, interval=0.02, message="the change reported")
        [(reported_at, name, scaling)] = changes
        assert (name, scaling) == ("F.Queue", {"ProvisionedPollerConfig": {"MinimumPollers": 3, "MaximumPollers": 10}})
        assert reported_at - updated_at >= MAPPING_UPDATE_S * 0.9
        # and turning it off is reported as no provisioned pollers
        awslambda.update_event_source_mapping(UUID=mapping_uuid, ProvisionedPollerConfig={})
        wait_until(lambda: len(changes) == 2, timeout=MAPPING_UPDATE_S + 5, interval=0.02, message="the off reported")
        assert changes[1][1:] == ("F.Queue", {})
    finally:
        watcher.stop()
