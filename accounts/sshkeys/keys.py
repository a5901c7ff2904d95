"""OpenSSH public keys, read by asyncssh (never by parsing of our own)."""

from __future__ import annotations

from dataclasses import dataclass

import asyncssh

# One line of an authorized_keys file is at most this long in practice (an RSA-16384 key is
# about 2.8 kB); far longer is not a key.
MAX_KEY_CHARS = 16 * 1024


class BadKey(ValueError):
    """Not an OpenSSH public key; the message says what is wrong."""


@dataclass(frozen=True)
class PublicKey:
    openssh: str  # "ssh-ed25519 AAAA…", without the comment
    algorithm: str
    fingerprint: str  # "SHA256:…", as `ssh-keygen -l` prints it
    comment: str


def parse(text: str) -> PublicKey:
    """The one public key ``text`` holds, in OpenSSH's one-line or RFC 4716 format."""
    text = text.strip()
    if not text:
        raise BadKey("Paste an OpenSSH public key (the one line of ~/.ssh/id_ed25519.pub, say).")
    if len(text) > MAX_KEY_CHARS:
        raise BadKey(f"A public key is under {MAX_KEY_CHARS} characters: this is not one.")
    if "PRIVATE KEY" in text:
        raise BadKey("This is a private key: paste the public one (the .pub file), and keep this one secret.")
    try:
        key = asyncssh.import_public_key(text)
    except (asyncssh.KeyImportError, ValueError, UnicodeError) as exc:
        raise BadKey(f"Not an OpenSSH public key: {exc}.") from None
    # The exported line is "type base64 comment": the comment is the user's, kept apart.
    openssh = " ".join(key.export_public_key("openssh").decode().split()[:2])
    return PublicKey(openssh, key.get_algorithm(), key.get_fingerprint("sha256"), key.get_comment() or "")
