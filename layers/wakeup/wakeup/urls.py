"""An instance's URL: checked and normalised as DESIGN section 2 says."""

from urllib.parse import urlsplit

from wakeup.errors import BadRequestError

_DEFAULT_PORTS = {"http": 80, "https": 443}
MAX_URL_LENGTH = 2048
URL_RULE = "url must be an http or https URL with a host and no user, password, query or fragment"


def normalise_url(value: str) -> str:
    """`value` as stored: scheme and host lower-case, default port dropped, no trailing slash.

    `HTTP://Example.COM:80/Path/` becomes `http://example.com/Path`. Anything else the contract
    refuses raises `BadRequestError`.
    """
    if len(value) > MAX_URL_LENGTH:
        raise BadRequestError(f"url must be at most {MAX_URL_LENGTH} characters")
    if "?" in value or "#" in value or any(c.isspace() or ord(c) < 32 for c in value):
        raise BadRequestError(URL_RULE)
    parts = urlsplit(value)
    scheme = parts.scheme.lower()
    try:
        port = parts.port
    except ValueError:
        raise BadRequestError("url has a port that is not a number from 0 to 65535") from None
    if scheme not in _DEFAULT_PORTS or not parts.hostname or "@" in parts.netloc:
        raise BadRequestError(URL_RULE)
    host = parts.hostname.lower()
    if ":" in host:  # an IPv6 address keeps its brackets
        host = f"[{host}]"
    if port is not None and port != _DEFAULT_PORTS[scheme]:
        host = f"{host}:{port}"
    return f"{scheme}://{host}{parts.path.rstrip('/')}"
