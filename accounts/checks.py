"""System checks of the accounts app: the secrets key, and settings set under an old name (run by
migrate, qcluster, runserver…)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.apps import AppConfig
from django.conf import settings
from django.core.checks import CheckMessage, Error, Warning, register
from django.db import DatabaseError

from accounts.secrets import SecretsUnavailable, fernet
from common.renamed_settings import RENAMED


@register()
def secrets_key(app_configs: Sequence[AppConfig] | None = None, **kwargs: Any) -> list[CheckMessage]:
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


@register()
def settings_renamed(app_configs: Sequence[AppConfig] | None = None, **kwargs: Any) -> list[CheckMessage]:
    """A duration set under its old name still works (converted to seconds); the warning names the
    name to use before the old one is no longer read."""
    return [
        Warning(
            f"{old} is an old name: it was read as {RENAMED[old][0]}, in seconds.",
            hint=f"Set {RENAMED[old][0]} instead (docs/configuration.md, 'Renamed settings').",
            id="accounts.W001",
        )
        for old in settings.ARGUS_RENAMED_SETTINGS_READ
    ]
