"""Test handlers' record of what they were given: one JSON line per event, in a file per function.

The folder is `WAKEUP_TEST_RECORDS` (the tests set it in the stack's environment; the stack passes
`WAKEUP_*` settings on to every function); each environment appends whole lines to the file.
"""

import json
import os
from typing import Any


def record(entry: dict[str, Any]) -> None:
    folder = os.environ.get("WAKEUP_TEST_RECORDS")
    if not folder:
        return
    path = os.path.join(folder, f"{os.environ['AWS_LAMBDA_FUNCTION_NAME']}.jsonl")
    with open(path, "a", encoding="utf-8") as records:
        records.write(json.dumps(entry) + "\n")
