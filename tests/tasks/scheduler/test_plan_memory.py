"""What the planning remembers within a pass changes no answer: on generated queues where every
task has a time limit (as bench/tick.py --time-limits), every decision and estimate equals the one
made without it. Remembered: the starts that failed (tasks.scheduler.plan.Profile.earliest) and
each failed shape's outcome per priority (admission._Pass.settled)."""

from __future__ import annotations

import bisect
import random
from collections.abc import Mapping
from typing import Any

import pytest

from tasks.queue.request import Request, actor_cpus
from tasks.scheduler import admission
from tasks.scheduler.admission import BACKFILL, BEST_EFFORT_FIFO, POLICIES, STRICT_FIFO, Caps, Running, decide
from tasks.scheduler.plan import NEVER, Profile, Release
from tasks.scheduler.rooms import Room, holding, place
from tasks.specs.pools import Actor, Pool

NOW = 1_000_000.0
HOUR = 3600.0
CPUS_PER_GPU = 3.0


def fresh_search(
    profile: Profile, request: Request, duration: float | None, not_before: float | None = None
) -> tuple[float, dict[str, int]] | None:
    """The earliest start from scratch, as Profile.earliest searched before it remembered failed
    starts: every segment from ``not_before`` on, the least room over the span of the nodes that
    hold the request all along, placed there (written out again here, the reference)."""
    if not_before == NEVER:
        return None
    span = NEVER if duration is None else duration
    times, rooms = profile.times, profile.rooms
    first = 0 if not_before is None else max(0, bisect.bisect_right(times, not_before) - 1)
    nnodes, gpus, cpus = request.least()
    for index in range(first, len(times)):
        start = times[index] if not_before is None else max(times[index], not_before)
        window = holding(rooms[index], gpus, cpus)
        following = index + 1
        while len(window) >= nnodes and following < len(times) and times[following] < start + span:
            later = rooms[following]
            lesser = {
                node: Room(
                    min(room.gpus, later.get(node, Room(0.0)).gpus), min(room.cpus, later.get(node, Room(0.0)).cpus)
                )
                for node, room in window.items()
            }
            window = holding(lesser, gpus, cpus)
            following += 1
        placement = place(request, window)
        if placement is not None:
            return start, placement
    return None


class Forgetful(Profile):
    """A profile that remembers nothing between searches."""

    earliest = fresh_search


def cluster(rng: random.Random, count: int) -> tuple[dict[str, Room], dict[str, Room]]:
    """(totals, free): nodes of 8 GPUs (a few of 4), most of them busy."""
    totals, free = {}, {}
    for index in range(count):
        gpus = rng.choice((8, 8, 8, 4))
        name = f"n{index:02d}"
        totals[name] = Room(gpus, gpus * CPUS_PER_GPU + 4)
        left = rng.choice((0, 0, 0, 1, 2, gpus))
        free[name] = Room(left, left * CPUS_PER_GPU + rng.choice((0, 2)))
    return totals, free


def holders(rng: random.Random, totals: Mapping[str, Room], count: int) -> list[Running]:
    """Running tasks with planned ends over the next 6 hours (a few without a time limit, a
    few preemptible, a few past their end)."""
    names = sorted(totals)
    result = []
    for key in range(count):
        where = rng.sample(names, rng.choice((1, 1, 2)))
        gpus = rng.choice((1, 2, 4))
        ends = None if rng.random() < 0.03 else NOW + rng.uniform(-60, 6 * HOUR)
        result.append(
            Running(
                100_000 + key,
                dict.fromkeys(where, gpus),
                gpus * CPUS_PER_GPU,
                ends,
                user=rng.choice("abc"),
                priority=rng.choice((0, 0, 1)),
                preemptible=rng.random() < 0.3,
                started_at=NOW - rng.uniform(0, HOUR),
            )
        )
    return result


def queue(rng: random.Random, length: int, limits: bool = True) -> list[Request]:
    """bench/tick.py's shapes and time limits of 1-5 h, a few with a rollout pool or CPU actors."""
    shapes = [(1, 1), (1, 4), (1, 8), (2, 8), (4, 8)]
    result = []
    for key in range(1, length + 1):
        nnodes, gpus = rng.choices(shapes, (0.10, 0.25, 0.35, 0.20, 0.10))[0]
        more = (Pool("rollout", 1, rng.choice((1, 2))),) if rng.random() < 0.1 else ()
        actors = (Actor("runner", rng.choice((1.0, 4.0))),) if rng.random() < 0.05 else ()
        run_s = float(rng.randint(3600, 5 * 3600)) if limits else None
        priority = 2 if rng.random() < 0.1 else 0
        result.append(Request(key, nnodes, gpus, gpus * CPUS_PER_GPU, rng.choice("abc"), run_s, priority, more, actors))
    return result


