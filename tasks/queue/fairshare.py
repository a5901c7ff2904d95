"""Fair share: the order of the queue within a priority.

Each user's usage is GPU-seconds decayed with a half-life (ARGUS_FAIR_SHARE_HALF_LIFE_S), and
their share is their weight (admin-set, default 1). Slurm's classic factor,
``2^(-(usage / total usage) / (weight / total weight))``, is 1 for a user who has used nothing,
1/2 for one who used exactly their share, near 0 for a heavy user.

The factor moves a task earlier in the queue by up to ``window`` seconds of submission time
(ARGUS_FAIR_SHARE_WINDOW_S): a light user's task passes a heavy user's that came up to that much
earlier. This is Slurm's multifactor priority (fair share plus age) written as a shift of the
submission time, and it bounds how long a task can be passed over: once it has waited
``window`` longer than a newer task, no share puts the newer one first, so nobody starves.

Groups (accounts.groups: QuotaGroup.fair_share_weight; users in no group form the group "" of
weight 1) are ordered first, as Slurm's fair tree orders accounts: by their decayed usage (the
sum of their members') over their weight, the lightest first. ``fair_tree`` turns that order
into the one factor ``order`` reads: with L distinct group levels, a group ranked r (0: the
heaviest) has the band ``(r/L, (r+1)/L]``, and each of its users the point ``(r + f)/L`` of it,
``f`` the user's classic factor among the group's members. Every user of a lighter group thus
has a higher factor than every user of a heavier one, users within a group keep today's order,
and with no groups (one group, L = 1) the factor is exactly the classic one. The window still
bounds every pass: a factor stays in (0, 1].

Pure functions over plain numbers; the scheduler keeps usage up to date incrementally
(its ``usage.charge``), the queue reads it (tasks.queue.shares) and bench/policy_sim.py
drives the same code:

    fair_tree(usage, weights, users, group_of, group_weights).factor  # -> {user: factor}

``usage`` {user: decayed GPU-seconds}, ``weights`` {user: weight} (absent: 1), ``users`` those
to order besides the ones with usage, ``group_of`` {user: group} (absent or "": no group),
``group_weights`` {group: fair_share_weight} (absent: 1); both optional ({}: no groups).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple, TypeVar

HOUR = 3600.0


def decayed(usage: float, seconds: float, half_life_s: float) -> float:
    """``usage`` as it counts ``seconds`` later."""
    if half_life_s <= 0 or seconds <= 0:
        return usage
    return usage * math.pow(2.0, -seconds / half_life_s)  # typed float (float ** float is not: it may be complex)


def factors(usage: Mapping[str, float], weights: Mapping[str, float], users: Iterable[str]) -> dict[str, float]:
    """Each of ``users``' fair-share factor in (0, 1] (1: has used nothing)."""
    users = set(users) | set(usage)
    total_usage = sum(max(0.0, usage.get(user, 0.0)) for user in users)
    total_weight = sum(weights.get(user, 1.0) for user in users)
    if total_usage <= 0:
        return {user: 1.0 for user in users}
    result = {}
    for user in users:
        used = max(0.0, usage.get(user, 0.0)) / total_usage
        share = weights.get(user, 1.0) / total_weight
        result[user] = 2.0 ** (-used / share)
    return result


@dataclass(frozen=True)
class Tree:
    """Fair share across and within groups (``fair_tree``)."""

    factor: dict[str, float]  # each user's, as ``order`` reads it: (rank + factor in the group) / levels
    group_of: dict[str, str]  # each user's group ("": none)
    group_usage: dict[str, float]  # each group's: the sum of its members'
    group_factor: dict[str, float]  # each group's classic factor among the groups, as shown
    rank: dict[str, int]  # each group's place, 0 the heaviest; groups alike in usage/weight share one
    levels: int  # distinct ranks

    def newcomer(self, group: str) -> float:
        """The factor of a user of ``group`` with no usage and nothing to order (not in the tree:
        counting them would change the others' classic factors): the top of its group's band, or
        1 where the group is not in the tree (it has no usage either: the lightest)."""
        return (self.rank[group] + 1) / self.levels if group in self.rank else 1.0


def fair_tree(
    usage: Mapping[str, float],
    weights: Mapping[str, float],
    users: Iterable[str],
    group_of: Mapping[str, str] | None = None,
    group_weights: Mapping[str, float] | None = None,
) -> Tree:
    """Each of ``users``' (and every user with usage) factor in (0, 1], groups first (see the
    module)."""
    given = list(users)
    everyone = set(given) | set(usage)
    groups = {user: (group_of or {}).get(user, "") for user in everyone}
    members: dict[str, list[str]] = {}
    for user, group in groups.items():
        members.setdefault(group, []).append(user)
    # fsum: exact, so two groups alike in usage tie whatever order their members come in.
    used = {group: math.fsum(max(0.0, usage.get(user, 0.0)) for user in names) for group, names in members.items()}
    gweight = {group: (group_weights or {}).get(group, 1.0) for group in members}
    # Slurm's fair tree ranks siblings by usage over shares; ranking by the classic group factor
    # is the same order, but the factor rounds to 0 for several heavy groups alike.
    level = {group: used[group] / gweight[group] for group in members}
    heaviest_first = sorted(set(level.values()), reverse=True)
    place = {value: rank for rank, value in enumerate(heaviest_first)}
    rank = {group: place[value] for group, value in level.items()}
    levels = max(1, len(heaviest_first))
    factor: dict[str, float] = {}
    for group, names in members.items():
        # One group (no groups at all): today's very call, so today's factors float for float
        # (a sum's last bit depends on the order the users come in).
        mine = usage if len(members) == 1 else {user: usage[user] for user in names if user in usage}
        for user, within in factors(mine, weights, given if len(members) == 1 else names).items():
            factor[user] = (rank[group] + within) / levels
    return Tree(factor, groups, used, factors(used, gweight, members), rank, levels)


class Waiting(NamedTuple):
    """A waiting task as the order needs it (``submitted`` in seconds on any clock); a named
    tuple, the cheapest to make 10,000 of each tick."""

    key: int
    user: str
    priority: int
    submitted: float


W = TypeVar("W", bound=Waiting)


def order(waiting: Sequence[W], factor: Mapping[str, float], window_s: float) -> list[W]:
    """The queue: priority first, then submission time moved earlier by the user's factor
    times ``window_s``, then submission time (0: plain priority + FIFO)."""
    # Each user's shift once, not once per task: 10,000 tasks come from a handful of users.
    shift = {user: window_s * f for user, f in factor.items()}
    return sorted(
        waiting,
        key=lambda w: (-w.priority, w.submitted - shift.get(w.user, window_s), w.submitted, w.key),
    )
