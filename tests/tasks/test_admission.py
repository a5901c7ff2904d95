from __future__ import annotations

from tasks.scheduler.admission import BEST_EFFORT_FIFO, STRICT_FIFO, Request, decide, effective_free, place, shortfall


def req(key: int, nnodes: int, gpus: int) -> Request:
    return Request(key, nnodes, gpus)


TOTALS = {"a": 4.0, "b": 4.0}


def test_a_gang_needs_that_many_nodes_each_with_enough_free():
    assert place(req(1, 2, 3), {"a": 4, "b": 3}) == {"a": 3, "b": 3}
    # Six GPUs free in all, but only one node has three: verl's total-only check would pass.
    assert place(req(1, 2, 3), {"a": 4, "b": 2}) is None


def test_best_fit_keeps_the_big_hole():
    assert place(req(1, 1, 2), {"a": 4, "b": 2}) == {"b": 2}


def test_promises_count_until_ray_shows_the_allocation():
    # b: Argus promised 4 to an attempt Ray has not allocated yet -> nothing free there.
    assert effective_free(TOTALS, {"a": 4, "b": 4}, {"b": 4}) == {"a": 4.0, "b": 0.0}
    # Once Ray allocated it, the promise is not counted twice.
    assert effective_free(TOTALS, {"a": 4, "b": 0}, {"b": 4}) == {"a": 4.0, "b": 0.0}


def test_a_burst_never_overcommits():
    decision = decide([req(i, 1, 4) for i in range(4)], {"a": 4, "b": 4}, TOTALS)
    assert [r.key for r, _ in decision.admitted] == [0, 1]
    assert decision.short == {2}  # the head of what is left lacks resources...
    assert "strict FIFO" in decision.waiting[3]  # ...and blocks the rest


def test_best_effort_lets_a_small_task_pass():
    queue = [req(1, 2, 4), req(2, 1, 2)]
    strict = decide(queue, {"a": 4, "b": 2}, TOTALS, policy=STRICT_FIFO)
    assert strict.admitted == []
    best = decide(queue, {"a": 4, "b": 2}, TOTALS, policy=BEST_EFFORT_FIFO)
    assert [r.key for r, _ in best.admitted] == [2]
    assert best.waiting[1] == "needs 2 nodes with 4 free GPUs; 1 node has them now"


def test_a_task_that_can_never_fit_does_not_block_the_queue():
    decision = decide([req(1, 3, 4), req(2, 1, 1)], {"a": 4, "b": 4}, TOTALS)
    assert [r.key for r, _ in decision.admitted] == [2]
    assert "can start only when more nodes join" in decision.waiting[1]


def test_the_running_limit_holds_tasks_back():
    decision = decide([req(1, 1, 1), req(2, 1, 1)], {"a": 4, "b": 4}, TOTALS, max_new=1)
    assert [r.key for r, _ in decision.admitted] == [1]
    assert "ARGUS_MAX_RUNNING_TASKS" in decision.waiting[2]


def test_reasons_in_words():
    assert shortfall(req(1, 2, 3), {"a": 4, "b": 1}, TOTALS) == "needs 2 nodes with 3 free GPUs; 1 node has them now"
    assert shortfall(req(1, 1, 1), {}, {}) == "needs 1 node with 1 free GPU; no worker node has joined the cluster"
