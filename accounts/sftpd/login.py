"""Who may sign in to SFTP: a registered key, or an API token as the password.

Plain (synchronous) functions: the server calls them in a thread (sync_to_async), as the ORM
must not run on its event loop. Failed sign-ins are counted by django-axes as the web sign-in's
are (per account and per address, ARGUS_LOGIN_FAILURE_LIMIT / ARGUS_LOGIN_COOLOFF_S) and logged;
while either is locked out nothing signs in, key or token.
"""

from __future__ import annotations

import logging

from axes.handlers.proxy import AxesProxyHandler
from django.contrib.auth.models import User
from django.http import HttpRequest

from accounts.auth import TokenRefused, token_owner
from accounts.sshkeys.models import SshKey

logger = logging.getLogger(__name__)


def _request(address: str) -> HttpRequest:
    """What axes reads of a sign-in, for one over SSH: the address, and where it came in."""
    request = HttpRequest()
    request.META = {"REMOTE_ADDR": address, "HTTP_USER_AGENT": "sftp", "PATH_INFO": "sftp"}
    request.path = request.path_info = "sftp"
    return request


def _credentials(username: str) -> dict[str, str]:
    return {"username": username}


def locked_out(username: str, address: str) -> bool:
    if AxesProxyHandler.is_locked(_request(address), _credentials(username)):
        logger.warning("SFTP sign-in refused for %r from %s: too many failed sign-ins", username, address)
        return True
    return False


def _failed(username: str, address: str, why: str) -> None:
    logger.warning("SFTP sign-in failed for %r from %s: %s", username, address, why)
    AxesProxyHandler.user_login_failed(__name__, _credentials(username), _request(address))


def _succeeded(user: User, address: str, how: str) -> None:
    logger.info("SFTP sign-in by %s from %s with %s", user.username, address, how)
    AxesProxyHandler.user_logged_in(__name__, _request(address), user)


def key_known(username: str, fingerprint: str) -> bool:
    """Whether ``username`` has this key and may use it (asked before the client proves it
    holds the private key: nothing is counted here)."""
    return SshKey.usable(username, fingerprint) is not None


def key_signed_in(username: str, fingerprint: str, address: str) -> None:
    """The client proved it holds the key (asyncssh checked the signature): record it."""
    key = SshKey.usable(username, fingerprint)
    if key is not None:
        key.touch()
        _succeeded(key.user, address, f"key {key.name} ({fingerprint})")


def password_login(username: str, password: str, address: str) -> bool:
    """An API token as the password: the API's own check, and the token must be the user's."""
    if locked_out(username, address):
        return False
    try:
        # Pasted from a file or a password manager: whitespace is never part of a token.
        token = token_owner(password.strip())
    except TokenRefused as exc:
        _failed(username, address, str(exc))
        return False
    if token.user.username != username:
        _failed(username, address, "the token is another user's")
        return False
    token.touch()
    _succeeded(token.user, address, f"token {token.prefix}…")
    return True
