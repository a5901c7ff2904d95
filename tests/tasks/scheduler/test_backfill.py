"""Backfill, preemption, user limits and estimated starts: tasks.scheduler.admission and plan,
pure functions over plain numbers (seconds on a made-up clock)."""

from __future__ import annotations

from tasks.queue.request import Request
from tasks.scheduler.admission import BACKFILL, STRICT_FIFO, Caps, Running, choose_victims, decide
from tasks.scheduler.plan import Profile, Release
from tasks.scheduler.rooms import Room

NOW = 1000.0


def req(key: int, nnodes: int, gpus: int, run_s: float | None = None, user: str = "u", priority: int = 0) -> Request:
    return Request(key, nnodes, gpus, 0.0, user, run_s, priority)


def nodes(**free: float) -> dict[str, Room]:
    return {node: Room(g, 0.0) for node, g in free.items()}


def running(key: int, placement: dict[str, int], ends_at: float | None, **more) -> Running:
    return Running(key, placement, 0.0, ends_at, **more)


TOTALS = nodes(a=8, b=8)


# --- The profile -------------------------------------------------------------------------------


def test_the_profile_plans_the_earliest_start_from_running_tasks_ends():
    profile = Profile(NOW, nodes(a=0, b=4), [Release(NOW + 100, {"a": 8}), Release(NOW + 50, {"b": 4})], TOTALS)
    assert profile.earliest(req(1, 1, 8), 10) == (NOW + 50, {"b": 8})
    assert profile.earliest(req(1, 2, 8), 10) == (NOW + 100, {"a": 8, "b": 8})
    assert profile.earliest(req(1, 1, 4), 10) == (NOW, {"b": 4})


def test_a_planned_task_holds_its_room_for_its_run_only():
    profile = Profile(NOW, nodes(a=8), [], nodes(a=8))
    profile.take(NOW, 100, {"a": 8}, 0.0)
    assert profile.earliest(req(1, 1, 8), 10) == (NOW + 100, {"a": 8})
    profile.take(NOW + 100, None, {"a": 4}, 0.0)  # no time limit: for ever
    assert profile.earliest(req(1, 1, 8), 10) is None
    assert profile.earliest(req(1, 1, 4), None) == (NOW + 100, {"a": 4})


def test_a_task_past_its_planned_end_is_not_free_room_now():
    # Found by the chaos run: an overdue task's room counted as free at this instant let a
    # backfilled task be placed on a node that had none (6 GPUs promised on a 4-GPU node).
    holders = [running(9, {"a": 8}, NOW - 10)]  # over its time limit, still running
    queue = [req(1, 1, 6, run_s=500), req(2, 1, 2, run_s=5)]
    decision = decide(queue, nodes(a=0, b=4), TOTALS, policy=BACKFILL, now=NOW, running=holders)
    assert decision.reservations == {1: (NOW + 1, {"a": 6})}  # a second from now, on a
    assert [(r.key, where) for r, where in decision.admitted] == [(2, {"b": 2})]  # never on a


def test_a_release_never_makes_a_node_larger_than_it_is():
    profile = Profile(NOW, nodes(a=8), [Release(NOW + 5, {"a": 8})], nodes(a=8))
    assert profile.room_at(NOW + 10) == nodes(a=8)


# --- EASY backfill -----------------------------------------------------------------------------


def test_a_short_task_backfills_before_the_reservation():
    # a is busy until +100; the head needs both nodes: its reservation is at +100.
    holders = [running(9, {"a": 8}, NOW + 100)]
    queue = [req(1, 2, 8, run_s=500), req(2, 1, 4, run_s=90), req(3, 1, 4, run_s=200)]
    decision = decide(queue, nodes(a=0, b=8), TOTALS, policy=BACKFILL, now=NOW, running=holders)
    assert [r.key for r, _ in decision.admitted] == [2]  # ends at +90, before the head starts
    assert decision.reservations == {1: (NOW + 100, {"a": 8, "b": 8})}
    assert "reserved for an earlier task" in decision.waiting[3]  # would still run at +100
    assert decision.short == {1, 3}


