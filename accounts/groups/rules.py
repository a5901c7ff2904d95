"""What changes a group or a user's membership, for every door (the API, the admin site): each
change written and recorded in the admin's history (LogEntry, with who made it), as the admin
site records its own edits, so a group's history page shows every change whichever door it
came through.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from django.contrib.admin.models import ADDITION, CHANGE, DELETION, LogEntry
from django.db import models, transaction

from accounts.groups.models import Membership, QuotaGroup

if TYPE_CHECKING:
    from django.contrib.auth.models import User

logger = logging.getLogger(__name__)

# What a group's quota is made of, in the order the API and the admin site show it.
QUOTA_FIELDS = ("nominal_gpus", "borrow_limit_gpus", "lend_limit_gpus", "fair_share_weight", "disk_quota_bytes")

# Why a group may not be deleted now, asked of the apps above accounts: the tasks app knows
# which of a group's tasks are live, and accounts may not import it (the layering puts tasks
# above accounts), so tasks registers its check here when it starts (tasks.apps). Each answers
# a reason, or None when it holds nothing.
Hold = Callable[[QuotaGroup], str | None]
_holds: list[Hold] = []


def register_hold(hold: Hold) -> None:
    if hold not in _holds:
        _holds.append(hold)


class GroupInUse(Exception):
    """A group that still has members or live work: deleting it is refused, saying why."""


class GroupGone(Exception):
    """The group a user was to join was deleted meanwhile (after the request named it)."""


def _record(actor: User, obj: models.Model, flag: int, message: str) -> None:
    LogEntry.objects.log_actions(actor.pk, [obj], flag, message, single_object=True)


def _changes(before: dict[str, object], after: dict[str, object]) -> str:
    return ", ".join(f"{name} {before[name]!r} -> {after[name]!r}" for name in after if before[name] != after[name])


def create_group(actor: User, name: str, **quota: int | float | None) -> QuotaGroup:
    """A new group, already validated."""
    with transaction.atomic():
        group = QuotaGroup.objects.create(name=name, **quota)
        shown = ", ".join(f"{field} {getattr(group, field)!r}" for field in QUOTA_FIELDS)
        _record(actor, group, ADDITION, f"Created group {name}: {shown}")
    logger.info("%s created group %s", actor.username, name)
    return group


def update_group(actor: User, group: QuotaGroup, **changes: int | float | None) -> None:
    """Write some of ``group``'s quota (QUOTA_FIELDS), already validated; only what changes is
    recorded."""
    before: dict[str, object] = {field: getattr(group, field) for field in changes}
    for field, value in changes.items():
        setattr(group, field, value)
    said = _changes(before, dict(changes))
    if not said:
        return
    with transaction.atomic():
        group.save(update_fields=list(changes))
        _record(actor, group, CHANGE, f"Changed group {group.name}: {said}")
    logger.info("%s changed group %s: %s", actor.username, group.name, said)


def deletion_refusal(group: QuotaGroup) -> str | None:
    """Why ``group`` may not be deleted now (its members, its live tasks), or None."""
    members = list(group.memberships.order_by("user__username").values_list("user__username", flat=True))
    reasons = (
        [f"it has {len(members)} member{'s' if len(members) != 1 else ''} ({', '.join(members)})"] if members else []
    )
    reasons += [reason for hold in _holds if (reason := hold(group))]
    if not reasons:
        return None
    return f"Group {group.name} cannot be deleted: {'; '.join(reasons)}."


def delete_group(actor: User, group: QuotaGroup) -> None:
    """Delete ``group``; raises GroupInUse, saying why, while it has members or live tasks."""
    name = group.name
    with transaction.atomic():
        # Locked first where the database can: a member added meanwhile waits for the check.
        QuotaGroup.objects.select_for_update().filter(pk=group.pk).first()
        refusal = deletion_refusal(group)
        if refusal:
            raise GroupInUse(refusal)
        _record(actor, group, DELETION, f"Deleted group {name}")
        group.delete()
    logger.info("%s deleted group %s", actor.username, name)


def group_of(user: User) -> QuotaGroup | None:
    """The user's group, or None: no group. No query when loaded with
    select_related("group_membership__group")."""
    try:
        return user.group_membership.group
    except Membership.DoesNotExist:
        return None


def set_group(actor: User, user: User, group: QuotaGroup | None) -> None:
    """Put ``user`` in ``group`` (None: in no group), recorded on the user's history."""
    before = group_of(user)
    if before == group:
        return
    membership: Membership | None = None
    with transaction.atomic():
        if group is None:
            Membership.objects.filter(user=user).delete()
        else:
            # Locked as delete_group locks it: a group deleted since the request named it is
            # refused here, not by the foreign key (a database error).
            if not QuotaGroup.objects.select_for_update().filter(pk=group.pk).exists():
                raise GroupGone(f"The group {group.name} was deleted meanwhile.")
            membership, _ = Membership.objects.update_or_create(user=user, defaults={"group": group})
        was, now = (before.name if before else "no group"), (group.name if group else "no group")
        _record(actor, user, CHANGE, f"Changed the group of {user.username}: {was} -> {now}")
    # What the caller shows next is what was written (None: the user's "no group", as Django
    # caches a missing reverse one-to-one).
    Membership.user.field.remote_field.set_cached_value(user, membership)
    logger.info("%s moved %s from %s to %s", actor.username, user.username, was, now)
