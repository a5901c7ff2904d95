"""The bounds a user's and a group's numbers keep: below accounts.models and accounts.groups,
which both declare fields with them."""

import math

from django.core.exceptions import ValidationError
from django.db import models

# The largest PositiveIntegerField every database Django supports can store (PostgreSQL's
# integer): a limit above it would be a database error, not a 400.
LIMIT_MAX = 2**31 - 1
# The largest PositiveBigIntegerField (a signed 64-bit integer everywhere): bytes of disk.
DISK_QUOTA_MAX = 2**63 - 1
DISK_QUOTA_HELP = (
    "Bytes on the shared storage (homes, jobs included) past which submissions and uploads are "
    "refused; running tasks go on. Empty: no quota."
)


def disk_quota_field(whose: str) -> models.PositiveBigIntegerField[int | None, int | None]:
    """A user's or a group's disk quota (accounts.diskusage.quota enforces it)."""
    return models.PositiveBigIntegerField(null=True, blank=True, help_text=f"{whose}: {DISK_QUOTA_HELP}")


def validate_weight(value: float) -> None:
    # Fair share divides a user's usage by the weight: 0 or less, or an infinity, would put
    # them first (or last) for ever.
    if not (math.isfinite(value) and value > 0):
        raise ValidationError("The fair-share weight must be a number greater than 0.", code="invalid")
