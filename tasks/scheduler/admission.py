"""Gang admission, per node: which waiting tasks can start now, and why the others wait.

Pure functions over plain numbers (the seed-004 Allocator idea), so that policies are easy to
swap and to test. A task needs ``nnodes`` distinct worker nodes that each have
``gpus_per_node`` GPUs free; counting only the cluster's total (what verl checks) is not
enough, because verl then waits forever for its placement groups on a fragmented cluster.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

STRICT_FIFO = "strict_fifo"
BEST_EFFORT_FIFO = "best_effort_fifo"
POLICIES = (STRICT_FIFO, BEST_EFFORT_FIFO)


@dataclass(frozen=True)
class Request:
    key: int  # the task's primary key
    nnodes: int
    gpus_per_node: int


@dataclass
class Decision:
    admitted: list[tuple[Request, dict[str, int]]]  # each with {node_id: gpus}
    waiting: dict[int, str]  # task key -> the reason it waits
    # Keys of the tasks that had their turn and lack resources (PENDING_RESOURCES); the
    # others wait behind them.
    short: set[int]


def effective_free(
    totals: Mapping[str, float], ray_free: Mapping[str, float], promised: Mapping[str, int]
) -> dict[str, float]:
    """Free GPUs per worker node once Argus's own promises are counted.

    A promise is what Argus reserved on a node for an attempt that may not have allocated its
    placement groups yet. Ray's own count includes the allocations already made, so each node
    is charged the larger of the two: an allocated attempt is not counted twice, and a burst of
    submissions is never counted as free room.
    """
    free = {}
    for node, total in totals.items():
        used = max(total - ray_free.get(node, 0.0), float(promised.get(node, 0)))
        free[node] = max(0.0, total - used)
    return free


def place(request: Request, free: Mapping[str, float]) -> dict[str, int] | None:
    """``nnodes`` distinct nodes with enough free GPUs each, or None.

    Best fit (the fullest nodes that still fit first) keeps large holes for large requests.
    """
    fitting = sorted((gpus, node) for node, gpus in free.items() if gpus >= request.gpus_per_node)
    if len(fitting) < request.nnodes:
        return None
    return {node: request.gpus_per_node for _, node in fitting[: request.nnodes]}


def can_ever_fit(request: Request, totals: Mapping[str, float]) -> bool:
    return sum(1 for total in totals.values() if total >= request.gpus_per_node) >= request.nnodes


def _plural(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


def shortfall(request: Request, free: Mapping[str, float], totals: Mapping[str, float]) -> str:
    """Why it cannot start now, in words: "needs 2 nodes with 3 free GPUs; 1 node has them"."""
    need = f"needs {_plural(request.nnodes, 'node')} with {_plural(request.gpus_per_node, 'free GPU')}"
    if not totals:
        return f"{need}; no worker node has joined the cluster"
    if not can_ever_fit(request, totals):
        big = sum(1 for total in totals.values() if total >= request.gpus_per_node)
        return (
            f"{need}; the cluster has {_plural(len(totals), 'worker node')}, {big} with "
            f"{_plural(request.gpus_per_node, 'GPU')} or more: it can start only when more nodes join"
        )
    have = sum(1 for gpus in free.values() if gpus >= request.gpus_per_node)
    verb = "has" if have == 1 else "have"
    return f"{need}; {_plural(have, 'node')} {verb} them now"


def _subtract(free: dict[str, float], placement: Mapping[str, int]) -> None:
    for node, gpus in placement.items():
        free[node] -= gpus


def decide(
    queue: Iterable[Request],
    free: Mapping[str, float],
    totals: Mapping[str, float],
    *,
    policy: str = STRICT_FIFO,
    max_new: int | None = None,
) -> Decision:
    """Walk the queue in order and admit what fits.

    strict_fifo: the first task that cannot start blocks everyone behind it (the seeds'
    behaviour: no starvation of large tasks). best_effort_fifo: a task that fits may pass one
    that does not (Kueue's BestEffortFIFO). Under both, a task that can never fit the cluster
    as it stands does not block the others: it waits for nodes to join.
    """
    free = dict(free)
    decision = Decision(admitted=[], waiting={}, short=set())
    blocked = False
    failed_shapes: set[tuple[int, int]] = set()
    # A shortfall depends only on the shape and the free room, which changes only when a task
    # is admitted: computed once per shape in between, a long best-effort queue stays cheap.
    reasons: dict[tuple[int, int], str] = {}
    for request in queue:
        if blocked:
            # Not naming the head task: when it starts, every reason behind it would change,
            # and a long queue would be rewritten on each admission. Its position says where.
            decision.waiting[request.key] = "waiting its turn: the head of the queue goes first (strict FIFO)"
            continue
        if max_new is not None and len(decision.admitted) >= max_new:
            decision.waiting[request.key] = "the limit of running tasks is reached (ARGUS_MAX_RUNNING_TASKS)"
            continue
        # Free room only shrinks during a pass: a shape at least as large as one that failed
        # fails too, which keeps a long best-effort queue cheap.
        doomed = any(request.nnodes >= n and request.gpus_per_node >= g for n, g in failed_shapes)
        placement = None if doomed else place(request, free)
        if placement is not None:
            _subtract(free, placement)
            decision.admitted.append((request, placement))
            reasons.clear()
            continue
        shape = (request.nnodes, request.gpus_per_node)
        failed_shapes.add(shape)
        if shape not in reasons:
            reasons[shape] = shortfall(request, free, totals)
        decision.waiting[request.key] = reasons[shape]
        decision.short.add(request.key)
        if policy == STRICT_FIFO and can_ever_fit(request, totals):
            blocked = True
    return decision
