"""AWS's quotas and documented behaviours that the local stack and the simulator both follow.

Each figure names the AWS documentation page it comes from. DynamoDB's capacity rules are in
`wakeup_awsfacts.dynamodb`, the SQS event source's scaling in `wakeup_awsfacts.sqs_scaling`, Lambda's
retries of an asynchronous event in `wakeup_awsfacts.lambda_async`.
"""

# --- Lambda --------------------------------------------------------------------------------------
# "Lambda quotas": 1,000 concurrent executions per account and Region by default.
ACCOUNT_CONCURRENCY = 1000
# "Lambda scaling behavior": each function gains at most 1,000 execution environments every 10 s.
SCALING_ENVIRONMENTS_PER_S = 100.0
SCALING_BURST = 1000
# "Configure Lambda function memory": CPU in proportion to memory, one vCPU at 1,769 MB; 128 MB
# when the function does not say. "Configure Lambda function timeout": 3 s when it does not say.
MB_PER_VCPU = 1769
DEFAULT_MEMORY_MB = 128
DEFAULT_TIMEOUT_S = 3.0
# "Use Lambda recursive loop detection": an SQS -> Lambda -> same SQS chain is stopped after about
# 16 invocations unless the function's RecursiveLoop is Allow.
RECURSION_LIMIT = 16

# --- SQS -----------------------------------------------------------------------------------------
# "ReceiveMessage" and "DeleteMessageBatch" (Amazon SQS API reference): at most 10 messages a request.
SQS_MAX_RECEIVE = 10

# --- EventBridge Scheduler -----------------------------------------------------------------------
# "Quotas for Amazon EventBridge Scheduler": invocations throttle limit 1,000 per second,
# CreateSchedule 5,000 per second (us-east-1). A one-time schedule fires within its minute.
SCHEDULER_INVOCATIONS_PER_S = 1000
SCHEDULER_CREATE_PER_S = 5000
SCHEDULER_WINDOW_S = 60.0

# --- API Gateway ---------------------------------------------------------------------------------
# "Amazon API Gateway quotas": 10,000 requests per second per account and Region, burst 5,000.
API_ACCOUNT_RATE = 10000
API_ACCOUNT_BURST = 5000
