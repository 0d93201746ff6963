"""DynamoDB's, SQS's and EventBridge Scheduler's requests straight to moto's handlers, past the
Flask app moto's server puts in front of each service.

moto's server finds a request's service under a lock that every request shares
(`DomainDispatcherApplication`), then runs it through a Flask app (request context, URL routing,
response object). The handlers call two of these services on every wake and registration, so that
work is paid on nearly every request (docs/benchmark.md, "The local stack"). Both speak a JSON
protocol: the operation is in `X-Amz-Target` and every request goes to `/`, so the handler class
is known from the target alone. The handler is called as moto's Flask view calls it
(`moto.core.utils.convert_to_flask_response`): same request type, URL and headers, same reply;
every other request goes through moto's server as before. The request's URL, which moto's handler
reads its parts from, is written directly where it is one werkzeug has nothing to convert in
(`raw_url`): werkzeug's building of it was a share of each request's CPU.

EventBridge Scheduler's is a REST API, which every far wake's registration calls: a request is
its handler's when it is signed for the service and its path is one of those moto's Scheduler app
routes to it (`moto.scheduler.urls`, read from moto), which the handler then dispatches as moto's
app would.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable
from typing import Any

from botocore.exceptions import ClientError
from moto.core.request import Request
from moto.dynamodb.responses import DynamoHandler
from moto.moto_api import recorder
from moto.scheduler import urls as scheduler_urls
from moto.scheduler.responses import EventBridgeSchedulerResponse
from moto.settings import DISABLE_GLOBAL_CORS
from moto.sqs.responses import SQSResponse
from werkzeug.exceptions import InternalServerError

from wakeup_local.aws.loopback_wsgi import StartResponse, WsgiApp, status_line

log = logging.getLogger(__name__)

# The target's prefix (the service's JSON API and version) → moto's handler of it.
HANDLERS: dict[str, Any] = {"DynamoDB_20120810": DynamoHandler, "AmazonSQS": SQSResponse}
# A REST service's name in the request's signature → moto's handler of it and the paths moto's app
# routes to it.
_SIGNED_FOR = re.compile(r"Credential=[^/]+/[^/]+/[^/]+/([^/]+)/aws4_request")
REST_HANDLERS: dict[str, tuple[Any, list[re.Pattern[str]]]] = {
    "scheduler": (EventBridgeSchedulerResponse, [re.compile(path.format("")) for path in scheduler_urls.url_paths]),
}
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
        handler = _handler_of(environ)
        if handler is None:
            return self._app(environ, start_response)
        request = _ServerRequest(environ)
        recorder._record_request(request)
        try:
            result = handler.dispatch(request, raw_url(request), dict(request.headers))
        except ClientError as error:
            result = 400, {}, error.response["Error"]["Message"]
        except Exception:  # as moto's Flask app answers a handler that raised: logged, and a 500
            log.exception("%s failed", environ.get("HTTP_X_AMZ_TARGET") or f"{request.method} {request.path}")
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


# A host on loopback as the handlers' clients name it: an IPv4 address or `localhost`, and a port
# other than HTTP's own (which werkzeug leaves out of the URL).
_PLAIN_HOST = re.compile(r"(?:\d{1,3}(?:\.\d{1,3}){3}|localhost):(?!80$)\d{1,5}")


def raw_url(request: Request) -> str:
    """moto's `request.raw_url`: for a JSON request to `/` with no query on a plain host, read
    directly (`http://` and its `Host`, then `/`: what werkzeug's URL root and moto's raw path make
    of it, with no character to decode or encode); any other, moto's own."""
    environ = request.environ
    host = environ.get("HTTP_HOST", "")
    if (
        environ.get("RAW_URI") == "/"
        and not environ.get("QUERY_STRING")
        and not environ.get("SCRIPT_NAME")
        and environ.get("wsgi.url_scheme") == "http"
        and _PLAIN_HOST.fullmatch(host)
    ):
        return f"http://{host}/"
    return str(request.raw_url)


def _handler_of(environ: dict[str, Any]) -> Any:
    """moto's handler of a signed request to one of the services above, None for any other."""
    authorization = environ.get("HTTP_AUTHORIZATION")
    if authorization is None:
        return None
    target = environ.get("HTTP_X_AMZ_TARGET")
    if target:
        return HANDLERS.get(target.partition(".")[0]) if environ.get("PATH_INFO") == "/" else None
    signed = _SIGNED_FOR.search(authorization)
    rest = REST_HANDLERS.get(signed.group(1)) if signed else None
    if rest is None:
        return None
    handler, paths = rest
    path = environ.get("PATH_INFO", "")
    return handler if any(pattern.match(path) for pattern in paths) else None
