"""Free room per node over time: when will a task fit?

Backfill needs it twice: the reservation of the first task that cannot start (the earliest time
enough nodes free up, planned from running tasks' start + time limit) and each waiting task's
estimated start. A ``Profile`` is a step function: from ``times[i]`` until ``times[i + 1]`` the
nodes have ``rooms[i]`` free. Running tasks give their room back at their planned end (never,
when they have no time limit); planned tasks take room for their planned duration.

Pure: plain numbers (seconds on any clock), no Django, so that bench/policy_sim.py drives the
same code as the scheduler.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from tasks.queue.request import Cpus, Gang, Request
from tasks.scheduler.rooms import Room, cpus_at, holding, place

NEVER = math.inf
# A running task past its planned end (over its time limit, being stopped) gives its room back
# "any moment now": planned a second ahead, never as free at this instant, where it is not.
OVERDUE_S = 1.0


@dataclass(frozen=True)
class Release:
    """Room that comes back at ``at`` (a running task's planned end)."""

    at: float
    placement: Mapping[str, int]  # {node: gpus}
    cpus_per_node: Cpus = 0.0


class Profile:
    def __init__(
        self,
        now: float,
        free: Mapping[str, Room],
        releases: Iterable[Release] = (),
        totals: Mapping[str, Room] | None = None,
    ) -> None:
        self.now = now
        self.totals = totals
        self.times: list[float] = [now]
        self.rooms: list[dict[str, Room]] = [dict(free)]
        # What earliest() learnt of the starts that fail. Room only shrinks while tasks are
        # planned (take), so a start that failed fails again: 200 estimates a tick need not
        # look at the same full segments again (bench/tick.py --time-limits). Any room given
        # back (_change with +1) forgets it all.
        # {least gang: a time before which no start has the gang's nodes in its first segment}
        self._floor: dict[Gang, float] = {}
        # {least gang: the segments (by their start) that lack the gang's nodes}
        self._lacking: dict[Gang, set[float]] = {}
        # {one-pool shape: {start: the shortest span that failed from there}}
        self._failed: dict[Gang, dict[float, float]] = {}
        for release in sorted(releases, key=lambda r: r.at):
            if release.at == NEVER:
                continue
            at = release.at if release.at > now else now + OVERDUE_S
            self._change(at, NEVER, release.placement, release.cpus_per_node, +1)

    def _split(self, at: float) -> int:
        """The index of the segment that starts at ``at``, splitting the one that holds it."""
        index = bisect.bisect_right(self.times, at) - 1
        if self.times[index] == at:
            return index
        self.times.insert(index + 1, at)
        self.rooms.insert(index + 1, dict(self.rooms[index]))
        return index + 1

    def _change(self, start: float, end: float, placement: Mapping[str, int], cpus: Cpus, sign: int) -> None:
        if sign > 0:
            self._floor.clear()
            self._lacking.clear()
            self._failed.clear()
        first = self._split(start)
        last = len(self.times) if end == NEVER else self._split(end)
        for index in range(first, last):
            rooms = self.rooms[index]
            for node, gpus in placement.items():
                if self.totals is not None and node not in self.totals:
                    continue  # a dead node: nothing comes back there until it rejoins (as a new node)
                room = rooms.get(node, Room(0.0, 0.0))
                changed = Room(room.gpus + sign * gpus, room.cpus + sign * cpus_at(cpus, node))
                if self.totals is not None and node in self.totals:
                    # A release never makes a node larger than it is (effective_free already
                    # charged the larger of Ray's and Argus's counts).
                    total = self.totals[node]
                    changed = Room(min(changed.gpus, total.gpus), min(changed.cpus, total.cpus))
                rooms[node] = changed

    def release_early(self, at: float, planned: float | None, placement: Mapping[str, int], cpus: Cpus) -> None:
        """Room a running task was planned to give back at ``planned`` (None: never) comes back
        at ``at`` instead: a preempted task stops within its grace."""
        at = at if at > self.now else self.now + OVERDUE_S
        end = NEVER if planned is None or planned == NEVER else max(planned, at)
        if end > at:
            self._change(at, end, placement, cpus, +1)

    def room_at(self, at: float) -> dict[str, Room]:
        return dict(self.rooms[bisect.bisect_right(self.times, at) - 1])

    def earliest(
        self, request: Request, duration: float | None, not_before: float | None = None
    ) -> tuple[float, dict[str, int]] | None:
        """The earliest start (at a segment boundary) from which ``request`` fits for all of
        ``duration`` (None: for ever), and where; None when it never fits."""
        if not_before == NEVER:
            return None
        span = NEVER if duration is None else duration
        first = 0 if not_before is None else max(0, bisect.bisect_right(self.times, not_before) - 1)
        # Several pools: the nodes that hold the smallest pool (place() sorts out the rest).
        least = request.least()
        nnodes, gpus, cpus = least
        floor = self._floor.get(least, -NEVER)
        first = max(first, bisect.bisect_right(self.times, floor) - 1)
        # A one-pool request fits where enough nodes hold it (place() is monotone in the room):
        # a span that failed from a start fails there for every longer span. Several pools are
        # placed pool by pool, which less room may help: they are not remembered.
        failed = self._failed.setdefault(least, {}) if not request.more and not request.actors else None
        lacking = self._lacking.setdefault(least, set())
        for index in range(first, len(self.times)):
            at = self.times[index]
            if at in lacking:
                continue
            start = at if not_before is None else max(at, not_before)
            if failed is not None and start in failed and span >= failed[start]:
                continue
            # The least room over the span, of the nodes that hold the request all along: a node
            # that lacks it at any point can take no part (place() would pass it over), and
            # dropping it at once keeps a profile of many segments cheap (200 estimates a tick).
            window = holding(self.rooms[index], gpus, cpus)
            if len(window) < nnodes:
                # No start in this segment fits, however short; if none before it does either,
                # the next search for this gang starts after it.
                lacking.add(at)
                if at <= floor or index == 0:
                    floor = self._floor[least] = self.times[index + 1] if index + 1 < len(self.times) else NEVER
                continue
            end = start + span
            following = index + 1
            while len(window) >= nnodes and following < len(self.times) and self.times[following] < end:
                later = self.rooms[following]
                lesser = {node: _lesser(room, later.get(node, Room(0.0, 0.0))) for node, room in window.items()}
                window = holding(lesser, gpus, cpus)
                following += 1
            placement = place(request, window)
            if placement is not None:
                return start, placement
            if failed is not None:
                failed[start] = min(span, failed.get(start, span))
        return None

    def take(self, start: float, duration: float | None, placement: Mapping[str, int], cpus_per_node: Cpus) -> None:
        """A planned task holds ``placement`` from ``start`` for ``duration`` (None: for ever)."""
        end = NEVER if duration is None else start + duration
        self._change(start, end, placement, cpus_per_node, -1)


def _lesser(a: Room, b: Room) -> Room:
    return Room(min(a.gpus, b.gpus), min(a.cpus, b.cpus))
