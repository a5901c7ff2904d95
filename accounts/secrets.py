"""Per-user secrets: what a name and a value may be, and their encryption at rest.

Values are encrypted with Fernet (AES-128-CBC with an HMAC-SHA256, from ``cryptography``) under the
keys of ARGUS_SECRETS_KEY, comma-separated: MultiFernet encrypts with the first and decrypts with
any, so a new key is put first, ``manage.py argus_secrets rotate`` re-encrypts every value with it,
and the old key can then be dropped (docs/secrets.md, "Rotating the key").
"""

from __future__ import annotations

import base64
import hashlib
import re
from functools import cache

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

NAME_PATTERN = r"[A-Z_][A-Z0-9_]*"
NAME_MAX = 64
NAME_RE = re.compile(rf"^{NAME_PATTERN}$")
NAME_HELP = (
    f"An environment variable's name: capital letters, digits and '_', not starting with a digit; at most {NAME_MAX}."
)
VALUE_MAX_BYTES = 8 * 1024
VALUE_HELP = (
    f"At most {VALUE_MAX_BYTES} bytes of printable characters (no line breaks, tabs or control characters). "
    "It is written, never shown again."
)


class SecretsUnavailable(ImproperlyConfigured):
    """No key to encrypt or decrypt with (ARGUS_SECRETS_KEY unset in production), or a bad one."""


class Undecryptable(Exception):
    """A stored value that none of ARGUS_SECRETS_KEY's keys decrypts (its key was dropped)."""


def name_error(name: object) -> str | None:
    """Why ``name`` is no secret name; None when it is one."""
    if not isinstance(name, str) or not NAME_RE.match(name) or len(name) > NAME_MAX:
        return f"{str(name)[:80]!r} is not a secret name. {NAME_HELP}"
    return None


def value_error(value: object) -> str | None:
    """Why ``value`` cannot be a secret's value; None when it can."""
    if not isinstance(value, str) or not value:
        return "The value must be a non-empty string."
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError:
        return "The value is not valid Unicode."
    if size > VALUE_MAX_BYTES:
        return f"The value is {size} bytes; at most {VALUE_MAX_BYTES} are allowed."
    if not value.isprintable():
        # A line break in a value would let it span two log lines, where redaction (which works
        # line by line) cannot see it whole.
        return "The value must be printable: no line breaks, tabs or control characters."
    return None


def development_key(secret_key: str) -> str:
    """The key a development setup (ARGUS_DEBUG on, no ARGUS_SECRETS_KEY) uses: derived from
    ARGUS_SECRET_KEY, so that it is stable across restarts; never used in production."""
    return base64.urlsafe_b64encode(hashlib.sha256(b"argus-secrets:" + secret_key.encode()).digest()).decode()


def configured_keys() -> list[str]:
    """ARGUS_SECRETS_KEY's keys, first the one that encrypts; a development setup without any
    gets one derived from ARGUS_SECRET_KEY. Raises SecretsUnavailable in production without one."""
    keys = list(settings.ARGUS_SECRETS_KEY)
    if keys:
        return keys
    if settings.DEBUG:
        return [development_key(settings.SECRET_KEY)]
    raise SecretsUnavailable(
        "ARGUS_SECRETS_KEY is not set: secrets cannot be stored or read. Set it to a Fernet key "
        "(python3 -c 'from cryptography.fernet import Fernet; print(Fernet.generate_key().decode())')."
    )


@cache
def _fernet(keys: tuple[str, ...]) -> MultiFernet:
    try:
        return MultiFernet([Fernet(key.encode()) for key in keys])
    except (ValueError, TypeError) as error:
        raise SecretsUnavailable(
            f"ARGUS_SECRETS_KEY holds a key that is not a Fernet key (32 url-safe base64-encoded bytes): {error}"
        ) from None


def fernet() -> MultiFernet:
    return _fernet(tuple(configured_keys()))


def encrypt(value: str) -> str:
    return fernet().encrypt(value.encode("utf-8")).decode("ascii")


def decrypt(token: str) -> str:
    try:
        return fernet().decrypt(token.encode("ascii")).decode("utf-8")
    except InvalidToken:
        raise Undecryptable("no key of ARGUS_SECRETS_KEY decrypts it") from None


def rotate(token: str) -> str:
    """``token`` encrypted again with the first key (raises Undecryptable as decrypt does)."""
    try:
        return fernet().rotate(token.encode("ascii")).decode("ascii")
    except InvalidToken:
        raise Undecryptable("no key of ARGUS_SECRETS_KEY decrypts it") from None
