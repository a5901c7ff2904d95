"""A task of several verl resource pools (trainer + rollout, reward…), in the pure core: each pool a
per-node gang of its own, every pool at once, pools sharing a node that has room for both, CPUs
following GPUs on every node, and the pool that does not fit named in the reason."""

from __future__ import annotations

from tasks.queue.request import Request
from tasks.scheduler.admission import BACKFILL, STRICT_FIFO, Caps, Running, decide
from tasks.scheduler.plan import Profile, Release
from tasks.scheduler.rooms import Room, can_ever_fit, place, place_pools, shortfall
from tasks.specs.pools import Pool

CPUS_PER_GPU = 3.0


def task(key: int, nnodes: int, gpus: int, *more: Pool, run_s: float | None = None, user: str = "") -> Request:
    """A request with verl's 3 CPUs per GPU on every pool."""
    return Request(key, nnodes, gpus, gpus * CPUS_PER_GPU, user, run_s, 0, tuple(more))


def nodes(**free: float) -> dict[str, Room]:
    """Nodes with these GPUs free and the CPUs beside them (3 per GPU, 2 spare)."""
    return {node: Room(g, g * CPUS_PER_GPU + 2) for node, g in free.items()}


ROLLOUT_1 = Pool("rollout", 1, 1)


def test_a_request_of_several_pools_needs_them_all_and_counts_every_gpu():
    request = task(1, 2, 4, Pool("rollout", 1, 2), Pool("reward", 1, 1))
    assert request.gpus == 8 + 2 + 1
    assert [name for name, _ in request.gangs()] == ["trainer", "rollout", "reward"]


def test_each_pool_is_a_per_node_gang_of_its_own():
    # Trainer 2x4 needs two nodes with 4 free each; the rollout's 1 GPU needs one more somewhere.
    request = task(1, 2, 4, ROLLOUT_1)
    assert place(request, nodes(a=4, b=4)) is None
    assert place(request, nodes(a=4, b=4, c=1)) == {"a": 4, "b": 4, "c": 1}
    # Two pools may share a node with room for both.
    assert place_pools(request, nodes(a=5, b=4)) == {"trainer": {"a": 4, "b": 4}, "rollout": {"a": 1}}
    assert place(request, nodes(a=5, b=4)) == {"a": 5, "b": 4}


def test_a_pool_needs_its_nodes_even_when_the_total_is_there():
    # Rollout 2x2: two distinct nodes with 2 each; 9 free GPUs in all, but after the trainer's 1x4
    # only one node has 2 left.
    request = task(1, 1, 4, Pool("rollout", 2, 2))
    assert place(request, nodes(a=4, b=5)) is None
    assert place_pools(request, nodes(a=4, b=2, c=2)) == {"trainer": {"a": 4}, "rollout": {"b": 2, "c": 2}}


def test_a_node_shared_by_two_pools_needs_the_cpus_of_both():
    request = task(1, 1, 2, ROLLOUT_1)
    free = {"a": Room(3, 9), "b": Room(0, 0)}  # 3 GPUs, 9 CPUs: room for 2 + 1 GPUs and their 9 CPUs
    assert place(request, free) == {"a": 3}
    assert place(request, {"a": Room(3, 8)}) is None  # the rollout's GPU has no CPUs left beside it
    assert request.cpus_on({"a": 3}) == {"a": 9.0}


def test_a_later_pool_order_is_tried_when_the_first_fails():
    # Largest first puts the reward's 3 on b (best fit), leaving one node with 2 for the trainer's
    # 2x2; the trainer first takes 2 on each, and a keeps 3 for the reward.
    request = task(1, 2, 2, Pool("reward", 1, 3))
    assert place_pools(request, nodes(a=5, b=3)) == {"trainer": {"b": 2, "a": 2}, "reward": {"a": 3}}


def test_can_ever_fit_asks_the_whole_cluster_for_every_pool_at_once():
    totals = nodes(a=4, b=4)
    assert can_ever_fit(task(1, 1, 4, Pool("rollout", 1, 4)), totals)
    assert not can_ever_fit(task(1, 1, 4, Pool("rollout", 1, 4), ROLLOUT_1), totals)


def test_the_reason_names_the_pool_that_does_not_fit_now():
    totals = nodes(a=4, b=4)
    request = task(1, 1, 4, Pool("rollout", 1, 2))
    assert shortfall(request, nodes(a=4, b=1), totals) == (
        "its rollout pool needs 1 node with 2 free GPUs; 0 nodes have them now beside its trainer pool"
    )
    assert shortfall(request, nodes(a=2, b=2), totals) == (
        "its trainer pool needs 1 node with 4 free GPUs; 0 nodes have them now"
    )


