"""Reclaim's victims and their stop time: tasks.scheduler.reclaim, pure functions over plain
numbers (seconds on a made-up clock)."""

from __future__ import annotations

from tasks.queue.request import Request
from tasks.scheduler.admission import Running
from tasks.scheduler.reclaim import choose, lost_work, next_checkpoint, stops_at
from tasks.scheduler.rooms import Room

NOW = 10_000.0


def req(nnodes: int, gpus: int) -> Request:
    return Request(99, nnodes, gpus, 0.0, "owner", None, 0, group="vision")


def nodes(**free: float) -> dict[str, Room]:
    return {node: Room(g, 0.0) for node, g in free.items()}


def borrowed(key: int, placement: dict[str, int], *, started_at: float, **more) -> Running:
    return Running(key, placement, 0.0, None, group="nlp", borrowed=True, started_at=started_at, **more)


def test_lost_work_is_gpu_seconds_since_the_last_checkpoint_or_the_start():
    assert lost_work(borrowed(1, {"a": 4}, started_at=NOW - 100), NOW) == 400
    assert lost_work(borrowed(1, {"a": 2, "b": 2}, started_at=NOW - 900, checkpoint_at=NOW - 30), NOW) == 120


def test_the_victim_is_the_one_that_loses_the_least_work():
    fresh = borrowed(1, {"a": 4}, started_at=NOW - 5000, checkpoint_at=NOW - 60)  # 240 GPU-s
    stale = borrowed(2, {"b": 4}, started_at=NOW - 1000, checkpoint_at=NOW - 600)  # 2400 GPU-s
    never = borrowed(3, {"c": 4}, started_at=NOW - 100)  # 400 GPU-s: none yet, from its start
    free = nodes(a=0, b=0, c=0)
    assert choose(req(1, 4), free, [stale, never, fresh], NOW) == [fresh]
    assert choose(req(1, 4), free, [stale, never], NOW) == [never]
    assert choose(req(2, 4), free, [stale, never, fresh], NOW) == [fresh, never]


def test_equal_work_lost_then_the_lowest_priority_then_the_newest():
    high = borrowed(1, {"a": 4}, started_at=NOW - 100, priority=5)
    low_old = borrowed(2, {"b": 4}, started_at=NOW - 200, checkpoint_at=NOW - 100)
    low_new = borrowed(3, {"c": 4}, started_at=NOW - 100)
    free = nodes(a=0, b=0, c=0)
    assert choose(req(1, 4), free, [high, low_old, low_new], NOW) == [low_new]
    assert choose(req(1, 4), free, [high, low_old], NOW) == [low_old]


def test_a_victim_the_others_make_unnecessary_is_dropped_the_most_lost_work_first():
    # Greedily: small (2 GPUs on a, 20 GPU-s), then big (8 on a, 800): the 8 alone make room.
    small = borrowed(1, {"a": 2}, started_at=NOW - 10)
    big = borrowed(2, {"a": 6}, started_at=NOW - 100)
    assert choose(req(1, 6), nodes(a=0), [big, small], NOW) == [big]
    # Both needed: neither is dropped.
    assert choose(req(1, 8), nodes(a=0), [big, small], NOW) == [small, big]
    # Greedily p, q, then r (5 GPUs); p or q is then unnecessary, not both: q, which loses
    # more, is dropped first, and p stays ([q, r] would lose 10 GPU-s more).
    p = borrowed(3, {"a": 1}, started_at=NOW - 10)  # 10
    q = borrowed(4, {"a": 1}, started_at=NOW - 20)  # 20
    r = borrowed(5, {"a": 3}, started_at=NOW - 100)  # 300
    assert choose(req(1, 4), nodes(a=0), [r, q, p], NOW) == [p, r]


def test_none_when_all_the_candidates_together_do_not_make_room():
    few = [borrowed(1, {"a": 2}, started_at=NOW - 10), borrowed(2, {"b": 2}, started_at=NOW - 10)]
    assert choose(req(1, 4), nodes(a=1, b=1), few, NOW) is None
    assert choose(req(1, 4), nodes(a=1, b=1), [], NOW) is None
    # A dead node's room comes back nowhere.
    assert choose(req(1, 4), nodes(b=0), [borrowed(1, {"a": 4}, started_at=NOW - 10)], NOW) is None


def test_free_room_counts_toward_the_fit():
    small = borrowed(1, {"a": 2}, started_at=NOW - 10)
    big = borrowed(2, {"a": 2}, started_at=NOW - 1000)
    assert choose(req(1, 4), nodes(a=2), [big, small], NOW) == [small]


def test_a_victim_stops_at_its_next_checkpoint_when_due_within_the_grace():
    due_soon = borrowed(1, {"a": 4}, started_at=NOW - 900, checkpoint_at=NOW - 200, checkpoint_every_s=300)
    assert stops_at(due_soon, NOW, 300) == NOW + 100
    assert stops_at(due_soon, NOW, 100) == NOW + 100  # exactly at the edge
    assert stops_at(due_soon, NOW, 99) == NOW  # not within the grace: at once


def test_a_victim_stops_at_once_without_a_known_checkpoint_rhythm_or_when_late():
    assert stops_at(borrowed(1, {"a": 4}, started_at=NOW - 900), NOW, 300) == NOW
    one_checkpoint = borrowed(1, {"a": 4}, started_at=NOW - 900, checkpoint_at=NOW - 10)
    assert stops_at(one_checkpoint, NOW, 300) == NOW  # no time between two yet
    late = borrowed(1, {"a": 4}, started_at=NOW - 900, checkpoint_at=NOW - 400, checkpoint_every_s=300)
    assert stops_at(late, NOW, 300) == NOW
    assert next_checkpoint(NOW - 400, 300, NOW - 150, 300) == NOW - 100  # seen from when it was chosen
