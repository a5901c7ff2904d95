"""The server's host key: made once, kept, the same at every start (clients pin it)."""

from __future__ import annotations

import logging
import os
import tempfile
from pathlib import Path

import asyncssh

logger = logging.getLogger(__name__)


def host_key(path: Path) -> asyncssh.SSHKey:
    """The key at ``path``, made there (Ed25519, mode 600) when there is none yet, and made
    private (600) when it is there with a mode that lets others read it."""
    if not path.exists():
        key = asyncssh.generate_private_key("ssh-ed25519")
        path.parent.mkdir(parents=True, exist_ok=True)
        # Written whole under a temporary name (mkstemp: mode 600), then linked into place: of
        # two servers starting at once, one key wins and both read it, never a half-written one.
        fd, temp = tempfile.mkstemp(prefix=".sftp-host-key-", dir=path.parent)
        try:
            with os.fdopen(fd, "wb") as out:
                out.write(key.export_private_key())
            os.link(temp, path)
            logger.info("Made the SFTP host key %s (%s)", path, key.get_fingerprint("sha256"))
        except FileExistsError:
            pass
        finally:
            os.unlink(temp)
    elif path.stat().st_mode & 0o077:
        # A key others can read is a key others can serve as this server: made private again.
        logger.warning("The SFTP host key %s could be read by others: its mode is now 600", path)
        path.chmod(0o600)
    return asyncssh.read_private_key(path)