def test_a_long_task_may_use_room_the_reservation_leaves_spare():
    holders = [running(9, {"a": 8}, NOW + 100)]
    queue = [req(1, 1, 8, run_s=500), req(2, 1, 4, run_s=10_000), req(3, 1, 4, run_s=None)]
    decision = decide(queue, nodes(a=0, b=8, c=8), nodes(a=8, b=8, c=8), policy=BACKFILL, now=NOW, running=holders)
    # The head fits now on b or c... it starts at once; nothing is reserved.
    assert [r.key for r, _ in decision.admitted] == [1, 2, 3]
    holders = [running(9, {"a": 8}, NOW + 100), running(8, {"b": 8}, NOW + 300)]
    queue = [req(1, 2, 8, run_s=500), req(2, 1, 4, run_s=10_000), req(3, 1, 4, run_s=None)]
    decision = decide(queue, nodes(a=0, b=0, c=8), nodes(a=8, b=8, c=8), policy=BACKFILL, now=NOW, running=holders)
    # The head is planned at +100 on a and c (best fit): c has no spare room, nothing passes.
    assert decision.reservations[1][0] == NOW + 100
    assert decision.admitted == []
    assert "it has no time limit" in decision.waiting[3]


def test_without_planned_ends_nothing_passes_the_blocked_task():
    holders = [running(9, {"a": 8}, None)]  # no time limit: its end cannot be planned
    queue = [req(1, 2, 8, run_s=500), req(2, 1, 4, run_s=10)]
    decision = decide(queue, nodes(a=0, b=8), TOTALS, policy=BACKFILL, now=NOW, running=holders)
    assert decision.admitted == []
    assert "cannot be planned" in decision.waiting[2]


def test_backfill_never_delays_the_reservation_whatever_the_order():
    holders = [running(9, {"a": 8}, NOW + 100)]
    queue = [req(1, 2, 8, run_s=50), req(2, 1, 8, run_s=120), req(3, 1, 8, run_s=60), req(4, 1, 8, run_s=30)]
    for shortest_first in (False, True):
        decision = decide(
            queue, nodes(a=0, b=8), TOTALS, policy=BACKFILL, now=NOW, running=holders, shortest_first=shortest_first
        )
        started = [r for r, _ in decision.admitted]
        assert all(NOW + (r.run_s or 0) <= NOW + 100 for r in started)
        assert decision.reservations[1][0] == NOW + 100
    # In queue order, the 60 s task goes first; shortest first, the 30 s one.
    in_order = decide(queue, nodes(a=0, b=8), TOTALS, policy=BACKFILL, now=NOW, running=holders)
    shortest = decide(queue, nodes(a=0, b=8), TOTALS, policy=BACKFILL, now=NOW, running=holders, shortest_first=True)
    assert [r.key for r, _ in in_order.admitted] == [3]
    assert [r.key for r, _ in shortest.admitted] == [4]


def test_strict_fifo_blocks_where_backfill_fills():
    holders = [running(9, {"a": 8}, NOW + 100)]
    queue = [req(1, 2, 8, run_s=500), req(2, 1, 8, run_s=90)]
    strict = decide(queue, nodes(a=0, b=8), TOTALS, policy=STRICT_FIFO, now=NOW, running=holders)
    assert strict.admitted == []


# --- Limits --------------------------------------------------------------------------------------


def test_a_task_over_its_users_limit_waits_and_does_not_block_others():
    holders = [running(9, {"a": 4}, NOW + 100, user="bob")]
    caps = {"bob": Caps(max_gpus=6)}
    queue = [req(1, 1, 4, 50, user="bob"), req(2, 1, 4, 50, user="carol")]
    decision = decide(queue, nodes(a=4, b=8), TOTALS, policy=STRICT_FIFO, now=NOW, running=holders, caps=caps)
    assert [r.key for r, _ in decision.admitted] == [2]
    assert decision.waiting[1] == (
        "waits for its user's limit: bob has 4 GPUs in use and this task needs 4; max_running_gpus is 6"
    )
    assert 1 not in decision.short


def test_the_task_limit_counts_what_this_pass_admits():
    caps = {"bob": Caps(max_tasks=2)}
    queue = [req(i, 1, 1, 50, user="bob") for i in range(3)]
    decision = decide(queue, nodes(a=8), nodes(a=8), policy=BACKFILL, now=NOW, caps=caps)
    assert [r.key for r, _ in decision.admitted] == [0, 1]
    assert decision.waiting[2] == "waits for its user's limit: bob runs 2 tasks; max_running_tasks is 2"


def test_a_task_larger_than_its_users_limit_says_it_can_never_start():
    decision = decide([req(1, 2, 8, user="bob")], TOTALS, TOTALS, caps={"bob": Caps(max_gpus=8)})
    assert decision.waiting[1] == (
        "needs 16 GPUs, more than bob's max_running_gpus of 8: it cannot start under this limit"
    )


