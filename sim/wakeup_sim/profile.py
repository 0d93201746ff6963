"""Where the simulated stack runs: what each step of the service costs in CPU and in time.

`AWS` is the deployment on AWS: each execution environment has a CPU of its own (its share of a
vCPU, from its memory), AWS's services answer after a round trip within the Region, and the event
source scales as Lambda's does (`wakeup_awsfacts.sqs_scaling`). A "local" profile is the local stack on one
machine (`wakeup_calibrate.local_profile` measures it): moto, the stack's own process (its SQS poller and
the hosts' server) and every execution environment share the machine's cores; moto serves each
request with CPU of its own; the event source is the local poller, bounded by the stack's
concurrency. The same scenario then runs on either.
"""

from __future__ import annotations

from dataclasses import dataclass

from wakeup_awsfacts.sqs_scaling import Scaling
from wakeup_sim import deployment as aws


@dataclass(frozen=True)
class Profile:
    name: str
    # CPU at one vCPU, in the function's process: its init (a cold start), its own overhead per
    # invocation, each AWS request (botocore: serialise, sign, parse) and each host call.
    init_cpu_s: float = aws.INIT_S_AT_ONE_VCPU
    # On-demand init unthrottled (its one-vCPU time at any memory), and the first invocation's lazy
    # setup at the memory's share (`deployment.py` names their sources).
    init_unthrottled: bool = aws.INIT_UNTHROTTLED
    first_call_cpu_s: float = aws.FIRST_CALL_CPU_S
    invocation_cpu_s: float = aws.INVOCATION_CPU_S
    aws_request_cpu_s: float = aws.AWS_REQUEST_CPU_S
    host_call_cpu_s: float = aws.HOST_CALL_CPU_S
    # Round trips (beyond any CPU the service spends, below).
    dynamodb_latency_s: float = aws.DYNAMODB_LATENCY_S
    sqs_latency_s: float = aws.SQS_LATENCY_S
    scheduler_latency_s: float = aws.SCHEDULER_LATENCY_S
    receive_latency_s: float = aws.RECEIVE_LATENCY_S
    # The hosts' answer time: log-normal, this median and spread.
    host_median_s: float = 0.1
    host_sigma: float = 0.6
    # --- one machine (None: AWS, where every environment has a processor of its own) ---
    cores: int | None = None
    # The share of each core left to the stack (the machine's other load takes the rest).
    core_speed: float = 1.0
    # Or the machine's other load as this many jobs always under way, each taking its equal share
    # of the cores as the stack's processes do (`engine.Machine`).
    background_jobs: float = 0.0
    # What the stack's idle pollers keep busy of the machine, in cores (moto's and the stack's):
    # measured, and taken off what moto and the stack use per request and per batch.
    idle_cores: float = 0.0
    # The AWS services' own CPU per request (moto's, one process): None on AWS.
    service_cpu_s: float | None = None
    # The event source's CPU per batch (receive and delete: the poller's and moto's) and per
    # message (building its record, and the host's server answering its call).
    batch_cpu_s: float = 0.0
    message_cpu_s: float = 0.0
    # The services' CPU per batch (moto's, serving the receive and the delete).
    batch_service_cpu_s: float = 0.0
    # The AWS requests a cold start makes (the local stack's caller: its signing keys, on its first
    # invocation), each costing `aws_request_cpu_s` and the services' `service_cpu_s`.
    cold_start_requests: float = 0.0
    # An idle poller looks at the queue this often (0: it learns of a visible message at once).
    poll_interval_s: float = 0.0
    # The event source's scaling when it is not the template's (the local stack's, within its bound).
    scaling: Scaling | None = None
    # Every environment's processor at a full core (the local stack's are processes, not Lambda's
    # share of a vCPU by memory).
    full_core_environments: bool = False


AWS = Profile("AWS")
