"""An instance's URL: checked and normalised as DESIGN section 2 says, by one parser.

A URL is `scheme://host[:port][/path]`: `http` or `https`; a host name, an IPv4 address or a
bracketed IPv6 address; no user or password, query or fragment. It is stored in one normal form,
so that two spellings of one URL never count as a move:

- scheme and host lower-case, the scheme's default port dropped, trailing slashes removed;
- a host name in its ASCII (IDNA, UTS 46) form: `ÉXAMPLE.com` and `xn--xample-9ua.com` are both
  `xn--xample-9ua.com`; an IP address in its shortest form;
- the path's non-ASCII characters percent-encoded (UTF-8), percent escapes in upper case.

The client library (`client/wakeup_client/formats.py`) keeps the same rules for its fake; the
tests run both over the same cases (`tests/support/input_cases.py`).

Nothing here ever puts the URL itself in a message or a log: it may carry a password.
"""

import ipaddress
import re
import unicodedata
from urllib.parse import quote

import idna

from wakeup.errors import BadRequestError

MAX_URL_LENGTH = 2048
MAX_HOST_LENGTH = 253
_DEFAULT_PORTS = {"http": 80, "https": 443}
URL_RULE = "url must be an http or https URL with a host and no user, password, query or fragment"

_URL = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*)://(?P<authority>[^/]*)(?P<path>/.*)?", re.DOTALL)
_BRACKETED = re.compile(r"\[(?P<address>[0-9A-Fa-f:.]+)\](?::(?P<port>.*))?", re.DOTALL)
_PORT = re.compile(r"[0-9]{1,5}")
# A host name's label in ASCII: 1 to 63 letters, digits, hyphens (not first nor last) or
# underscores (which DNS allows and container networks use).
_LABEL = re.compile(r"(?!-)[a-z0-9_-]{1,63}(?<!-)")
_NUMERIC = re.compile(r"[0-9]+|0x[0-9a-f]*")
_ESCAPE = re.compile(r"%([0-9A-Fa-f]{2})")
# Control, format (soft hyphen, zero-width space, bidi marks ...), surrogate, private-use and
# unassigned characters, and every kind of space: none belongs anywhere in a URL.
_INVISIBLE = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zs", "Zl", "Zp"})
# What stays as it is in a path: printable ASCII (the rest is percent-encoded).
_PATH_SAFE = "".join(chr(c) for c in range(0x21, 0x7F) if chr(c) != "%")


def normalise_url(value: str) -> str:
    """`value` as stored; `HTTP://Example.COM:80/Path/` becomes `http://example.com/Path`.

    Anything the contract refuses raises `BadRequestError` with a sentence that says what to fix.
    """
    if len(value) > MAX_URL_LENGTH:
        raise BadRequestError(f"url must be at most {MAX_URL_LENGTH} characters")
    if any(unicodedata.category(c) in _INVISIBLE for c in value):
        raise BadRequestError("url must not contain spaces, control characters or invisible characters")
    if "?" in value or "#" in value:
        raise BadRequestError("url must have no query and no fragment: leave out ? and #")
    match = _URL.fullmatch(value)
    if match is None:
        raise BadRequestError(URL_RULE)
    scheme = match["scheme"].lower()
    if scheme not in _DEFAULT_PORTS:
        raise BadRequestError("url must start with http:// or https://")
    authority = match["authority"]
    if "@" in authority:
        raise BadRequestError("url must not carry a user or password: leave out the part before @")
    host, port = _host_and_port(authority)
    netloc = host if port in (None, _DEFAULT_PORTS[scheme]) else f"{host}:{port}"
    return f"{scheme}://{netloc}{_path(match['path'] or '')}"


def _host_and_port(authority: str) -> tuple[str, int | None]:
    if authority.startswith("["):
        bracketed = _BRACKETED.fullmatch(authority)
        try:
            address = ipaddress.IPv6Address(bracketed["address"]) if bracketed else None
        except ValueError:
            address = None
        if bracketed is None or address is None:
            raise BadRequestError("url has an IPv6 host that is not [address] or [address]:port, such as [2001:db8::1]")
        return f"[{address.compressed}]", _port(bracketed["port"])
    name, colon, port = authority.partition(":")
    return _host_name(name), _port(port if colon else None)


def _port(text: str | None) -> int | None:
    if not text:  # none, or an empty one (`host:`), is the scheme's default
        return None
    if not _PORT.fullmatch(text) or not 1 <= int(text) <= 65535:
        raise BadRequestError("url has a port that is not a number from 1 to 65535")
    return int(text)


def _host_name(name: str) -> str:
    """A host name or IPv4 address in its one ASCII form."""
    if not name:
        raise BadRequestError("url must have a host: http://host or https://host")
    ascii_name = name.lower()
    if not name.isascii() or "xn--" in ascii_name:
        try:
            # UTS 46 as browsers apply it: case folded, full-width forms mapped, then the A-label.
            # (A label already in its xn-- form is checked to decode, and to be in its own form.)
            ascii_name = idna.encode(name, uts46=True).decode("ascii")
        except (idna.IDNAError, UnicodeError):
            raise BadRequestError("url has a host name that is not a valid internationalised domain name") from None
    labels = ascii_name.removesuffix(".").split(".")
    if _NUMERIC.fullmatch(labels[-1]):
        # A resolver reads a numeric last label as an IPv4 address (127.1 is 127.0.0.1): only the
        # usual dotted form of one is taken.
        try:
            return str(ipaddress.IPv4Address(ascii_name))
        except ValueError:
            raise BadRequestError("url has a numeric host that is not an IPv4 address like 192.0.2.1") from None
    if len(ascii_name.removesuffix(".")) > MAX_HOST_LENGTH or not all(_LABEL.fullmatch(label) for label in labels):
        raise BadRequestError(
            "url has a host name that is not valid: labels of 1 to 63 letters, digits or hyphens,"
            " none starting or ending with a hyphen, at most 253 characters in all"
        )
    return ascii_name


def _path(path: str) -> str:
    if "%" in _ESCAPE.sub("", path):
        raise BadRequestError("url has a % that does not start a percent escape such as %20")
    encoded = quote(path, safe=_PATH_SAFE + "%")
    return _ESCAPE.sub(lambda escape: escape[0].upper(), encoded).rstrip("/")
