from __future__ import annotations

import hashlib
import logging
import secrets
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from django.conf import settings
from django.core.validators import MaxValueValidator
from django.db import IntegrityError, models, transaction
from django.utils import timezone

from accounts import secrets as secrets_crypto
from accounts.bounds import LIMIT_MAX, disk_quota_field, validate_weight

if TYPE_CHECKING:
    from django.contrib.auth.models import User

logger = logging.getLogger(__name__)

TOKEN_PREFIX = "argus_"
# "argus_" and 6 random characters: enough to tell a user's tokens apart, far too little to
# guess the rest from.
PREFIX_LENGTH = len(TOKEN_PREFIX) + 6


def hash_token(raw: str) -> str:
    # Tokens are 256 random bits, so one fast hash is enough; a slow password hash would
    # only make every API call slower without making a token any harder to guess.
    return hashlib.sha256(raw.encode()).hexdigest()


class TokenState(models.TextChoices):
    ACTIVE = "active"
    REVOKED = "revoked"
    EXPIRED = "expired"


class ApiTokenQuerySet(models.QuerySet["ApiToken"]):
    def in_state(self, state: TokenState) -> ApiTokenQuerySet:
        """The tokens whose own state (see ApiToken.state) is ``state``."""
        now = timezone.now()
        if state == TokenState.REVOKED:
            return self.exclude(revoked_at=None)
        if state == TokenState.EXPIRED:
            return self.filter(revoked_at=None, expires_at__lte=now)
        return self.filter(models.Q(expires_at=None) | models.Q(expires_at__gt=now), revoked_at=None)

    def active(self) -> ApiTokenQuerySet:
        """The tokens that authenticate now: active, and their user not disabled."""
        return self.in_state(TokenState.ACTIVE).filter(user__is_active=True)

    def by_reference(self, ref: str) -> ApiTokenQuerySet:
        """The tokens ``ref`` names: an id ("12") or a display prefix ("argus_AbC123")."""
        if ref.isdigit():
            return self.filter(pk=int(ref))
        return self.filter(prefix=ref)


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
    def issue(cls, user: User, name: str = "default", expires_at: datetime | None = None) -> tuple[ApiToken, str]:
        """Create a token for ``user``; returns it with the raw token, which is not stored."""
        token = cls(user=user, name=name or "default", expires_at=expires_at)
        raw = token.assign_secret()
        token.save()
        # The prefix only: a log line must never be enough to use the token.
        logger.info("Issued token %s (%s) for %s", token.prefix, token.name, user)
        return token, raw

    def assign_secret(self) -> str:
        """Give this (unsaved) token a fresh secret; returns the raw token, which is not kept."""
        raw = TOKEN_PREFIX + secrets.token_urlsafe(32)
        self.prefix = raw[:PREFIX_LENGTH]
        self.token_hash = hash_token(raw)
        return raw

    @property
    def state(self) -> TokenState:
        """The token's own state; a disabled user is a separate matter (see is_active)."""
        if self.revoked_at is not None:
            return TokenState.REVOKED
        if self.expires_at is not None and self.expires_at <= timezone.now():
            return TokenState.EXPIRED
        return TokenState.ACTIVE

    @property
    def is_active(self) -> bool:
        return self.state == TokenState.ACTIVE and self.user.is_active

    def revoke(self) -> bool:
        """Revoke the token; False when it already was. The first revocation time is kept."""
        now = timezone.now()
        # Conditional, so a second revocation (another admin, a retry) is a no-op.
        if ApiToken.objects.filter(pk=self.pk, revoked_at=None).update(revoked_at=now) != 1:
            self.refresh_from_db(fields=["revoked_at"])
            return False
        self.revoked_at = now
        logger.info("Revoked token %s (%s) of %s", self.prefix, self.name, self.user)
        return True

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


def _limit_field(what: str, setting: str) -> models.PositiveIntegerField[int | None, int | None]:
    return models.PositiveIntegerField(
        null=True,
        blank=True,
        validators=[MaxValueValidator(LIMIT_MAX)],
        help_text=f"Most {what} at once. Empty: the site default ({setting}); 0: no limit.",
    )


