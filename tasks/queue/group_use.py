"""Each group's quota and what it holds now: its nominal GPUs, the GPUs of the live attempts
admitted in it (Attempt.group), and of those the ones running on other groups' idle quota
(Attempt.quota borrowed). The one reading of it, for /api/v2/queue, the queue page and
/metrics' group gauges.

Users without a group are the group "" (tasks.scheduler.quotas.UNGROUPED), whose nominal is the
cluster's GPUs no group's quota covers: shown only while it holds GPUs and some group exists (a
lab without groups has no quotas, admission by quota is off: nothing to show).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from django.db.models import Sum

from accounts.groups.models import QuotaGroup
from accounts.groups.rules import group_of
from tasks.attempts import Attempt
from tasks.choices import Quota
from tasks.scheduler.quotas import UNGROUPED, GroupQuota, with_ungrouped

if TYPE_CHECKING:
    from django.contrib.auth.models import AnonymousUser, User


@dataclass(frozen=True)
class GroupUse:
    group: str  # "": users without a group
    nominal_gpus: int
    gpus_in_use: int  # borrowed ones included
    gpus_borrowed: int


def group_use(total_gpus: float) -> list[GroupUse]:
    """Every group by name, then the group "" while it holds GPUs; none without groups.
    ``total_gpus``: the cluster's (the group "" has what no group's quota covers of it). Two
    queries, one without groups."""
    quotas = {name: GroupQuota(nominal) for name, nominal in QuotaGroup.objects.values_list("name", "nominal_gpus")}
    if not quotas:
        return []
    held = Attempt.objects.live().values_list("group__name", "quota").annotate(gpus=Sum("gpus")).order_by()
    in_use: dict[str, int] = {}
    borrowed: dict[str, int] = {}
    for name, quota, gpus in held:
        group = name or UNGROUPED  # None: admitted in no group (or in one deleted since)
        in_use[group] = in_use.get(group, 0) + (gpus or 0)
        if quota == Quota.BORROWED:
            borrowed[group] = borrowed.get(group, 0) + (gpus or 0)
    nominals = with_ungrouped(quotas, int(total_gpus))
    shown = [*sorted(quotas), *([UNGROUPED] if in_use.get(UNGROUPED) else [])]
    return [GroupUse(name, nominals[name].nominal, in_use.get(name, 0), borrowed.get(name, 0)) for name in shown]


def visible_group_use(uses: list[GroupUse], viewer: User | AnonymousUser) -> list[GroupUse]:
    """What ``viewer`` may see of ``uses``: admins every group, a user their own (the group ""
    when in none), as for /api/v2/groups."""
    if viewer.is_staff:
        return uses
    if not viewer.is_authenticated:
        return []
    mine = group_of(viewer)
    name = mine.name if mine else UNGROUPED
    return [use for use in uses if use.group == name]