def test_the_reason_says_which_pool_can_never_fit_and_when_together_they_cannot():
    totals = nodes(a=4, b=4)
    assert shortfall(task(1, 1, 4, Pool("rollout", 1, 8)), totals, totals) == (
        "its rollout pool needs 1 node with 8 free GPUs; the cluster has 2 worker nodes, 0 with 8 GPUs or more: "
        "it can start only when more nodes join"
    )
    assert shortfall(task(1, 2, 4, ROLLOUT_1), totals, totals) == (
        "needs its pools at once (trainer 2x4 + rollout 1x1 GPUs, each pool on nodes of its own); the cluster "
        "cannot hold them all: it can start only when more nodes join"
    )


def test_decide_admits_only_when_every_pool_fits_and_charges_every_node():
    totals = nodes(a=4, b=4)
    big = task(1, 1, 4, Pool("rollout", 1, 4))
    small = task(2, 1, 1)
    decision = decide([big, small], nodes(a=4, b=3), totals, policy=STRICT_FIFO)
    assert decision.admitted == []
    assert decision.waiting[1].startswith("its rollout pool needs 1 node with 4 free GPUs")
    decision = decide([big, small], nodes(a=4, b=4), totals, policy=STRICT_FIFO)
    assert decision.admitted == [(big, {"a": 4, "b": 4})]
    assert "strict FIFO" not in decision.waiting[2] and 2 in decision.short  # no room left on either node


def test_a_shared_node_keeps_the_cpus_of_both_pools_from_later_tasks():
    totals = {"a": Room(8, 26)}
    pair = task(1, 1, 4, Pool("rollout", 1, 2))  # 6 GPUs, 18 CPUs on a
    cpu_hungry = Request(2, 1, 1, 9.0)  # 1 GPU, 9 CPUs: GPUs are left (2), CPUs are not (8)
    decision = decide([pair, cpu_hungry], totals, totals, policy=BACKFILL)
    assert [request.key for request, _ in decision.admitted] == [1]
    assert "too few free CPUs" in decision.waiting[2]


def test_a_users_gpu_limit_counts_every_pool():
    totals = nodes(a=8)
    request = task(1, 1, 4, Pool("rollout", 1, 2), user="alice")
    decision = decide([request], totals, totals, caps={"alice": Caps(max_gpus=5)})
    assert decision.waiting[1] == (
        "needs 6 GPUs, more than alice's max_running_gpus of 5: it cannot start under this limit"
    )


def test_backfill_reserves_every_pool_and_plans_the_start():
    totals = nodes(a=4, b=4)
    now = 1000.0
    # One running task holds a until now + 100.
    running = [Running(9, {"a": 4}, 12.0, ends_at=now + 100)]
    first = task(1, 1, 4, Pool("rollout", 1, 4), run_s=50.0)
    short = task(2, 1, 2, run_s=50.0)  # fits on b now and ends before the reservation: backfilled
    long = task(3, 1, 2, run_s=500.0)  # would still hold b when the reservation starts
    decision = decide(
        [first, short, long], nodes(a=0, b=4), totals, policy=BACKFILL, now=now, running=running, estimate=5
    )
    assert decision.reservations[1] == (now + 100, {"a": 4, "b": 4})
    assert [request.key for request, _ in decision.admitted] == [2]
    assert decision.waiting[3].startswith("the room it needs is reserved for an earlier task")
    assert decision.estimates[1] == now + 100


def test_a_profile_plans_several_pools_at_once():
    totals = nodes(a=4, b=4)
    profile = Profile(0.0, nodes(a=0, b=2), [Release(10.0, {"a": 4}, 12.0), Release(20.0, {"b": 2}, 6.0)], totals)
    request = task(1, 1, 4, Pool("rollout", 1, 4))
    assert profile.earliest(request, 30.0) == (20.0, {"a": 4, "b": 4})
    profile.take(20.0, 30.0, {"a": 4, "b": 4}, request.cpus_on({"a": 4, "b": 4}))
    assert profile.room_at(25.0) == {"a": Room(0, 2), "b": Room(0, 2)}


def test_a_running_task_of_several_pools_frees_each_nodes_room_for_a_preemption():
    totals = nodes(a=4, b=4)
    victim = Running(9, {"a": 4, "b": 1}, {"a": 12.0, "b": 3.0}, user="bob", preemptible=True, started_at=5.0)
    high = Request(1, 1, 4, 12.0, "alice", None, 10, (Pool("rollout", 1, 4),))
    decision = decide([high], nodes(a=0, b=3), totals, running=[victim], preemption=True)
    assert decision.preempt == {9: 1}
    assert "preempting 1 task of lower priority" in decision.waiting[1]
