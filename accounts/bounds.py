"""The bounds a user's and a group's numbers keep: below accounts.models and accounts.groups,
which both declare fields with them."""

import math

from django.core.exceptions import ValidationError

# The largest PositiveIntegerField every database Django supports can store (PostgreSQL's
# integer): a limit above it would be a database error, not a 400.
LIMIT_MAX = 2**31 - 1


def validate_weight(value: float) -> None:
    # Fair share divides a user's usage by the weight: 0 or less, or an infinity, would put
    # them first (or last) for ever.
    if not (math.isfinite(value) and value > 0):
        raise ValidationError("The fair-share weight must be a number greater than 0.", code="invalid")
