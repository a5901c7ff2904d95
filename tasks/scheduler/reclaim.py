"""Reclaim: a group below its nominal quota takes back the room other groups' borrowed tasks
hold, stopping those that lose the least work (issue 27 item 4).

Pure functions over plain numbers, as admission's: admission asks ``choose`` for victims when an
in-quota task lacks room, and the watch asks ``stops_at`` when a chosen victim must stop.

What a victim loses is the work since its last checkpoint, in GPU-seconds: it resumes from that
checkpoint. A victim whose next checkpoint is due within ARGUS_RECLAIM_GRACE_S runs on until it
has saved it (nothing is lost); the others stop at once (waiting would hold the owner group's
room longer than the work it saves is worth).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol, TypeVar

from tasks.queue.request import Request
from tasks.scheduler.rooms import Holder, Room, enough, given_back, place


class Victim(Holder, Protocol):
    """What reclaim reads of a running task (tasks.scheduler.admission.Running, which calls
    ``choose``: a protocol, so that this module need not import the one that imports it)."""

    @property
    def gpus(self) -> int: ...
    @property
    def priority(self) -> int: ...
    @property
    def started_at(self) -> float: ...
    @property
    def checkpoint_at(self) -> float | None: ...
    @property
    def checkpoint_every_s(self) -> float | None: ...
    @property
    def group(self) -> str: ...
    @property
    def quota_gpus(self) -> int | None: ...


V = TypeVar("V", bound=Victim)


def lost_work(victim: Victim, now: float) -> float:
    """GPU-seconds since ``victim``'s last checkpoint (since its start when it has none):
    what stopping it now throws away."""
    since = victim.checkpoint_at if victim.checkpoint_at is not None else victim.started_at
    return victim.gpus * max(0.0, now - since)


def choose(
    request: Request,
    free: Mapping[str, Room],
    candidates: Sequence[V],
    now: float,
    borrowing: Mapping[str, int] | None = None,
) -> list[V] | None:
    """Of ``candidates`` (borrowed tasks of other groups, none stopping or settling in), a set
    whose room lets ``request`` fit and that loses as little work as it can: taken greedily
    losing the least first (then the lowest priority, then the newest), then those the others
    make unnecessary dropped, the one that would lose the most first. None when all of them
    together are not enough. ``borrowing``: the GPUs each group uses beyond its nominal now
    (None: no bound); a group gives back no task once those before it in that order cover it."""
    ordered = sorted(candidates, key=lambda c: (lost_work(c, now), c.priority, -c.started_at))
    if borrowing is not None:
        ordered = _while_borrowing(ordered, borrowing)
    if not ordered or place(request, given_back(free, ordered)) is None:
        return None
    rank = {id(candidate): index for index, candidate in enumerate(ordered)}
    # The last in that order (the most lost work) is dropped first when the others suffice.
    return enough(request, free, ordered, lambda c: -rank[id(c)])


def _while_borrowing(ordered: Sequence[V], borrowing: Mapping[str, int]) -> list[V]:
    """Those of ``ordered`` taken while their group still borrows, the ones before them taken
    (as Kueue's reclaim: a group at or below its nominal gives nothing back)."""
    left = dict(borrowing)
    kept = []
    for candidate in ordered:
        if left.get(candidate.group, 0) > 0:
            kept.append(candidate)
            left[candidate.group] -= candidate.gpus if candidate.quota_gpus is None else candidate.quota_gpus
    return kept


def next_checkpoint(checkpoint_at: float | None, every_s: float | None, now: float, grace_s: float) -> float:
    """When a victim chosen at ``now`` stops: at its next checkpoint (the last one plus the time
    between its last two) when that is due within ``grace_s``, else ``now``. A checkpoint
    already late is not waited for: when it will come is no longer known."""
    if checkpoint_at is None or not every_s:
        return now
    due = checkpoint_at + every_s
    return due if now <= due <= now + grace_s else now


def stops_at(victim: Victim, now: float, grace_s: float) -> float:
    """When ``victim``, chosen at ``now``, stops (``next_checkpoint`` of its checkpoints)."""
    return next_checkpoint(victim.checkpoint_at, victim.checkpoint_every_s, now, grace_s)


def late_margin(every_s: float) -> float:
    """How long past its due time a victim's checkpoint is waited for: verl saves every
    save_freq steps, and steps vary in length (rollouts of different lengths), so the time
    between saves does too, by a few per cent; a tenth of it covers that, and the scheduler's
    tick. At most a minute: the owner group waits meanwhile."""
    return min(0.1 * every_s, 60.0)
