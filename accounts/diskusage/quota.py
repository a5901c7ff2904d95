"""Whether a user is over a disk quota, theirs or their group's: the one rule, asked by every
submission (tasks.submit.admit_new) and every upload (accounts.files.begin_upload: the files
API, the data page, SFTP). Running tasks are never stopped for it.

Usage is as last measured (accounts.diskusage.scan, every few minutes): a user who fills the
disk between two scans is refused from the next one on.
"""

from __future__ import annotations

from django.contrib.auth.models import User

from accounts.diskusage.usage import group_used_bytes, own_usage
from accounts.groups.models import QuotaGroup
from accounts.groups.rules import group_of
from accounts.limits import own_limits


def _over(used: int, quota: int) -> bool:
    # At the quota is full: one more byte would pass it.
    return used >= quota


def quota_refusal(user: User) -> str | None:
    """Why ``user`` may add nothing to the storage now (their usage and the quota it reached,
    theirs or their group's), or None. No query for their own quota and usage when the user was
    loaded with select_related("limits", "disk_usage", "group_membership__group"), as API
    tokens load it; a group with a quota costs its members' usage."""
    row, usage = own_limits(user), own_usage(user)
    quota = row.disk_quota_bytes if row is not None else None
    if quota is not None and usage is not None and _over(usage.used_bytes, quota):
        return (
            f"{user.username} uses {usage.used_bytes} bytes of disk, at or over their disk_quota_bytes "
            f"of {quota}: delete files (old checkpoints, data) to go under it, or ask an administrator for more"
        )
    group = group_of(user)
    if group is not None and group.disk_quota_bytes is not None:
        members = QuotaGroup.objects.prefetch_related("memberships__user__disk_usage").get(pk=group.pk)
        used = group_used_bytes(members)
        if _over(used, group.disk_quota_bytes):
            return (
                f"group {group.name} uses {used} bytes of disk, at or over its disk_quota_bytes of "
                f"{group.disk_quota_bytes}: its members must delete files (old checkpoints, data) to go "
                "under it, or ask an administrator for more"
            )
    return None


def user_quota_refusal(username: str) -> str | None:
    """quota_refusal for the user named ``username`` (the files' code knows users by name)."""
    user = User.objects.select_related("limits", "disk_usage", "group_membership__group").get(username=username)
    return quota_refusal(user)
