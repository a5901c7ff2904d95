"""A group of users that shares a quota of the cluster's GPUs, and who belongs to one.

Named QuotaGroup in code and in the admin site, apart from django.contrib.auth's Group (a set
of permissions); the API and the pages say "group".
"""

from __future__ import annotations

import re

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator
from django.db import models
from django.utils import timezone

from accounts.bounds import LIMIT_MAX, disk_quota_field, validate_weight

# A group's name is a URL part (/api/v2/groups/NAME) and a /metrics label value: kept to
# lowercase words, so "NLP" and "nlp" can never be two groups.
NAME_PATTERN = r"[a-z][a-z0-9_-]{0,31}"
_NAME_RE = re.compile(NAME_PATTERN)
NAME_MAX = 32
NAME_HELP = "1 to 32 characters: lowercase letters, digits, '_' and '-', starting with a letter."


def validate_group_name(name: str) -> None:
    # fullmatch: "$" would also match before a trailing newline.
    if not isinstance(name, str) or not _NAME_RE.fullmatch(name):
        raise ValidationError(f"Invalid group name {name!r}: {NAME_HELP}", code="invalid")


class QuotaGroup(models.Model):
    """A group's quota: its own GPUs, how far it may borrow others' idle ones, how much of its own
    idle ones it lends, and its weight in fair share between groups (issue 27 items 2 and 3 read
    them; nothing admits by them yet)."""

    name = models.CharField(max_length=NAME_MAX, unique=True, validators=[validate_group_name], help_text=NAME_HELP)
    nominal_gpus = models.PositiveIntegerField(
        default=0, validators=[MaxValueValidator(LIMIT_MAX)], help_text="The group's own share of the cluster's GPUs."
    )
    borrow_limit_gpus = models.PositiveIntegerField(
        null=True,
        blank=True,
        validators=[MaxValueValidator(LIMIT_MAX)],
        help_text="How many GPUs beyond its own it may use of other groups' idle quota. Empty: no limit.",
    )
    lend_limit_gpus = models.PositiveIntegerField(
        null=True,
        blank=True,
        validators=[MaxValueValidator(LIMIT_MAX)],
        help_text="How many of its idle GPUs other groups may use. Empty: all of them.",
    )
    fair_share_weight = models.FloatField(
        default=1.0,
        validators=[validate_weight],
        help_text="Greater than 0. Fair share between groups orders them by decayed usage over this weight.",
    )
    disk_quota_bytes = disk_quota_field("Its members' files together")
    created_at = models.DateTimeField(default=timezone.now, editable=False)

    class Meta:
        ordering = ["name"]
        verbose_name = "quota group"
        constraints = [
            models.CheckConstraint(condition=models.Q(fair_share_weight__gt=0), name="quotagroup_weight_positive"),
        ]

    def __str__(self) -> str:
        return self.name


class Membership(models.Model):
    """The one group a user belongs to; a user without a row is in no group."""

    # The user is the key: one group at most, by the schema itself.
    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, models.CASCADE, primary_key=True, related_name="group_membership"
    )
    # PROTECT: a group with members is never deleted, whichever door the delete comes through.
    group = models.ForeignKey(QuotaGroup, models.PROTECT, related_name="memberships")
    since = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["group", "user"]

    def __str__(self) -> str:
        # The group alone: once deleted, a row keyed by its user no longer has one (the admin
        # site names the row after deleting it).
        return f"member of {self.group}"
