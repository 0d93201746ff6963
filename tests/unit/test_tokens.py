import hashlib

from wakeup.tokens import TokenKind, hash_token, is_token, mint


def test_minted_tokens_carry_their_prefix_and_256_bits() -> None:
    account, instance = mint(TokenKind.ACCOUNT), mint(TokenKind.INSTANCE)
    assert account.startswith("swa_") and len(account) == 4 + 43
    assert instance.startswith("swi_") and len(instance) == 4 + 43
    assert mint(TokenKind.INSTANCE) != instance


def test_a_token_is_recognised_only_as_its_own_kind() -> None:
    instance = mint(TokenKind.INSTANCE)
    assert is_token(instance, TokenKind.INSTANCE)
    assert not is_token(instance, TokenKind.ACCOUNT)


def test_token_body_must_be_32_to_128_url_safe_characters() -> None:
    assert is_token("swi_" + "a" * 32, TokenKind.INSTANCE)
    assert is_token("swi_" + "-_" * 64, TokenKind.INSTANCE)
    assert not is_token("swi_" + "a" * 31, TokenKind.INSTANCE)
    assert not is_token("swi_" + "a" * 129, TokenKind.INSTANCE)
    assert not is_token("swi_" + "a" * 40 + "=", TokenKind.INSTANCE)


def test_tokens_are_hashed_with_sha256() -> None:
    assert hash_token("swa_x") == hashlib.sha256(b"swa_x").hexdigest()