class UserLimits(models.Model):
    """A user's own limits, fair-share weight and permissions; a user without a row has the site
    defaults and no permissions.

    accounts.limits resolves them (site default applied); the scheduler and submission read
    them only through it.
    """

    user = models.OneToOneField(settings.AUTH_USER_MODEL, models.CASCADE, primary_key=True, related_name="limits")
    max_running_gpus = _limit_field("GPUs of running tasks", "ARGUS_USER_MAX_RUNNING_GPUS")
    max_running_tasks = _limit_field("running tasks", "ARGUS_USER_MAX_RUNNING_TASKS")
    max_queued_tasks = _limit_field("waiting tasks (QUEUED or PENDING_RESOURCES)", "ARGUS_USER_MAX_QUEUED_TASKS")
    fair_share_weight = models.FloatField(
        default=1.0,
        validators=[validate_weight],
        help_text="Greater than 0. Fair share orders users by decayed GPU-seconds over this weight: "
        "a user of weight 2 gets about twice the share of a user of weight 1.",
    )
    # A permission, not a limit: a high task goes before fair share and may preempt other users'
    # tasks, so it is granted (as Slurm's QOS and Kueue's priority classes are), never assumed.
    can_use_high_priority = models.BooleanField(
        default=False,
        help_text="May submit tasks with priority: high, which go before fair share and may preempt "
        "other users' preemptible tasks. Administrators always may.",
    )
    disk_quota_bytes = disk_quota_field("The user's own files")

    class Meta:
        verbose_name = verbose_name_plural = "limits"
        constraints = [
            models.CheckConstraint(condition=models.Q(fair_share_weight__gt=0), name="userlimits_weight_positive"),
        ]

    def __str__(self) -> str:
        return f"limits of {self.user}"


class MissingSecrets(Exception):
    """Secrets a task names that its owner does not have (any more); ``names`` in the task's order."""

    def __init__(self, names: list[str]) -> None:
        self.names = names
        listed = ", ".join(names)
        super().__init__(
            f"secret{'s' if len(names) > 1 else ''} {listed} not found: set {'them' if len(names) > 1 else 'it'} "
            "with `argus secret set NAME`, on the account page or POST /api/v2/me/secrets"
        )


class SecretQuerySet(models.QuerySet["Secret"]):
    def missing(self, user: User, names: list[str]) -> list[str]:
        """Those of ``names`` that ``user`` has no secret of, in their order."""
        if not names:  # most specs name none: no query to build
            return []
        have = set(self.filter(user=user, name__in=names).values_list("name", flat=True))
        return [name for name in names if name not in have]

    def values_for(self, user: User | int, names: list[str]) -> dict[str, str]:
        """{name: value} of ``user``'s secrets ``names``, decrypted. Raises MissingSecrets when
        some are not there, accounts.secrets.Undecryptable when a key is missing."""
        rows = dict(self.filter(user=user, name__in=names).values_list("name", "ciphertext"))
        missing = [name for name in names if name not in rows]
        if missing:
            raise MissingSecrets(missing)
        return {name: secrets_crypto.decrypt(rows[name]) for name in names}


class Secret(models.Model):
    """A user's secret, used by name in task specs (``secrets: [WANDB_API_KEY]``). Only its
    Fernet token is stored (accounts.secrets); nothing serves the value back."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, models.CASCADE, related_name="secrets")
    name = models.CharField(max_length=secrets_crypto.NAME_MAX)
    ciphertext = models.TextField(editable=False, help_text="The value, encrypted under ARGUS_SECRETS_KEY.")
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)

    objects = SecretQuerySet.as_manager()

    class Meta:
        ordering = ["user", "name"]
        constraints = [models.UniqueConstraint(fields=["user", "name"], name="secret_unique_name")]

    def __str__(self) -> str:
        return f"{self.user} / {self.name}"

    @classmethod
    def put(cls, user: User, name: str, value: str) -> tuple[Secret, bool]:
        """Set ``user``'s secret ``name`` to ``value``; returns it and whether it is new. The
        caller has checked both (accounts.secrets.name_error, value_error)."""
        token = secrets_crypto.encrypt(value)
        now = timezone.now()
        for _ in range(2):
            if cls.objects.filter(user=user, name=name).update(ciphertext=token, updated_at=now):
                logger.info("Secret %s of %s replaced", name, user)
                return cls.objects.get(user=user, name=name), False
            try:
                with transaction.atomic():
                    secret = cls.objects.create(user=user, name=name, ciphertext=token, created_at=now, updated_at=now)
            except IntegrityError:
                continue  # created meanwhile by another request: replace it
            logger.info("Secret %s of %s created", name, user)
            return secret, True
        raise IntegrityError(f"secret {name} of {user} kept changing")


# Last: the group models read LIMIT_MAX and validate_weight above; imported here so that Django
# registers them in the accounts app.
from accounts.diskusage.models import DiskUsage  # noqa: E402, F401
from accounts.groups.models import Membership, QuotaGroup  # noqa: E402, F401
from accounts.sshkeys.models import SshKey  # noqa: E402, F401
