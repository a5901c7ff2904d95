"""System checks of the accounts app: the secrets key (run by migrate, qcluster, runserver…)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.checks import CheckMessage, Error, register
from django.db import DatabaseError

from accounts.secrets import SecretsUnavailable, fernet


@register()
def secrets_key(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """A key that is not a Fernet key is an error; so is a production start (ARGUS_DEBUG off)
    without a key while users have secrets stored: their tasks could not start, and nobody could
    tell why before the first one failed."""
    if settings.ARGUS_SECRETS_KEY:
        try:
            fernet()
        except SecretsUnavailable as error:
            return [Error(str(error), id="accounts.E001")]
        return []
    if settings.DEBUG:
        return []  # a development key derived from ARGUS_SECRET_KEY (accounts.secrets)
    from accounts.models import Secret

    try:
        stored = Secret.objects.count()
    except DatabaseError:
        return []  # not migrated yet: nothing stored
    if not stored:
        return []
    return [
        Error(
            f"ARGUS_SECRETS_KEY is not set, and {stored} secret{'s are' if stored > 1 else ' is'} stored: "
            "tasks that use them cannot start.",
            hint="Set ARGUS_SECRETS_KEY to the key they were stored with (docs/secrets.md, 'Rotating the key').",
            id="accounts.E002",
        )
    ]
