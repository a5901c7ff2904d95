"""What a waiting task asks of the cluster (Request): its pools' per-node gangs, its CPU actors,
its planned run time; and where a placement put its CPU actors (Placement). The queue's rows
(tasks.queue.rows) make one per waiting task; the scheduler's pure core (its rooms, admission
and plan) places them, and its rooms say what room a request needs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

from tasks.specs.pools import TRAINER, Actor, Pool

# (nnodes, GPUs per node, CPUs per node): one per-node gang.
Gang = tuple[int, int, float]
# What admission caches its answers by: the first pool's gang, the others and the CPU actors.
Shape = tuple[int, int, float, tuple[Pool, ...], tuple[Actor, ...]]
# The CPUs a placement holds on each of its nodes: the same on every node (one pool), or per
# node (several pools, which may share a node).
Cpus = float | dict[str, float]


class Placement(dict[str, int]):
    """Where a request with CPU actors goes: {node: GPUs} as every placement, a node that holds
    only actors at 0 GPUs, and ``actors``, the actors' CPUs on each node they were planned on.
    Which node takes an actor is a choice among several, not a function of the GPUs: it travels
    with the placement, for Request.cpus_on and for the attempt's promise (Attempt.actor_cpus)."""

    __slots__ = ("actors",)

    def __init__(self, gpus: Mapping[str, int], actors: dict[str, float]) -> None:
        super().__init__(gpus)
        self.actors = actors


def actor_cpus(placement: Mapping[str, int]) -> dict[str, float]:
    """The CPU actors' CPUs on each node of ``placement`` ({} for a request without actors)."""
    return placement.actors if isinstance(placement, Placement) else {}


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
    # verl's other resource pools, with the same CPUs per GPU as the first (see the module).
    more: tuple[Pool, ...] = ()
    # verl's actors that hold CPUs of their own, each on one node (see the module).
    actors: tuple[Actor, ...] = ()
    # The quota group it is admitted in (its owner's; "": none, the group of users without one).
    group: str = ""

    @property
    def gpus(self) -> int:
        own = self.nnodes * self.gpus_per_node
        return own + sum(pool.gpus for pool in self.more) if self.more else own

    @property
    def shape(self) -> Shape:
        return (self.nnodes, self.gpus_per_node, self.cpus_per_node, self.more, self.actors)

    def gangs(self) -> list[tuple[str, Gang]]:
        """Every pool by name, the first (the trainer's) first."""
        return shape_gangs(self.shape)

    def least(self) -> Gang:
        """What a node of its placement holds at least, and how many nodes it needs at least:
        (the widest pool's nnodes, the smallest pool's GPUs and CPUs per node); a node that
        holds only an actor needs no GPU and the smallest actor's CPUs."""
        if not self.more and not self.actors:
            return (self.nnodes, self.gpus_per_node, self.cpus_per_node)
        gangs = [gang for _, gang in self.gangs()]
        least = (max(g[0] for g in gangs), min(g[1] for g in gangs), min(g[2] for g in gangs))
        if not self.actors:
            return least
        return (least[0], 0, min(least[2], *(actor.cpus for actor in self.actors)))

    def cpus_on(self, placement: Mapping[str, int]) -> Cpus:
        """The CPUs ``placement`` (place()'s) holds on each of its nodes: its bundles' beside
        its GPUs, and its CPU actors' where they were planned."""
        if not self.more and not self.actors:
            return self.cpus_per_node
        per_gpu = self.cpus_per_node / self.gpus_per_node if self.gpus_per_node else 0.0
        cpus = {node: gpus * per_gpu for node, gpus in placement.items()}
        for node, held in actor_cpus(placement).items():
            cpus[node] += held
        return cpus


def shape_gangs(shape: Shape) -> list[tuple[str, Gang]]:
    """A shape's pools by name, each (nnodes, GPUs per node, CPUs per node); the others' CPUs
    follow their GPUs at the first's CPUs per GPU."""
    nnodes, gpus, cpus, more, _ = shape
    gangs: list[tuple[str, Gang]] = [(TRAINER, (nnodes, gpus, cpus))]
    per_gpu = cpus / gpus if gpus else 0.0
    gangs += [(pool.name, (pool.nnodes, pool.n_gpus_per_node, pool.n_gpus_per_node * per_gpu)) for pool in more]
    return gangs
