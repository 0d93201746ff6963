"""Account and instance tokens: minting, recognising and hashing. Only hashes are ever stored."""

import hashlib
import re
import secrets
from enum import StrEnum


class TokenKind(StrEnum):
    ACCOUNT = "account"
    INSTANCE = "instance"


PREFIXES = {TokenKind.ACCOUNT: "swa_", TokenKind.INSTANCE: "swi_"}

# 32 bytes of randomness is 43 url-safe base64 characters; longer tokens minted elsewhere are fine.
_BODY = r"[A-Za-z0-9_-]{32,128}"
_PATTERNS = {kind: re.compile(f"{prefix}{_BODY}") for kind, prefix in PREFIXES.items()}


def mint(kind: TokenKind) -> str:
    """A new token of `kind`: its prefix and 256 bits of randomness."""
    return PREFIXES[kind] + secrets.token_urlsafe(32)


def is_token(value: str, kind: TokenKind) -> bool:
    """Whether `value` has the form of a token of `kind`."""
    return _PATTERNS[kind].fullmatch(value) is not None


def hash_token(token: str) -> str:
    """The SHA-256 hex digest the table keys a token by."""
    return hashlib.sha256(token.encode()).hexdigest()
