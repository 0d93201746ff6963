import pytest

from wakeup.errors import BadRequestError
from wakeup.urls import normalise_url


@pytest.mark.parametrize(
    ("given", "stored"),
    [
        ("HTTP://Example.COM:80/Path/", "http://example.com/Path"),
        ("https://example.com:443", "https://example.com"),
        ("https://example.com:8443/a//", "https://example.com:8443/a"),
        ("http://127.0.0.1:3000/", "http://127.0.0.1:3000"),
        ("http://[::1]:8080/x", "http://[::1]:8080/x"),
        ("http://example.com:443", "http://example.com:443"),
    ],
)
def test_url_is_stored_normalised(given: str, stored: str) -> None:
    assert normalise_url(given) == stored


@pytest.mark.parametrize(
    "refused",
    [
        "ftp://example.com",
        "example.com",
        "http://",
        "http://user:pw@example.com",
        "http://user@example.com",
        "http://example.com/?",
        "http://example.com/a?b=1",
        "http://example.com/#frag",
        "http://example.com:99999",
        "http://example.com:port",
        "http://exa mple.com",
        "http://example.com/\n",
        "http://" + "a" * 3000 + ".com",
    ],
)
def test_url_breaking_a_rule_is_refused(refused: str) -> None:
    with pytest.raises(BadRequestError):
        normalise_url(refused)
