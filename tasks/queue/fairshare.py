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

Pure functions over plain numbers; the scheduler keeps usage up to date incrementally
(its ``usage.charge``), the queue reads it (tasks.queue.shares) and bench/policy_sim.py
drives the same code.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
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
