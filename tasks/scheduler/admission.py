"""Gang admission, per node: which waiting tasks can start now, and why the others wait.

Pure functions over plain numbers (the seed-004 Allocator idea), so that policies are easy to
swap and to test. A task needs ``nnodes`` distinct worker nodes that each have
``gpus_per_node`` GPUs and ``cpus_per_node`` CPUs free; counting only the cluster's total (what
verl checks) is not enough: verl then waits forever for its placement groups on a fragmented
cluster, and on a node with the GPUs but not the CPUs its ``{"CPU": 3, "GPU": 1}`` bundles
never place either (verl#6663).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

STRICT_FIFO = "strict_fifo"
BEST_EFFORT_FIFO = "best_effort_fifo"
POLICIES = (STRICT_FIFO, BEST_EFFORT_FIFO)


@dataclass(frozen=True)
class Room:
    """GPUs and CPUs on one node (free, total, promised: whichever the caller means)."""

    gpus: float
    cpus: float = 0.0

    def holds(self, gpus: float, cpus: float) -> bool:
        return self.gpus >= gpus and self.cpus >= cpus


@dataclass(frozen=True)
class Request:
    key: int  # the task's primary key
    nnodes: int
    gpus_per_node: int
    cpus_per_node: float = 0.0  # 0: CPUs are not checked

    @property
    def shape(self) -> tuple[int, int, float]:
        return (self.nnodes, self.gpus_per_node, self.cpus_per_node)


@dataclass
class Decision:
    admitted: list[tuple[Request, dict[str, int]]]  # each with {node_id: gpus}
    waiting: dict[int, str]  # task key -> the reason it waits
    # Keys of the tasks that had their turn and lack resources (PENDING_RESOURCES); the
    # others wait behind them.
    short: set[int]


def effective_free(
    totals: Mapping[str, Room], ray_free: Mapping[str, Room], promised: Mapping[str, Room]
) -> dict[str, Room]:
    """Free room per worker node once Argus's own promises are counted.

    A promise is what Argus reserved on a node for an attempt that may not have allocated its
    placement groups yet. Ray's own count includes the allocations already made, so each node
    is charged the larger of the two, per resource: an allocated attempt is not counted twice,
    and a burst of submissions is never counted as free room.
    """
    free = {}
    for node, total in totals.items():
        ray = ray_free.get(node, Room(0.0, 0.0))
        promise = promised.get(node, Room(0.0, 0.0))
        used_gpus = max(total.gpus - ray.gpus, promise.gpus)
        used_cpus = max(total.cpus - ray.cpus, promise.cpus)
        free[node] = Room(max(0.0, total.gpus - used_gpus), max(0.0, total.cpus - used_cpus))
    return free


def place(request: Request, free: Mapping[str, Room]) -> dict[str, int] | None:
    """``nnodes`` distinct nodes with enough free GPUs and CPUs each ({node: gpus}), or None.

    Best fit (the fullest nodes that still fit first) keeps large holes for large requests.
    """
    fitting = sorted(
        (room.gpus, room.cpus, node)
        for node, room in free.items()
        if room.holds(request.gpus_per_node, request.cpus_per_node)
    )
    if len(fitting) < request.nnodes:
        return None
    return {node: request.gpus_per_node for _, _, node in fitting[: request.nnodes]}


def can_ever_fit(request: Request, totals: Mapping[str, Room]) -> bool:
    return sum(1 for room in totals.values() if room.holds(request.gpus_per_node, request.cpus_per_node)) >= (
        request.nnodes
    )


def _plural(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


def _cpus(amount: float) -> str:
    return _plural(int(amount), "CPU") if float(amount).is_integer() else f"{amount:g} CPUs"


def shortfall(request: Request, free: Mapping[str, Room], totals: Mapping[str, Room]) -> str:
    """Why it cannot start now, in words: "needs 2 nodes with 3 free GPUs; 1 node has them".

    CPUs are named when they are what is short: GPU counts alone would not explain the wait.
    """
    gpus, cpus = request.gpus_per_node, request.cpus_per_node
    need = f"needs {_plural(request.nnodes, 'node')} with {_plural(gpus, 'free GPU')}"
    if not totals:
        return f"{need}; no worker node has joined the cluster"
    if not can_ever_fit(request, totals):
        big = sum(1 for room in totals.values() if room.gpus >= gpus)
        if big >= request.nnodes:  # the GPUs exist: the nodes lack the CPUs beside them
            most = max(room.cpus for room in totals.values() if room.gpus >= gpus)
            return (
                f"{need} and {_cpus(cpus)} each (ARGUS_CPUS_PER_GPU, as verl's bundles ask); the worker nodes "
                f"with the GPUs have at most {_cpus(most)}: it can start only when larger nodes join"
            )
        return (
            f"{need}; the cluster has {_plural(len(totals), 'worker node')}, {big} with "
            f"{_plural(gpus, 'GPU')} or more: it can start only when more nodes join"
        )
    have = sum(1 for room in free.values() if room.holds(gpus, cpus))
    verb = "has" if have == 1 else "have"
    reason = f"{need}; {_plural(have, 'node')} {verb} them now"
    cpu_short = [room for room in free.values() if room.gpus >= gpus and room.cpus < cpus]
    if cpu_short and have < request.nnodes:
        most = max(room.cpus for room in cpu_short)
        reason += (
            f" ({_plural(len(cpu_short), 'more node')} with the GPUs but too few free CPUs: "
            f"{_cpus(cpus)} wanted, at most {int(most) if float(most).is_integer() else most:g} free)"
        )
    return reason


def _subtract(free: dict[str, Room], placement: Mapping[str, int], cpus_per_node: float) -> None:
    for node, gpus in placement.items():
        room = free[node]
        free[node] = Room(room.gpus - gpus, room.cpus - cpus_per_node)


def decide(
    queue: Iterable[Request],
    free: Mapping[str, Room],
    totals: Mapping[str, Room],
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
    failed_shapes: set[tuple[int, int, float]] = set()
    # A shortfall depends only on the shape and the free room, which changes only when a task
    # is admitted: computed once per shape in between, a long best-effort queue stays cheap.
    reasons: dict[tuple[int, int, float], str] = {}
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
        doomed = any(
            request.nnodes >= n and request.gpus_per_node >= g and request.cpus_per_node >= c
            for n, g, c in failed_shapes
        )
        placement = None if doomed else place(request, free)
        if placement is not None:
            _subtract(free, placement, request.cpus_per_node)
            decision.admitted.append((request, placement))
            reasons.clear()
            continue
        shape = request.shape
        failed_shapes.add(shape)
        if shape not in reasons:
            reasons[shape] = shortfall(request, free, totals)
        decision.waiting[request.key] = reasons[shape]
        decision.short.add(request.key)
        if policy == STRICT_FIFO and can_ever_fit(request, totals):
            blocked = True
    return decision
