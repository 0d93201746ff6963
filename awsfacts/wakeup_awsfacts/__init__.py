"""AWS as its documentation describes it, for the two programs that model it: the local stack
(`wakeup_local`) and the simulator (`wakeup_sim`). The Lambda layer does not import it.

- `template`: template.yaml read as CloudFormation reads it (tags, intrinsic functions).
- `quotas`: Lambda's, Scheduler's and API Gateway's quotas, each with its page.
- `sqs_scaling`: the SQS event source mapping's scaling, standard and provisioned mode.
- `dynamodb`: DynamoDB's capacity rules: units by item size, indexes, warm throughput, partitions.
"""
