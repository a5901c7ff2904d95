from __future__ import annotations

import hashlib
import secrets
from datetime import timedelta

from django.conf import settings
from django.db import models
from django.utils import timezone

TOKEN_PREFIX = "argus_"


def hash_token(raw: str) -> str:
    # Tokens are 256 random bits, so one fast hash is enough; a slow password hash would
    # only make every API call slower without making a token any harder to guess.
    return hashlib.sha256(raw.encode()).hexdigest()


class ApiTokenQuerySet(models.QuerySet["ApiToken"]):
    def active(self) -> ApiTokenQuerySet:
        now = timezone.now()
        return self.filter(revoked_at=None, user__is_active=True).filter(
            models.Q(expires_at=None) | models.Q(expires_at__gt=now)
        )


class ApiToken(models.Model):
    """An API token. Only its SHA-256 is stored; the raw token is shown once, at creation."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=100)
    prefix = models.CharField(max_length=16, help_text="The token's first characters, to recognise it.")
    token_hash = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(default=timezone.now)
    last_used_at = models.DateTimeField(null=True, blank=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    objects = ApiTokenQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.user} / {self.name} ({self.prefix}…)"

    @classmethod
    def issue(
        cls, user: models.Model, name: str = "default", expires_at: timezone.datetime | None = None
    ) -> tuple[ApiToken, str]:
        """Create a token for ``user``; returns it with the raw token, which is not stored."""
        raw = TOKEN_PREFIX + secrets.token_urlsafe(32)
        token = cls.objects.create(
            user=user,
            name=name or "default",
            prefix=raw[: len(TOKEN_PREFIX) + 6],
            token_hash=hash_token(raw),
            expires_at=expires_at,
        )
        return token, raw

    @property
    def is_active(self) -> bool:
        if self.revoked_at is not None or not self.user.is_active:
            return False
        return self.expires_at is None or self.expires_at > timezone.now()

    def revoke(self) -> None:
        if self.revoked_at is None:
            self.revoked_at = timezone.now()
            self.save(update_fields=["revoked_at"])

    def touch(self) -> None:
        """Record a use, writing at most once per ARGUS_TOKEN_TOUCH_S."""
        now = timezone.now()
        stale_before = now - timedelta(seconds=settings.ARGUS_TOKEN_TOUCH_S)
        if self.last_used_at is None or self.last_used_at < stale_before:
            # A conditional update: concurrent requests do not each write.
            ApiToken.objects.filter(pk=self.pk).filter(
                models.Q(last_used_at=None) | models.Q(last_used_at__lt=stale_before)
            ).update(last_used_at=now)
            self.last_used_at = now