def unsettled(state: Any, request: Request) -> bool:
    """_Pass.cannot_start, leaving nothing settled: every task takes every step."""
    fits = cannot_start(state, request)
    state.settled.clear()
    return fits


cannot_start = admission._Pass.cannot_start


def decisions(requests: list[Request], profile: type[Profile], **options: object) -> dict[str, Any]:
    """Everything decide() answers, placements with their CPU actors' nodes; with a profile that
    remembers nothing (Forgetful), every task also takes every step of the pass."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(admission, "Profile", profile)
        if profile is Forgetful:
            patch.setattr(admission._Pass, "cannot_start", unsettled)
        decision = decide(requests, **options)  # type: ignore[arg-type]
    return {
        "admitted": [(r.key, dict(where), actor_cpus(where)) for r, where in decision.admitted],
        "waiting": decision.waiting,
        "short": decision.short,
        "reservations": {key: (at, dict(where)) for key, (at, where) in decision.reservations.items()},
        "preempt": decision.preempt,
        "estimates": decision.estimates,
    }


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("seed", range(5))
def test_decisions_on_a_queue_with_time_limits_are_those_of_a_profile_that_remembers_nothing(policy, seed):
    rng = random.Random(seed)
    totals, free = cluster(rng, 16)
    options = {
        "free": free,
        "totals": totals,
        "policy": policy,
        "now": NOW,
        "running": holders(rng, totals, 20),
        "preemption": seed % 2 == 0,
        "shortest_first": seed % 3 != 0,
        "estimate": 100,
        "grace": 120.0,
        "caps": {"c": Caps(max_gpus=24)} if seed % 2 else {},
    }
    requests = queue(rng, 300)
    remembering = decisions(requests, Profile, **options)
    assert remembering == decisions(requests, Forgetful, **options)
    # The case is one where planning matters: tasks wait, and many starts are planned (under
    # strict FIFO none after the first that cannot be planned).
    assert len(remembering["waiting"]) > 200
    assert sum(at is not None for at in remembering["estimates"].values()) >= (5 if policy == STRICT_FIFO else 30)


def test_a_queue_without_time_limits_decides_as_before_too():
    rng = random.Random(7)
    totals, free = cluster(rng, 24)
    options = {"free": free, "totals": totals, "policy": BACKFILL, "now": NOW, "estimate": 200}
    options["running"] = holders(rng, totals, 30)
    requests = queue(rng, 400, limits=False)
    assert decisions(requests, Profile, **options) == decisions(requests, Forgetful, **options)


@pytest.mark.parametrize("seed", range(10))
def test_searches_between_takes_and_early_releases_find_what_a_fresh_search_finds(seed):
    """Room given back (a preempted task's, release_early) makes the profile forget what failed:
    a start that failed may fit again."""
    rng = random.Random(100 + seed)
    totals, free = cluster(rng, 12)
    running = holders(rng, totals, 16)
    releases = [Release(r.ends_at, r.placement, r.cpus_per_node) for r in running if r.ends_at is not None]
    profile = Profile(NOW, free, releases, totals)
    found_some = 0
    for request in queue(rng, 150):
        if rng.random() < 0.05:
            victim = rng.choice(running)
            profile.release_early(NOW + 120, victim.ends_at, victim.placement, victim.cpus_per_node)
        not_before = rng.choice((None, None, NOW + rng.uniform(0, 4 * HOUR)))
        duration = request.run_s if rng.random() < 0.9 else None
        expected = fresh_search(profile, request, duration, not_before)
        found = profile.earliest(request, duration, not_before)
        assert found == expected
        if found is not None:
            found_some += 1
            start, where = found
            profile.take(start, duration, where, request.cpus_on(where))
    assert found_some > 40


def test_a_shape_that_failed_is_told_the_room_left_after_a_later_admission():
    """The outcome a failed shape settles on holds until the next admission only: a task behind
    it that starts takes room, and the next task of that shape reads the room as it is then."""
    free = {"a": Room(8, 30.0), "b": Room(0, 30.0)}
    queue = [Request(1, 2, 8, 0.0), Request(2, 1, 1, 0.0), Request(3, 2, 8, 0.0)]
    decision = decide(queue, free, {"a": Room(8, 30.0), "b": Room(8, 30.0)}, policy=BEST_EFFORT_FIFO)
    assert [request.key for request, _ in decision.admitted] == [2]
    assert decision.waiting == {
        1: "needs 2 nodes with 8 free GPUs; 1 node has them now",
        3: "needs 2 nodes with 8 free GPUs; 0 nodes have them now",
    }
