"""`make bench`: what the service costs in time and money, measured on this machine.

- cold start: the import of each handler module in a fresh process, with only the Lambda layer's
  packages installed (`bench/.venv`, built from `layers/wakeup/requirements.txt`);
- API latency of the local stack: POST an instance, GET it, PUT a wake;
- wake lateness: many wakes due at the same second, called on a loopback host;
- a rough cost per million wakes, from the AWS requests the functions make per wake (counted by a
  hook on boto3), their invocations and durations, and the bytes they log.

It prints what it measured and judges nothing: no threshold, no pass or fail. Everything runs on
127.0.0.1.
"""
