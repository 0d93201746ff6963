"""boto3 clients of the local stack's own, always pointed at its moto server."""

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import boto3
import botocore.loaders
import botocore.session
from botocore.config import Config

from wakeup_local.aws.request_counter import STACK_AGENT

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_scheduler import EventBridgeSchedulerClient
    from mypy_boto3_secretsmanager import SecretsManagerClient
    from mypy_boto3_sqs import SQSClient

# Any value will do for moto; they are set explicitly so that no real credentials are ever used.
DUMMY_ACCESS_KEY_ID = "testing"
DUMMY_SECRET_ACCESS_KEY = "testing"

# Pollers and the Scheduler share these clients across threads (boto3 clients are thread-safe);
# the pool is sized for them, and moto on loopback answers at once or not at all.
_CONFIG = Config(
    # Tells moto's request counter these are the stack's own requests, not the functions'.
    user_agent_extra=STACK_AGENT,
    max_pool_connections=64,
    connect_timeout=2,
    read_timeout=10,
    retries={"mode": "standard", "max_attempts": 3},
)

# One loader for every session made here: a session reads each service's model (JSON files of up to
# a megabyte: IAM's, Lambda's) through its loader, which keeps what it read, and each session makes
# a loader of its own. The tests and the stack make clients many times in one process.
_LOADER = botocore.loaders.create_loader()


@dataclass(frozen=True)
class AwsClients:
    dynamodb: "DynamoDBClient"
    sqs: "SQSClient"
    scheduler: "EventBridgeSchedulerClient"
    secretsmanager: "SecretsManagerClient"
    # Lambda's event source mappings (mappings.py) and the role moto's functions need (untyped:
    # the project installs no stubs for them).
    awslambda: Any
    iam: Any
    # The stack's own record, which the planner reads for a deploy under way (mappings.py).
    cloudformation: Any

    def close(self) -> None:
        """Closes the clients' connections."""
        self.dynamodb.close()
        self.sqs.close()
        self.scheduler.close()
        self.secretsmanager.close()
        self.awslambda.close()
        self.iam.close()
        self.cloudformation.close()


def make_clients(endpoint_url: str, region: str) -> AwsClients:
    # No profile from the shell's AWS_PROFILE (one that does not exist here would fail the session);
    # credentials, region and endpoint are all given.
    no_profile = botocore.session.Session(session_vars={"profile": (None, None, None, None)})
    no_profile.register_component("data_loader", _LOADER)
    session = boto3.session.Session(
        aws_access_key_id=DUMMY_ACCESS_KEY_ID,
        aws_secret_access_key=DUMMY_SECRET_ACCESS_KEY,
        region_name=region,
        botocore_session=no_profile,
    )
    return AwsClients(
        dynamodb=session.client("dynamodb", endpoint_url=endpoint_url, config=_CONFIG),
        sqs=session.client("sqs", endpoint_url=endpoint_url, config=_CONFIG),
        scheduler=session.client("scheduler", endpoint_url=endpoint_url, config=_CONFIG),
        secretsmanager=session.client("secretsmanager", endpoint_url=endpoint_url, config=_CONFIG),
        awslambda=session.client("lambda", endpoint_url=endpoint_url, config=_CONFIG),
        iam=session.client("iam", endpoint_url=endpoint_url, config=_CONFIG),
        cloudformation=session.client("cloudformation", endpoint_url=endpoint_url, config=_CONFIG),
    )
