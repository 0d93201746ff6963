"""The service's errors, each mapped to one HTTP status in `wakeup.api.http`.

    WakeupError                 anything the service refuses or cannot do (500)
     ├── BadRequestError        the request's body, query or field is not acceptable (400)
     ├── PayloadTooLargeError   the body is over the size limit (413)
     ├── UnauthorizedError      no token, an unknown one, or one of the wrong kind (401)
     ├── ForbiddenError         the instance is another account's (403)
     ├── NotFoundError          no such instance, or no such path (404)
     ├── MethodNotAllowedError  a known path with another method (405)
     ├── ConflictError          the token is another account's instance's (409)
     ├── TooManyRequestsError   an instance registers wakes, or an account sends requests, faster than
     │                          the operator allows (429, with Retry-After)
     └── UnavailableError       AWS throttled or failed; the request may be retried (503)

Every message is a fixed sentence written here or at the raising site, never `str()` of a library
error, so no reply can carry a token, a table name or a trace.
"""


class WakeupError(Exception):
    """Raised when the service cannot do what was asked; the base of every error here."""

    status = 500
    message = "the service failed; try again later"

    def __init__(self, message: str | None = None) -> None:
        if message is not None:
            self.message = message
        super().__init__(self.message)


class BadRequestError(WakeupError):
    """Raised when a body, a field or a query parameter breaks the contract."""

    status = 400
    message = "the request is not valid"


class PayloadTooLargeError(WakeupError):
    """Raised when a body is larger than the service accepts."""

    status = 413
    message = "the body is larger than 16 KiB"


class UnauthorizedError(WakeupError):
    """Raised when the token is missing, malformed, unknown, revoked or of the wrong kind."""

    status = 401
    message = "a valid token is required: send Authorization: Bearer <token>"


class ForbiddenError(WakeupError):
    """Raised when an account reaches for another account's instance."""

    status = 403
    message = "this instance belongs to another account"


class NotFoundError(WakeupError):
    """Raised when an instance or a path does not exist."""

    status = 404
    message = "no such instance"


class MethodNotAllowedError(WakeupError):
    """Raised when a known path is asked with a method it does not serve."""

    status = 405
    message = "this method is not allowed on this path"

    def __init__(self, allowed: list[str]) -> None:
        self.allowed = allowed
        super().__init__(f"this path accepts {', '.join(allowed)} only")


class ConflictError(WakeupError):
    """Raised when an instance token is already registered by another account."""

    status = 409
    message = "this instance token is registered by another account; mint a new one"


class TooManyRequestsError(WakeupError):
    """Raised when an instance registers wakes, or an account sends requests, faster than the
    operator's rate allows; `retry_after_s` is when the next window opens (the `Retry-After`)."""

    status = 429
    message = "too many requests; retry later"

    def __init__(self, message: str | None = None, retry_after_s: int | None = None) -> None:
        self.retry_after_s = retry_after_s
        super().__init__(message)


class UnavailableError(WakeupError):
    """Raised when AWS throttles or fails underneath; retrying the same request is safe."""

    status = 503
    message = "the service is busy; retry the request shortly"
