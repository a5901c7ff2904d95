from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from django.conf import settings
from django.db import IntegrityError, models, transaction
from django.utils import timezone

from accounts.sshkeys.keys import BadKey, parse

if TYPE_CHECKING:
    from django.contrib.auth.models import User

logger = logging.getLogger(__name__)


class SshKey(models.Model):
    """An SSH public key a user signs in to SFTP with. Deleting it ends its use at once: the
    SFTP server looks keys up at every sign-in."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, models.CASCADE, related_name="ssh_keys")
    name = models.CharField(max_length=100)
    public_key = models.TextField(help_text='"type base64", as in an authorized_keys line, without the comment.')
    fingerprint = models.CharField(max_length=100, help_text="SHA256:…, as `ssh-keygen -l` prints it.")
    created_at = models.DateTimeField(default=timezone.now)
    last_used_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["name"]
        verbose_name = "SSH key"
        constraints = [
            models.UniqueConstraint(fields=["user", "name"], name="sshkey_unique_name"),
            models.UniqueConstraint(fields=["user", "fingerprint"], name="sshkey_unique_fingerprint"),
        ]

    def __str__(self) -> str:
        return f"{self.user} / {self.name} ({self.fingerprint})"

    @classmethod
    def register(cls, user: User, name: str, public_key: str) -> SshKey:
        """Add ``public_key`` (OpenSSH text) under ``name``; KeyRefused names the field at fault."""
        try:
            key = parse(public_key)
        except BadKey as exc:
            raise KeyRefused("public_key", str(exc)) from None
        mine = cls.objects.filter(user=user)
        if mine.filter(fingerprint=key.fingerprint).exists():
            raise KeyRefused("public_key", f"You already have this key ({key.fingerprint}).")
        if mine.filter(name=name).exists():
            raise KeyRefused("name", f"You already have a key named {name!r}.")
        try:
            with transaction.atomic():
                ssh_key = cls.objects.create(user=user, name=name, public_key=key.openssh, fingerprint=key.fingerprint)
        except IntegrityError:  # the same key or name added at the same moment
            raise KeyRefused("public_key", "You already have this key, or a key with this name.") from None
        logger.info("Added SSH key %s (%s) for %s", ssh_key.fingerprint, ssh_key.name, user)
        return ssh_key

    @classmethod
    def usable(cls, username: str, fingerprint: str) -> SshKey | None:
        """The key ``username`` may sign in with, if it is theirs and they are not disabled."""
        return (
            cls.objects.select_related("user")
            .filter(user__username=username, user__is_active=True, fingerprint=fingerprint)
            .first()
        )

    def touch(self) -> None:
        SshKey.objects.filter(pk=self.pk).update(last_used_at=timezone.now())


class KeyRefused(Exception):
    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message
