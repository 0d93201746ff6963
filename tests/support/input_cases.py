"""The field rules of DESIGN section 2 (and issue 11's table of bad input) as cases, shared by the
tests of the service's parsers (`wakeup.urls`, `wakeup.times`), the client's (`wakeup_client.formats`)
and the HTTP tests of the fake and the local stack, so the two implementations cannot drift apart."""

from __future__ import annotations

from datetime import UTC, datetime

# A URL as given, and as stored.
URLS_STORED = {
    "HTTP://Example.COM:80/Path/": "http://example.com/Path",
    "https://example.com:443": "https://example.com",
    "https://example.com:8443/a//": "https://example.com:8443/a",
    "http://127.0.0.1:3000/": "http://127.0.0.1:3000",
    "http://[::1]:8080/x": "http://[::1]:8080/x",
    "http://[0:0::1]/x": "http://[::1]/x",
    "http://example.com:443": "http://example.com:443",
    "http://example.com:": "http://example.com",
    "http://my_host:8000": "http://my_host:8000",
    "http://example.com./": "http://example.com.",
    # IDNA: one normal form, the ASCII one, whatever the spelling.
    "http://ÉXAMPLE.com": "http://xn--xample-9ua.com",
    "http://éxample.com": "http://xn--xample-9ua.com",
    "http://xn--xample-9ua.com": "http://xn--xample-9ua.com",
    "http://XN--XAMPLE-9UA.COM": "http://xn--xample-9ua.com",
    "http://Ｅｘａｍｐｌｅ．com": "http://example.com",
    "http://１２７.０.０.１": "http://127.0.0.1",
    # The path: non-ASCII percent-encoded, escapes in upper case.
    "http://example.com/é": "http://example.com/%C3%A9",
    "http://example.com/%c3%a9/": "http://example.com/%C3%A9",
    "http://example.com/a%20b": "http://example.com/a%20b",
    "http://" + "a" * 63 + ".com": "http://" + "a" * 63 + ".com",
    "http://example.com:65535": "http://example.com:65535",
    "http://example.com:1": "http://example.com:1",
}

# URLs refused, with what each one breaks.
URLS_REFUSED = {
    "ftp://example.com": "not http",
    "example.com": "no scheme",
    "http://": "no host",
    "http:///path": "no host",
    "not a url": "not a URL",
    "http://user:pw@example.com": "a password",
    "http://user@example.com": "a user",
    "http://@example.com": "an empty user",
    "http://example.com/?": "a query",
    "http://example.com/a?b=1": "a query",
    "http://example.com/#frag": "a fragment",
    "http://example.com:99999": "a port too large",
    "http://example.com:0": "port 0",
    "http://example.com:port": "a port not a number",
    "http://example.com:８０": "a port in full-width digits",
    "http://exa mple.com": "a space",
    "http://example.com/\n": "a newline",
    "http://a\x7f.com": "DEL",
    "http://ex\u00adample.com": "a soft hyphen",
    "http://ex\u200bample.com": "a zero-width space",
    "http://ex\u202eample.com": "a bidi override",
    "http://ex\ud800ample.com": "a lone surrogate",
    "http://" + "a" * 64 + ".com": "a label over 63 characters",
    "http://" + "a." * 127 + "com": "a host over 253 characters",
    "http://-a.com": "a label starting with a hyphen",
    "http://a-.com": "a label ending with a hyphen",
    "http://a..com": "an empty label",
    "http://[::1": "an unclosed IPv6 bracket",
    "http://[]": "an empty IPv6 literal",
    "http://[zz]": "an IPv6 literal that is not an address",
    "http://[::1]x": "text after the IPv6 literal",
    "http://[v1.fe]/x": "an IPvFuture literal",
    "http://[fe80::1%25eth0]/": "an IPv6 zone",
    "http://ex＃ample.com": "a full-width #",
    "http://ex：ample.com": "a full-width :",
    "http://a／b.com": "a full-width /",
    "http://a＠b.com": "a full-width @",
    "http://user:pass＠example.com": "a password before a full-width @",
    "http://xn--zz.com": "an A-label that does not decode",
    "http://127.1": "a numeric host that is not a dotted quad",
    "http://256.0.0.1": "an IPv4 address out of range",
    "http://0x7f.0.0.1": "a hexadecimal IPv4 address",
    "http://example.com/%zz": "a % that starts no escape",
    "http://" + "a" * 3000 + ".com": "a URL over 2048 characters",
}

# The same URL spelled two ways: one instance, no move.
SAME_URLS = [("http://ÉXAMPLE.com", "http://xn--xample-9ua.com"), ("http://[::1]/", "http://[0::1]")]

# A wake time as given, and the instant it names (None: taken as now, since it is long past).
TIMES_READ: dict[str, datetime | None] = {
    "2026-12-01T09:30:00Z": datetime(2026, 12, 1, 9, 30, tzinfo=UTC),
    "2026-12-01T10:30:00.250+01:00": datetime(2026, 12, 1, 9, 30, 0, 250_000, tzinfo=UTC),
    "2026-12-01T09:30Z": datetime(2026, 12, 1, 9, 30, tzinfo=UTC),
    "2026-12-01T04:00:00-05:30": datetime(2026, 12, 1, 9, 30, tzinfo=UTC),
    "2026-12-01t09:30:00z": datetime(2026, 12, 1, 9, 30, tzinfo=UTC),
    "2028-02-29T00:00:00Z": datetime(2028, 2, 29, tzinfo=UTC),
    # Fractions of any length, truncated to the millisecond.
    "2026-12-01T09:30:00.2501Z": datetime(2026, 12, 1, 9, 30, 0, 250_000, tzinfo=UTC),
    "2026-12-01T09:30:00.1234567890Z": datetime(2026, 12, 1, 9, 30, 0, 123_000, tzinfo=UTC),
    "2026-12-01T09:30:59.9999Z": datetime(2026, 12, 1, 9, 30, 59, 999_000, tzinfo=UTC),
    "2026-12-01T09:30:00." + "9" * 200 + "Z": datetime(2026, 12, 1, 9, 30, 0, 999_000, tzinfo=UTC),
    # A leap second is the next second.
    "2026-12-31T23:59:60Z": datetime(2027, 1, 1, tzinfo=UTC),
    "2026-12-31T23:59:60.5Z": datetime(2027, 1, 1, 0, 0, 0, 500_000, tzinfo=UTC),
    "2027-01-01T00:59:60+01:00": datetime(2027, 1, 1, tzinfo=UTC),
    # Long past: now.
    "0001-01-01T00:00:00+01:00": None,
    "0001-01-01T00:30:00+00:59": None,
    "0000-01-01T00:00:00Z": None,
    "0001-01-01T00:00:00Z": datetime(1, 1, 1, tzinfo=UTC),
}

# Wake times refused.
TIMES_REFUSED = [
    "2026-12-01",
    "2026-12-01T09:30:00",
    "2026-02-30T09:30:00Z",
    "2026-12-01T25:00:00Z",
    "2026-12-01T09:61:00Z",
    "2026-12-01T09:30:61Z",
    "2026-12-01 09:30:00Z",
    "tomorrow",
    "",
    "2026-12-01T09:30:00+0100",
    "2026-12-01T09:30:00+01:60",
    "2026-12-01T09:30:00+01:99",
    "2026-12-01T09:30:00+24:00",
    "2026-12-01T09:30:00.Z",
    "２０２６-12-01T09:30:00Z",  # noqa: RUF001 - full-width digits
    "9999-12-31T23:59:59-01:00",
    "9999-12-31T23:59:60Z",
]
