"""verl's CPU actors in the pure core: a task of verl's experimental trainers needs, beside every
pool's per-node gang, one node with room for each actor's CPUs (any node, GPUs or not); the
actors' CPUs are charged where they were planned, and the actor that does not fit is named."""

from __future__ import annotations

from tasks.queue.request import Placement, Request, actor_cpus
from tasks.scheduler.admission import BACKFILL, BEST_EFFORT_FIFO, Running, decide
from tasks.scheduler.plan import Profile
from tasks.scheduler.rooms import Room, can_ever_fit, place, shortfall
from tasks.specs.pools import FULLY_ASYNC, ONE_STEP_OFF, Pool, command_actors

CPUS_PER_GPU = 3.0
ROLLOUT_1 = Pool("rollout", 1, 1)
FULLY_ASYNC_ACTORS = command_actors(FULLY_ASYNC)  # 1 + 10 + 10 + 2 CPUs
ONE_STEP_OFF_ACTORS = command_actors(ONE_STEP_OFF)  # 10 CPUs
ACTORS_WORDS = (
    " (verl's actors outside its GPU bundles: FullyAsyncTaskRunner 1 + FullyAsyncTrainer 10 + "
    "FullyAsyncRollouter 10 + MessageQueue 2 CPUs)"
)


def fully_async(key: int = 1, gpus: int = 1, *, run_s: float | None = None) -> Request:
    """verl's fully-async trainer: trainer 1 x ``gpus``, rollout 1 x ``gpus``, its four CPU actors."""
    pool = Pool("rollout", 1, gpus)
    return Request(key, 1, gpus, gpus * CPUS_PER_GPU, "", run_s, 0, (pool,), FULLY_ASYNC_ACTORS)


def worker(gpus: float, cpus: float) -> Room:
    return Room(gpus, cpus)


def session_cluster() -> dict[str, Room]:
    """The tests' Ray cluster: two workers of 4 GPUs and 3 x 4 + 2 CPUs."""
    return {"a": worker(4, 14), "b": worker(4, 14)}


def test_verl_declares_these_cpus():
    assert [(actor.name, actor.cpus) for actor in FULLY_ASYNC_ACTORS] == [
        ("FullyAsyncTaskRunner", 1),
        ("FullyAsyncTrainer", 10),
        ("FullyAsyncRollouter", 10),
        ("MessageQueue", 2),
    ]
    assert [(actor.name, actor.cpus) for actor in ONE_STEP_OFF_ACTORS] == [("OneStepTaskRunner", 10)]
    assert command_actors("verl.trainer.main_ppo") == ()  # see tasks.specs.pools: none counted


def test_the_actors_cpus_sit_beside_the_pools_on_one_node():
    # One node: the pools' 2 GPUs and 6 CPUs, and 23 more for the actors.
    assert place(fully_async(), {"a": worker(2, 28)}) is None
    placement = place(fully_async(), {"a": worker(2, 29)})
    assert placement == {"a": 2}
    assert actor_cpus(placement) == {"a": 23.0}
    assert fully_async().cpus_on(placement) == {"a": 29.0}


def test_an_actor_may_take_a_node_without_gpus_and_each_actor_any_node():
    # The pools fill n0's CPUs; the actors (23 CPUs) go on two CPU-only nodes of 12, each actor
    # whole on one of them: 10 + 2 on one, 10 + 1 on the other.
    free = {"n0": worker(2, 6), "c1": worker(0, 12), "c2": worker(0, 12)}
    placement = place(fully_async(), free)
    assert isinstance(placement, Placement)
    assert placement == {"n0": 2, "c1": 0, "c2": 0}
    assert actor_cpus(placement) == {"c1": 12.0, "c2": 11.0}
    assert fully_async().cpus_on(placement) == {"n0": 6.0, "c1": 12.0, "c2": 11.0}
    # 24 CPUs in all but no node with 10: the trainer's actor fits nowhere.
    assert place(fully_async(), {"n0": worker(2, 6), **{f"c{i}": worker(0, 8) for i in range(3)}}) is None


def test_a_task_without_actors_is_placed_as_before():
    request = Request(1, 1, 1, CPUS_PER_GPU, more=(ROLLOUT_1,))
    placement = place(request, {"a": worker(2, 6)})
    assert type(placement) is dict and placement == {"a": 2}
    assert actor_cpus(placement) == {}


