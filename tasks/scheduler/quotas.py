"""Admission by quota (issue 27 item 2): each group's own GPUs (its nominal quota), and what it
may borrow of the others' idle quota. Pure arithmetic over plain numbers, as Kueue's cohorts do
it: admission (tasks.scheduler.admission) asks it, bench/policy_sim.py may too.

A group's GPUs in use are its running attempts' (Running.group: the group each was admitted in).
Beyond its nominal, a group borrows: a task starts only when what its group borrows then stays
within the group's borrow limit, and what all groups borrow then stays within what the groups
under their nominal lend (each at most its lend limit of its idle quota). Users without a group
are the group "" (UNGROUPED), whose nominal is the cluster's GPUs no group's quota covers.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from tasks.scheduler.rooms import plural

UNGROUPED = ""  # the group of the users without one


@dataclass(frozen=True)
class GroupQuota:
    """A group's quota as admission reads it (accounts.groups.models.QuotaGroup's fields)."""

    nominal: int
    borrow_limit: int | None = None  # None: no limit
    lend_limit: int | None = None  # None: all of its idle quota
    weight: float = 1.0  # fair share between groups (tasks.queue), not admission's


def with_ungrouped(groups: Mapping[str, GroupQuota], total_gpus: int) -> dict[str, GroupQuota]:
    """``groups`` and the group of users without one: the GPUs no group's quota covers, no
    borrow or lend limit (an operator who set one of its own keeps it)."""
    complete = dict(groups)
    if UNGROUPED not in complete:
        covered = sum(quota.nominal for quota in groups.values())
        complete[UNGROUPED] = GroupQuota(max(0, total_gpus - covered))
    return complete


def gpus_in_use(holders: Iterable[tuple[str, int]]) -> dict[str, int]:
    """Each group's GPUs in use, from (group, gpus) of each running attempt."""
    in_use: dict[str, int] = {}
    for group, gpus in holders:
        in_use[group] = in_use.get(group, 0) + gpus
    return in_use


def borrowed(quota: GroupQuota, in_use: int) -> int:
    """The GPUs a group uses beyond its nominal."""
    return max(0, in_use - quota.nominal)


def lendable(quota: GroupQuota, in_use: int) -> int:
    """The GPUs of a group's idle quota other groups may use: its idle quota, at most its lend limit."""
    idle = max(0, quota.nominal - in_use)
    return idle if quota.lend_limit is None else min(quota.lend_limit, idle)


def label(group: str) -> str:
    """How a reason names a group."""
    return f"group {group}" if group != UNGROUPED else "users without a group"


@dataclass
class Ledger:
    """The groups' use during one pass of admission: what a request may start as, and what each
    admission takes. Groups not in ``quotas`` (a group deleted while its tasks run) have no
    quota: their tasks count as borrowed."""

    quotas: Mapping[str, GroupQuota]
    in_use: dict[str, int]
    # GPUs of a group's quota owed to its own waiting tasks that other tasks made room for (a
    # reclaim's): not idle, so not lent, or a borrower would take the room taken back for them.
    owed: dict[str, int] = field(default_factory=dict)
    # refusal's answers until the next take: 10,000 waiting tasks of a few groups and sizes.
    known: dict[tuple[str, int], str | None] = field(default_factory=dict)

    @classmethod
    def of(cls, quotas: Mapping[str, GroupQuota], holders: Iterable[tuple[str, int]]) -> Ledger:
        return cls(quotas, gpus_in_use(holders))

    def quota(self, group: str) -> GroupQuota:
        return self.quotas.get(group) or GroupQuota(0, borrow_limit=0)

    def used(self, group: str) -> int:
        return self.in_use.get(group, 0)

    def within_nominal(self, group: str, gpus: int, more: int = 0) -> bool:
        """Whether ``gpus`` more (and ``more`` already promised) stay within the group's nominal."""
        return self.used(group) + more + gpus <= self.quota(group).nominal

    def total_borrowed(self) -> int:
        return sum(borrowed(self.quota(group), used) for group, used in self.in_use.items())

    def lends(self, group: str) -> int:
        """What ``group`` lends now: its idle quota less what it owes its own tasks."""
        return lendable(self.quota(group), self.used(group) + self.owed.get(group, 0))

    def total_lendable(self) -> int:
        return sum(self.lends(group) for group in self.quotas)

    def refusal(self, group: str, gpus: int) -> str | None:
        """Why a task of ``group`` needing ``gpus`` may not start under the quotas now, naming
        the numbers; None when it may (within its nominal, or borrowing what it may)."""
        if (group, gpus) not in self.known:
            self.known[(group, gpus)] = self._refusal(group, gpus)
        return self.known[(group, gpus)]

    def _refusal(self, group: str, gpus: int) -> str | None:
        quota = self.quota(group)
        used = self.used(group)
        if not gpus or used + gpus <= quota.nominal:
            return None  # a task without GPUs (an export) takes nothing of any quota
        head = f"{label(group)}: {used} of {plural(quota.nominal, 'GPU')} in use"
        needs = f"(this task needs {gpus})"
        more = used + gpus - quota.nominal - borrowed(quota, used)  # what this task adds to its borrowing
        if quota.borrow_limit is not None and borrowed(quota, used) + more > quota.borrow_limit:
            return f"{head}, borrowing limited to {quota.borrow_limit} {needs}"
        # Once it starts its group lends nothing: what it lends now is no longer idle.
        lent = self.total_lendable() - self.lends(group)
        spare = lent - self.total_borrowed()
        if more > spare:
            if spare <= 0:
                return f"{head}, nothing idle to borrow in other groups' quotas (their lend limits) {needs}"
            return f"{head}, only {spare} idle to borrow in other groups' quotas (their lend limits) {needs}"
        return None

    def borrows(self, group: str, gpus: int) -> bool:
        """Whether a task of ``group`` needing ``gpus`` runs beyond its group's nominal."""
        return gpus > 0 and not self.within_nominal(group, gpus)

    def owe(self, group: str, gpus: int) -> None:
        """``gpus`` of ``group``'s quota are for a task of its own that waits for room made for it."""
        self.owed[group] = self.owed.get(group, 0) + gpus
        self.known.clear()

    def take(self, group: str, gpus: int, *, owed: bool = False) -> None:
        """An admission of ``gpus`` in ``group`` (``owed``: by a task they were owed to)."""
        self.in_use[group] = self.used(group) + gpus
        if owed:
            self.owed[group] = max(0, self.owed.get(group, 0) - gpus)
        self.known.clear()
