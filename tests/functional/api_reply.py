"""What an API function returned to API Gateway, read back: the status, headers and JSON body."""

import json
from dataclasses import dataclass
from typing import Any, Self


@dataclass
class Reply:
    status: int
    headers: dict[str, str]
    body: Any

    @classmethod
    def of(cls, result: dict[str, Any]) -> Self:
        """The handler's result (payload format 2.0), its body parsed (None when it has none)."""
        body = json.loads(result["body"]) if result.get("body") else None
        return cls(result["statusCode"], result.get("headers") or {}, body)

    @property
    def error(self) -> str:
        """The error's sentence, once the reply is checked to be in the error shape."""
        assert self.headers.get("Content-Type") == "application/json"
        assert isinstance(self.body, dict) and set(self.body) == {"error"}, self.body
        assert isinstance(self.body["error"], str) and self.body["error"]
        return str(self.body["error"])
