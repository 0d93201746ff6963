"""AWS as its documentation describes it, for the two programs that model it: the local stack
(`wakeup_local`) and the simulator (`wakeup_sim`). The Lambda layer does not import it.

- `template`: template.yaml read as CloudFormation reads it (tags, intrinsic functions).
- `quotas`: Lambda's, Scheduler's and API Gateway's quotas, each with its page.
- `sqs_scaling`: the SQS event source mapping's scaling, standard and provisioned mode.
- `dynamodb`: DynamoDB's capacity rules: units by item size, indexes, warm throughput, partitions.

The behaviours both programs model are written here once, each given the time by its caller (the
local stack's clock, the simulator's virtual one), never reading a clock itself:

- `token_bucket`: the token bucket (API Gateway's throttles, Lambda's scaling, Scheduler's
  invocations, DynamoDB's throughput).
- `api_gateway`: an HTTP API's route throttles, as the template sets them.
- `scheduler`: Scheduler's `at()` and `rate()` expressions, and a one-time schedule's firing
  within its minute.
- `lambda_async`: Lambda's retries of an asynchronous event, and its maximum age.
"""
