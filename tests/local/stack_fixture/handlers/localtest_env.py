"""Test handler for the execution model: what its environment is, how long to sleep, a gate to wait at.

`GET /env/...` answers the environment's pid and the variables it sees now; `GET /sleep/{seconds}`
sleeps that long first; `GET /gated/{name}` records that it started, then waits until the gate
file `open` exists in `WAKEUP_TEST_RECORDS`.
"""

import json
import os
import time
from typing import Any

from records import record

INIT_AT = time.time()


def lambda_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    path = event["rawPath"].strip("/").split("/")
    if path[0] == "sleep":
        time.sleep(float(path[1]))
    elif path[0] == "gated":
        record({"started": path[1], "pid": os.getpid()})
        gate = os.path.join(os.environ["WAKEUP_TEST_RECORDS"], "open")
        while not os.path.exists(gate):
            time.sleep(0.01)
    body = {
        "pid": os.getpid(),
        "init_at": INIT_AT,
        "colour": os.environ.get("COLOUR"),
        "function_name": os.environ["AWS_LAMBDA_FUNCTION_NAME"],
        "environment": dict(os.environ),
    }
    return {"statusCode": 200, "headers": {"content-type": "application/json"}, "body": json.dumps(body)}
