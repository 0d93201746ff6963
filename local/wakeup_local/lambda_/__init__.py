"""Lambda: the template's functions, each run in execution environments of its own (their pool,
their process and its fork server, the Runtime API each polls), the functions' log, and
asynchronous invocation with its retries. Named `lambda_` because `lambda` is Python's keyword."""
