"""What invokes the functions besides the gateway: the SQS event source mappings (their poller and
its scaling) and EventBridge Scheduler's firing."""
