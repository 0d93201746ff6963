"""`wakeup.urls`: the one parser of an instance's URL (the client's copy runs the same cases in
tests/client/test_client_formats.py)."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from support.input_cases import SAME_URLS, URLS_REFUSED, URLS_STORED
from wakeup.errors import BadRequestError
from wakeup.urls import normalise_url


@pytest.mark.parametrize(("given_url", "stored"), URLS_STORED.items())
def test_url_is_stored_normalised(given_url: str, stored: str) -> None:
    assert normalise_url(given_url) == stored


@pytest.mark.parametrize("refused", URLS_REFUSED, ids=URLS_REFUSED.values())
def test_url_breaking_a_rule_is_refused(refused: str) -> None:
    with pytest.raises(BadRequestError) as refusal:
        normalise_url(refused)

    assert refusal.value.message.startswith("url ")


@pytest.mark.parametrize(("one", "other"), SAME_URLS)
def test_two_spellings_of_one_url_are_stored_alike(one: str, other: str) -> None:
    assert normalise_url(one) == normalise_url(other)


def test_a_refusal_never_repeats_the_password() -> None:
    for url in ("http://user:s3cret-pass@[::1", "http://user:s3cret-pass＠ex＃ample.com", "http://u:s3cret-pass@h"):
        with pytest.raises(BadRequestError) as refusal:
            normalise_url(url)
        assert "s3cret" not in str(refusal.value)


# Text a URL is made of, weighted toward the characters that decide how it parses.
_URL_TEXT = st.text(
    st.sampled_from("hHtTpPsS:/[]@.-_%?#09afAF:é\u00ad\u200b\x7f＃：／＠ＥｘＸ。．") | st.characters(), max_size=40
)
_URLS = st.one_of(_URL_TEXT, st.builds("http://{}".format, _URL_TEXT), st.builds("https://{}".format, _URL_TEXT))


@given(_URLS)
def test_any_text_is_stored_or_refused_with_a_400_never_an_exception(url: str) -> None:
    try:
        normalise_url(url)
    except BadRequestError as refusal:
        assert refusal.status == 400 and refusal.message.startswith("url ")


@given(_URLS)
def test_a_stored_url_is_printable_ascii_and_its_own_normal_form(url: str) -> None:
    try:
        stored = normalise_url(url)
    except BadRequestError:
        return
    assert stored.isascii() and stored.isprintable() and " " not in stored
    assert stored.startswith(("http://", "https://"))
    assert normalise_url(stored) == stored
