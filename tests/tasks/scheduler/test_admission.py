from __future__ import annotations

from tasks.queue.request import Request
from tasks.scheduler.admission import BEST_EFFORT_FIFO, STRICT_FIFO, decide
from tasks.scheduler.rooms import Room, effective_free, place, shortfall


def req(key: int, nnodes: int, gpus: int, cpus: float = 0.0) -> Request:
    return Request(key, nnodes, gpus, cpus)


def gpus(**nodes: float) -> dict[str, Room]:
    """Nodes with these GPUs and CPUs to spare (for the tests where only GPUs matter)."""
    return {node: Room(g, 100.0) for node, g in nodes.items()}


TOTALS = gpus(a=4, b=4)


def test_a_gang_needs_that_many_nodes_each_with_enough_free():
    assert place(req(1, 2, 3), gpus(a=4, b=3)) == {"a": 3, "b": 3}
    # Six GPUs free in all, but only one node has three: verl's total-only check would pass.
    assert place(req(1, 2, 3), gpus(a=4, b=2)) is None


def test_best_fit_keeps_the_big_hole():
    assert place(req(1, 1, 2), gpus(a=4, b=2)) == {"b": 2}


def test_promises_count_until_ray_shows_the_allocation():
    # b: Argus promised 4 GPUs and 12 CPUs to an attempt Ray has not allocated yet.
    totals = {"a": Room(4, 14), "b": Room(4, 14)}
    promised = {"b": Room(4, 12)}
    assert effective_free(totals, totals, promised) == {"a": Room(4, 14), "b": Room(0, 2)}
    # Once Ray allocated it, the promise is not counted twice.
    allocated = {"a": Room(4, 14), "b": Room(0, 2)}
    assert effective_free(totals, allocated, promised) == {"a": Room(4, 14), "b": Room(0, 2)}


def test_a_burst_never_overcommits():
    decision = decide([req(i, 1, 4) for i in range(4)], gpus(a=4, b=4), TOTALS)
    assert [r.key for r, _ in decision.admitted] == [0, 1]
    assert decision.short == {2}  # the head of what is left lacks resources...
    assert "strict FIFO" in decision.waiting[3]  # ...and blocks the rest


def test_best_effort_lets_a_small_task_pass():
    queue = [req(1, 2, 4), req(2, 1, 2)]
    strict = decide(queue, gpus(a=4, b=2), TOTALS, policy=STRICT_FIFO)
    assert strict.admitted == []
    best = decide(queue, gpus(a=4, b=2), TOTALS, policy=BEST_EFFORT_FIFO)
    assert [r.key for r, _ in best.admitted] == [2]
    assert best.waiting[1] == "needs 2 nodes with 4 free GPUs; 1 node has them now"


def test_a_task_that_can_never_fit_does_not_block_the_queue():
    decision = decide([req(1, 3, 4), req(2, 1, 1)], gpus(a=4, b=4), TOTALS)
    assert [r.key for r, _ in decision.admitted] == [2]
    assert "can start only when more nodes join" in decision.waiting[1]


def test_the_running_limit_holds_tasks_back():
    decision = decide([req(1, 1, 1), req(2, 1, 1)], gpus(a=4, b=4), TOTALS, max_new=1)
    assert [r.key for r, _ in decision.admitted] == [1]
    assert "ARGUS_MAX_RUNNING_TASKS" in decision.waiting[2]


def test_reasons_in_words():
    assert shortfall(req(1, 2, 3), gpus(a=4, b=1), TOTALS) == "needs 2 nodes with 3 free GPUs; 1 node has them now"
    assert shortfall(req(1, 1, 1), {}, {}) == "needs 1 node with 1 free GPU; no worker node has joined the cluster"


# --- CPUs, counted as verl asks them: 3 per GPU on the same node ---------------------------


def test_a_node_with_the_gpus_but_not_the_cpus_is_passed_over():
    free = {"a": Room(4, 6), "b": Room(4, 14)}
    assert place(req(1, 1, 4, 12), free) == {"b": 4}
    assert place(req(1, 2, 4, 12), free) is None
    assert place(req(1, 2, 4, 0), free) == {"a": 4, "b": 4}  # the CPU check off


def test_the_reason_names_the_cpus_when_they_are_short():
    totals = {"a": Room(4, 14), "b": Room(4, 14)}
    free = {"a": Room(4, 5), "b": Room(0, 14)}
    reason = shortfall(req(1, 1, 4, 12), free, totals)
    assert reason == (
        "needs 1 node with 4 free GPUs; 0 nodes have them now "
        "(1 more node with the GPUs but too few free CPUs: 12 CPUs wanted, at most 5 free)"
    )


def test_a_cluster_whose_nodes_lack_the_cpus_says_so():
    totals = {"a": Room(4, 4)}
    reason = shortfall(req(1, 1, 4, 12), totals, totals)
    assert reason == (
        "needs 1 node with 4 free GPUs and 12 CPUs each (ARGUS_CPUS_PER_GPU, as verl's bundles ask); "
        "the worker nodes with the GPUs have at most 4 CPUs: it can start only when larger nodes join"
    )


def test_promised_cpus_hold_a_node_until_the_attempt_ends():
    totals = {"a": Room(8, 26)}
    decision = decide([req(1, 1, 4, 12), req(2, 1, 4, 12), req(3, 1, 1, 3)], totals, totals)
    # Two 4-GPU tasks take 24 of 26 CPUs; the third's 3 CPUs are not there though a GPU is not.
    assert [r.key for r, _ in decision.admitted] == [1, 2]
    assert decision.short == {3}
