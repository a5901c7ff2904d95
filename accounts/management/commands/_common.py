"""What the argus_user and argus_token commands share."""

from __future__ import annotations

from django.contrib.auth.models import User
from django.core.management.base import CommandError


def get_user(username: str) -> User:
    try:
        return User.objects.get(username=username)
    except User.DoesNotExist:
        raise CommandError(f"No user named {username!r}.") from None


def table(rows: list[list[str]]) -> str:
    """Rows (the first one the header) as left-aligned columns."""
    widths = [max(len(row[col]) for row in rows) for col in range(len(rows[0]))]
    return "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip() for row in rows
    )
