"""Rooms and requests: what a node has free, what a task needs on each of its nodes, where a
gang fits now and, when it does not, why, in words.

Pure functions over plain numbers (the seed-004 Allocator idea). A task needs ``nnodes`` distinct
worker nodes that each have ``gpus_per_node`` GPUs and ``cpus_per_node`` CPUs free; counting only
the cluster's total (what verl checks) is not enough: verl then waits forever for its placement
groups on a fragmented cluster, and on a node with the GPUs but not the CPUs its
``{"CPU": 3, "GPU": 1}`` bundles never place either (verl#6663).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple


class Room(NamedTuple):
    """GPUs and CPUs on one node (free, total, promised: whichever the caller means).

    Named tuples, not dataclasses: a tick builds one per node per change and a Request per
    waiting task (10,000 of them in bench/tick.py), and tuples are the cheapest to make."""

    gpus: float
    cpus: float = 0.0

    def holds(self, gpus: float, cpus: float) -> bool:
        return self.gpus >= gpus and self.cpus >= cpus


class Request(NamedTuple):
    key: int  # the task's primary key
    nnodes: int
    gpus_per_node: int
    cpus_per_node: float = 0.0  # 0: CPUs are not checked
    user: str = ""
    # Planned run time: the task's time limit (or the site default); None: unknown, which
    # never backfills ahead of a reservation.
    run_s: float | None = None
    priority: int = 0

    @property
    def gpus(self) -> int:
        return self.nnodes * self.gpus_per_node

    @property
    def shape(self) -> tuple[int, int, float]:
        return (self.nnodes, self.gpus_per_node, self.cpus_per_node)


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
    fitting = holding(free, request.gpus_per_node, request.cpus_per_node)
    if len(fitting) < request.nnodes:
        return None
    best = sorted((room.gpus, room.cpus, node) for node, room in fitting.items())
    return {node: request.gpus_per_node for _, _, node in best[: request.nnodes]}


def holding(rooms: Mapping[str, Room], gpus: float, cpus: float) -> dict[str, Room]:
    """The nodes of ``rooms`` with ``gpus`` and ``cpus`` each (Room.holds written out: the
    scheduler asks this of every node for each task it plans, tens of thousands of times a tick
    with 100 nodes, and the call costs more than the comparison)."""
    return {node: room for node, room in rooms.items() if room.gpus >= gpus and room.cpus >= cpus}


def can_ever_fit(request: Request, totals: Mapping[str, Room]) -> bool:
    return sum(1 for room in totals.values() if room.holds(request.gpus_per_node, request.cpus_per_node)) >= (
        request.nnodes
    )


def plural(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


def _cpus(amount: float) -> str:
    return plural(int(amount), "CPU") if float(amount).is_integer() else f"{amount:g} CPUs"


def shortfall(request: Request, free: Mapping[str, Room], totals: Mapping[str, Room]) -> str:
    """Why it cannot start now, in words: "needs 2 nodes with 3 free GPUs; 1 node has them".

    CPUs are named when they are what is short: GPU counts alone would not explain the wait.
    """
    gpus, cpus = request.gpus_per_node, request.cpus_per_node
    need = f"needs {plural(request.nnodes, 'node')} with {plural(gpus, 'free GPU')}"
    if not gpus:  # an export: CPUs only
        have = sum(1 for room in free.values() if room.holds(0, cpus))
        return f"needs a worker node with {_cpus(cpus)} free (ARGUS_EXPORT_CPUS); {plural(have, 'node')} now"
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
            f"{need}; the cluster has {plural(len(totals), 'worker node')}, {big} with "
            f"{plural(gpus, 'GPU')} or more: it can start only when more nodes join"
        )
    have = sum(1 for room in free.values() if room.holds(gpus, cpus))
    verb = "has" if have == 1 else "have"
    reason = f"{need}; {plural(have, 'node')} {verb} them now"
    cpu_short = [room for room in free.values() if room.gpus >= gpus and room.cpus < cpus]
    if cpu_short and have < request.nnodes:
        most = max(room.cpus for room in cpu_short)
        reason += (
            f" ({plural(len(cpu_short), 'more node')} with the GPUs but too few free CPUs: "
            f"{_cpus(cpus)} wanted, at most {int(most) if float(most).is_integer() else most:g} free)"
        )
    return reason
