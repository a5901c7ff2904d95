"""A user's and a group's disk usage as last measured (accounts.diskusage.scan writes it)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from accounts.diskusage.models import DiskUsage

if TYPE_CHECKING:
    from django.contrib.auth.models import User

    from accounts.groups.models import QuotaGroup


def own_usage(user: User) -> DiskUsage | None:
    """The user's measurement, or None when not measured yet; no query when it was loaded with
    select_related("disk_usage")."""
    try:
        return user.disk_usage
    except DiskUsage.DoesNotExist:
        return None


def group_used_bytes(group: QuotaGroup) -> int:
    """The sum of the group's members' used bytes (those not measured yet count 0). No query
    when its memberships were loaded with prefetch_related("memberships__user__disk_usage")."""
    return sum(usage.used_bytes for usage in map(own_usage, (m.user for m in group.memberships.all())) if usage)