def test_on_the_session_cluster_the_one_step_off_trainer_fits_and_the_fully_async_one_never_does():
    one_step_off = Request(1, 1, 1, CPUS_PER_GPU, "", None, 0, (ROLLOUT_1,), ONE_STEP_OFF_ACTORS)
    placement = place(one_step_off, session_cluster())
    assert placement is not None and sum(placement.values()) == 2
    assert sorted(actor_cpus(placement).values()) == [10.0]
    # 6 CPUs of bundles and 23 of actors: 29 of the 28 there are.
    assert not can_ever_fit(fully_async(), session_cluster())
    assert shortfall(fully_async(), session_cluster(), session_cluster()) == (
        "its FullyAsyncRollouter actor needs 10 CPUs on one worker node beside its pools (trainer 1x1 + rollout "
        "1x1) and its other actors; the worker nodes would have at most 8 CPUs left on one: it can start only "
        "when larger nodes join" + ACTORS_WORDS
    )


def test_the_reason_names_the_actor_whose_cpus_are_short_now():
    totals = {"a": worker(4, 40)}
    # The pools' 6 CPUs are free, and 9 more: the largest actor (the trainer's 10) has no node.
    assert shortfall(fully_async(), {"a": worker(4, 15)}, totals) == (
        "its FullyAsyncTrainer actor needs 10 CPUs free on one worker node beside its pools; at most 9 CPUs free "
        "on one now" + ACTORS_WORDS
    )
    # Room for both 10s but not the MessageQueue's 2 as well.
    assert shortfall(fully_async(), {"a": worker(4, 6 + 21)}, totals).startswith(
        "its MessageQueue actor needs 2 CPUs free on one worker node beside its pools; at most 1 CPU free on one now"
    )
    # A pool that does not fit is named first, as before.
    assert shortfall(fully_async(), {"a": worker(0, 40)}, totals).startswith("its trainer pool needs 1 node")


def test_a_pass_charges_the_actors_cpus_where_it_planned_them():
    # One node of 8 GPUs and 50 CPUs: the first fully-async task takes 2 GPUs and 29 CPUs; the
    # second's pools fit in the 6 GPUs and 21 CPUs left, and its trainer's actor in the 15 left
    # after them, its rollouter's not.
    free = {"a": worker(8, 50)}
    one_pool = Request(3, 1, 2, 2 * CPUS_PER_GPU)
    decision = decide([fully_async(1), fully_async(2), one_pool], free, free, policy=BEST_EFFORT_FIFO)
    assert [(request.key, placement) for request, placement in decision.admitted] == [(1, {"a": 2}), (3, {"a": 2})]
    assert decision.waiting[2] == (
        "its FullyAsyncRollouter actor needs 10 CPUs free on one worker node beside its pools; at most 5 CPUs free "
        "on one now" + ACTORS_WORDS
    )


def test_a_reservation_holds_the_actors_cpus_too():
    # The node's 29 CPUs come back when the running task ends at t=100: the fully-async task is
    # planned then, and the profile holds its actors' 23 CPUs from then on.
    running = Running(9, {"a": 2}, {"a": 29.0}, ends_at=100.0)
    free = {"a": worker(2, 0)}
    totals = {"a": worker(4, 29)}
    decision = decide([fully_async(1, run_s=50.0)], free, totals, policy=BACKFILL, running=[running], estimate=1)
    assert decision.admitted == []
    start, where = decision.reservations[1]
    assert start == 100.0 and actor_cpus(where) == {"a": 23.0}
    profile = Profile(0.0, free, [], totals)
    found = profile.earliest(fully_async(1, run_s=50.0), 50.0)
    assert found is None  # 0 CPUs free and nothing comes back in this profile
    profile = Profile(0.0, {"a": worker(2, 29)}, [], totals)
    found = profile.earliest(fully_async(1, run_s=50.0), 50.0)
    assert found is not None
    profile.take(found[0], 50.0, found[1], fully_async().cpus_on(found[1]))
    assert profile.room_at(10.0) == {"a": Room(0.0, 0.0)}
