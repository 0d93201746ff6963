"""DynamoDB's and SQS's requests straight to moto's handlers, past the Flask app moto's server puts
in front of each service.

moto's server finds a request's service under a lock that every request shares
(`DomainDispatcherApplication`), then runs it through a Flask app (request context, URL routing,
response object). For the two services the handlers call on every wake and registration that was
about a fifth of moto's process's CPU under a burst (py-spy, with the GIL). Both speak a JSON
protocol: the operation is in `X-Amz-Target` and every request goes to `/`, so the handler class
is known from the target alone. The handler is called as moto's Flask view calls it
(`moto.core.utils.convert_to_flask_response`): same request type, URL and headers, same reply;
every other request goes through moto's server as before.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from botocore.exceptions import ClientError
from moto.core.request import Request
from moto.dynamodb.responses import DynamoHandler
from moto.moto_api import recorder
from moto.settings import DISABLE_GLOBAL_CORS
from moto.sqs.responses import SQSResponse
from werkzeug.exceptions import InternalServerError

from wakeup_local.loopback_wsgi import StartResponse, WsgiApp, status_line

log = logging.getLogger(__name__)

# The target's prefix (the service's JSON API and version) → moto's handler of it.
HANDLERS: dict[str, Any] = {"DynamoDB_20120810": DynamoHandler, "AmazonSQS": SQSResponse}
_DEFAULT_CONTENT_TYPE = "text/html; charset=utf-8"  # what Flask's Response gives a reply without one


class _ServerRequest(Request):
    """moto's request as its server builds it (`BackendRequest`), without Flask's: moto leaves the
    `Date` header to the server."""

    from_wsgi_server = True


class MotoShortcut:
    """The WSGI layer: DynamoDB's and SQS's signed JSON requests to their handlers, the rest to `app`."""

    def __init__(self, app: WsgiApp) -> None:
        self._app = app

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        handler = HANDLERS.get(environ.get("HTTP_X_AMZ_TARGET", "").partition(".")[0])
        if handler is None or environ.get("PATH_INFO") != "/" or "HTTP_AUTHORIZATION" not in environ:
            return self._app(environ, start_response)
        request = _ServerRequest(environ)
        recorder._record_request(request)
        try:
            result = handler.dispatch(request, request.raw_url, dict(request.headers))
        except ClientError as error:
            result = 400, {}, error.response["Error"]["Message"]
        except Exception:  # as moto's Flask app answers a handler that raised: logged, and a 500
            log.exception("%s failed", environ["HTTP_X_AMZ_TARGET"])
            return InternalServerError()(environ, start_response)
        status, headers, content = result if len(result) == 3 else (200, {}, result)
        body = content.encode() if isinstance(content, str) else bytes(content or b"")
        reply_headers = [(name, str(value)) for name, value in headers.items()]
        if not any(name.lower() == "content-type" for name, _ in reply_headers):
            reply_headers.append(("Content-Type", _DEFAULT_CONTENT_TYPE))
        reply_headers = [(name, value) for name, value in reply_headers if name.lower() != "content-length"]
        reply_headers.append(("Content-Length", str(len(body))))
        if not DISABLE_GLOBAL_CORS:  # what flask_cors adds to every reply of moto's apps
            reply_headers.append(("Access-Control-Allow-Origin", "*"))
        start_response(status_line(int(status)), reply_headers)
        return [body]