# --- Preemption ----------------------------------------------------------------------------------


def test_the_fewest_most_recently_started_victims():
    free = nodes(a=0, b=0)
    old_big = running(1, {"a": 8}, None, preemptible=True, started_at=10)
    new_small = running(2, {"b": 4}, None, preemptible=True, started_at=30)
    newer_small = running(3, {"b": 4}, None, preemptible=True, started_at=40)
    candidates = [newer_small, new_small, old_big]  # most recent first
    assert choose_victims(req(9, 1, 8, priority=10), free, candidates) == [old_big]  # one beats two
    assert choose_victims(req(9, 1, 4, priority=10), free, candidates) == [newer_small]
    assert choose_victims(req(9, 2, 8, priority=10), free, candidates) == [newer_small, new_small, old_big]
    assert choose_victims(req(9, 3, 8, priority=10), free, candidates) is None


def test_a_high_task_preempts_only_preemptible_tasks_of_lower_priority():
    holders = [
        running(1, {"a": 8}, NOW + 900, preemptible=False, started_at=NOW - 10),
        running(2, {"b": 8}, NOW + 900, preemptible=True, started_at=NOW - 20, priority=10),
    ]
    decision = decide([req(9, 1, 8, priority=10)], nodes(a=0, b=0), TOTALS, running=holders, preemption=True)
    assert decision.preempt == {}  # one is not preemptible, the other is as high
    holders.append(running(3, {"c": 8}, NOW + 900, preemptible=True, started_at=NOW - 30))
    totals = nodes(a=8, b=8, c=8)
    decision = decide([req(9, 1, 8, priority=10)], nodes(a=0, b=0, c=0), totals, running=holders, preemption=True)
    assert decision.preempt == {3: 9}
    assert "preempting 1 task of lower priority" in decision.waiting[9]
    off = decide([req(9, 1, 8, priority=10)], nodes(a=0, b=0, c=0), totals, running=holders, preemption=False)
    assert off.preempt == {}


def test_no_second_round_of_victims_while_the_first_is_stopping():
    holders = [
        running(1, {"a": 8}, NOW + 60, preemptible=True, started_at=NOW - 10, stopping=True),
        running(2, {"b": 8}, NOW + 900, preemptible=True, started_at=NOW - 5),
    ]
    decision = decide([req(9, 1, 8, priority=10)], nodes(a=0, b=0), TOTALS, running=holders, preemption=True)
    assert decision.preempt == {}
    assert "waiting for 1 preempted task to stop" in decision.waiting[9]


# --- Estimated starts ----------------------------------------------------------------------------


def test_every_waiting_task_gets_a_planned_start():
    holders = [running(9, {"a": 8}, NOW + 100), running(8, {"b": 8}, NOW + 300)]
    queue = [req(1, 2, 8, run_s=500), req(2, 1, 8, run_s=50), req(3, 1, 8, run_s=1000), req(4, 1, 8)]
    decision = decide(queue, nodes(a=0, b=0), TOTALS, policy=BACKFILL, now=NOW, running=holders, estimate=10)
    # 1 at +300 (both nodes), 2 backfills at +100 on a (ends +150), 3 after 1 ends (+800),
    # 4 (no limit) after that on the other node.
    assert decision.estimates == {1: NOW + 300, 2: NOW + 100, 3: NOW + 800, 4: NOW + 800}


def test_under_strict_fifo_no_estimate_is_before_the_one_ahead():
    holders = [running(9, {"a": 8}, NOW + 100), running(8, {"b": 8}, NOW + 300)]
    queue = [req(1, 2, 8, run_s=500), req(2, 1, 8, run_s=50)]
    decision = decide(queue, nodes(a=0, b=0), TOTALS, policy=STRICT_FIFO, now=NOW, running=holders, estimate=10)
    assert decision.estimates == {1: NOW + 300, 2: NOW + 800}


def test_estimates_stop_at_the_depth_and_unknown_ones_are_none():
    holders = [running(9, {"a": 8, "b": 8}, None)]
    queue = [req(i, 1, 8, run_s=10) for i in range(5)]
    decision = decide(queue, nodes(a=0, b=0), TOTALS, policy=BEST_EFFORT, now=NOW, running=holders, estimate=3)
    assert decision.estimates == {0: None, 1: None, 2: None}


BEST_EFFORT = "best_effort_fifo"
