"""Rooms and requests: what a node has free, what a task needs on each of its nodes, where a
gang fits now and, when it does not, why, in words.

Pure functions over plain numbers (the seed-004 Allocator idea). A task needs ``nnodes`` distinct
worker nodes that each have ``gpus_per_node`` GPUs and ``cpus_per_node`` CPUs free; counting only
the cluster's total (what verl checks) is not enough: verl then waits forever for its placement
groups on a fragmented cluster, and on a node with the GPUs but not the CPUs its
``{"CPU": 3, "GPU": 1}`` bundles never place either (verl#6663).

verl 0.9 may start several resource pools (tasks.specs.pools): the trainer's (the request's own
``nnodes`` x ``gpus_per_node``) and others (``Request.more``: rollout, reward, teacher), each a
per-node gang of its own, all at once. Each pool needs its own nodes, distinct within the pool;
two pools may share a node that has room for both (Ray packs each placement group on one node,
and groups of different pools on the same node when it has room). Every pool's bundles ask the
same CPUs per GPU (ARGUS_CPUS_PER_GPU), so a node's CPUs follow its GPUs.

verl's experimental trainers also start actors that hold CPUs of their own beside the pools
(``Request.actors``, tasks.specs.pools.CPU_ACTORS): each needs its CPUs on one worker node, any
node, in the room the pools leave. Ray chooses the node; admission plans one (best fit, the
largest actor first) so that the run is never admitted where one of them would wait for ever,
and charges the actors' CPUs there (``Placement``) until Ray counts them itself.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import NamedTuple, Protocol, TypeVar

from tasks.queue.request import Cpus, Gang, Placement, Request
from tasks.specs.pools import Actor, describe_actors


class Room(NamedTuple):
    """GPUs and CPUs on one node (free, total, promised: whichever the caller means).

    Named tuples, not dataclasses: a tick builds one per node per change and a Request per
    waiting task (10,000 of them in bench/tick.py), and tuples are the cheapest to make."""

    gpus: float
    cpus: float = 0.0

    def holds(self, gpus: float, cpus: float) -> bool:
        return self.gpus >= gpus and self.cpus >= cpus


def cpus_at(cpus: Cpus, node: str) -> float:
    """``cpus`` (a Cpus) on ``node``."""
    return cpus[node] if isinstance(cpus, dict) else cpus


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


class Holder(Protocol):
    """What holds room on nodes (tasks.scheduler.admission.Running)."""

    @property
    def placement(self) -> Mapping[str, int]: ...  # {node: gpus}

    @property
    def cpus_per_node(self) -> Cpus: ...


H = TypeVar("H", bound=Holder)


def given_back(free: Mapping[str, Room], holders: Iterable[Holder]) -> dict[str, Room]:
    """``free`` with the holders' room given back, on the nodes ``free`` has (a dead node's
    room comes back nowhere)."""
    more = dict(free)
    for holder in holders:
        for node, gpus in holder.placement.items():
            if node not in more:
                continue
            room = more[node]
            more[node] = Room(room.gpus + gpus, room.cpus + cpus_at(holder.cpus_per_node, node))
    return more


def enough(
    request: Request, free: Mapping[str, Room], ordered: Sequence[H], drop_first: Callable[[H], float]
) -> list[H]:
    """The first of ``ordered`` whose room, given back, lets ``request`` fit, less those the
    others make unnecessary (tried smallest ``drop_first`` first): a greedy victim set. The
    caller knows that all of ``ordered`` together are enough."""
    chosen: list[H] = []
    for holder in ordered:
        chosen.append(holder)
        if place(request, given_back(free, chosen)) is not None:
            break
    for holder in sorted(chosen, key=drop_first):
        rest = [h for h in chosen if h is not holder]
        if place(request, given_back(free, rest)) is not None:
            chosen = rest
    return chosen


def place(request: Request, free: Mapping[str, Room]) -> dict[str, int] | None:
    """``nnodes`` distinct nodes with enough free GPUs and CPUs each ({node: gpus}), or None;
    for several pools, every pool placed at once, the GPUs summed per node.

    Best fit (the fullest nodes that still fit first) keeps large holes for large requests.
    """
    if request.more or request.actors:
        found = _place_all(request, free)
        if found is None:
            return None
        gpus = _combined(found[0])
        if not request.actors:
            return gpus
        return Placement({**dict.fromkeys(found[1], 0), **gpus}, found[1])
    fitting = holding(free, request.gpus_per_node, request.cpus_per_node)
    if len(fitting) < request.nnodes:
        return None
    best = sorted((room.gpus, room.cpus, node) for node, room in fitting.items())
    return {node: request.gpus_per_node for _, _, node in best[: request.nnodes]}


def place_pools(request: Request, free: Mapping[str, Room]) -> dict[str, dict[str, int]] | None:
    """Where each of the request's pools goes, {pool: {node: gpus}}, all at once (beside its CPU
    actors), or None."""
    found = _place_all(request, free)
    return None if found is None else found[0]


def _place_all(request: Request, free: Mapping[str, Room]) -> tuple[dict[str, dict[str, int]], dict[str, float]] | None:
    """Where each pool goes and the CPU actors' CPUs per node, or None.

    Pool after pool, each best fit in the room the ones before left, the largest first, then
    the actors in the room the pools left; when that order fails, every other (a request has at
    most a few pools). One order's first fit can miss a packing another choice of nodes would
    find; a request it misses waits (it is never admitted where it does not fit)."""
    for pools, room in _pool_placements(request, free):
        actors = _place_actors(request.actors, room)
        if actors is not None:
            return pools, actors
    return None


def _pool_placements(
    request: Request, free: Mapping[str, Room]
) -> Iterator[tuple[dict[str, dict[str, int]], dict[str, Room]]]:
    """Each placement of the pools, {pool: {node: gpus}}, one per order that fits (the largest
    pool first, then every other order), with the room it leaves."""
    gangs = sorted(request.gangs(), key=lambda item: (-item[1][1], -item[1][0]))
    for order in itertools.permutations(gangs):
        room = dict(free)
        pools = _place_in_order(order, room)
        if pools is not None:
            yield pools, room


def _place_in_order(order: tuple[tuple[str, Gang], ...], room: dict[str, Room]) -> dict[str, dict[str, int]] | None:
    """The pools in this order, each best fit in what ``room`` has left (charged as they go)."""
    found: dict[str, dict[str, int]] = {}
    for name, (nnodes, gpus, cpus) in order:
        fitting = holding(room, gpus, cpus)
        if len(fitting) < nnodes:
            return None
        best = sorted((node_room.gpus, node_room.cpus, node) for node, node_room in fitting.items())[:nnodes]
        found[name] = {node: gpus for _, _, node in best}
        for _, _, node in best:
            taken = room[node]
            room[node] = Room(taken.gpus - gpus, taken.cpus - cpus)
    return found


def _place_actors(actors: tuple[Actor, ...], room: dict[str, Room]) -> dict[str, float] | None:
    """The actors' CPUs per node, the largest first, each best fit (the node with the fewest
    free CPUs that holds it) in what ``room`` has left (charged as they go), or None."""
    placed: dict[str, float] = {}
    return None if _short_actor(actors, room, placed) is not None else placed


def _short_actor(
    actors: tuple[Actor, ...], room: dict[str, Room], placed: dict[str, float]
) -> tuple[Actor, float] | None:
    """_place_actors, stopping at the first actor no node of ``room`` holds: it and the most
    free CPUs a node had then; None when they all fit (``placed`` says where)."""
    for actor in sorted(actors, key=lambda actor: -actor.cpus):
        fitting = [(node_room.cpus, node) for node, node_room in room.items() if node_room.cpus >= actor.cpus]
        if not fitting:
            return actor, max((node_room.cpus for node_room in room.values()), default=0.0)
        _, node = min(fitting)
        taken = room[node]
        room[node] = Room(taken.gpus, taken.cpus - actor.cpus)
        placed[node] = placed.get(node, 0.0) + actor.cpus
    return None


def _combined(pools: dict[str, dict[str, int]]) -> dict[str, int]:
    combined: dict[str, int] = {}
    for where in pools.values():
        for node, gpus in where.items():
            combined[node] = combined.get(node, 0) + gpus
    return combined


def holding(rooms: Mapping[str, Room], gpus: float, cpus: float) -> dict[str, Room]:
    """The nodes of ``rooms`` with ``gpus`` and ``cpus`` each (Room.holds written out: the
    scheduler asks this of every node for each task it plans, tens of thousands of times a tick
    with 100 nodes, and the call costs more than the comparison)."""
    return {node: room for node, room in rooms.items() if room.gpus >= gpus and room.cpus >= cpus}


def can_ever_fit(request: Request, totals: Mapping[str, Room]) -> bool:
    if request.more or request.actors:
        return _place_all(request, totals) is not None
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
    Of several pools, the one that does not fit is named.
    """
    if request.more or request.actors:
        return _pools_shortfall(request, free, totals)
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


def _pools_shortfall(request: Request, free: Mapping[str, Room], totals: Mapping[str, Room]) -> str:
    """Why a request of several pools (or with CPU actors) cannot start now, naming the pool:
    the first, in the request's order (trainer, then the others), that never fits the cluster
    alone; else the first that does not fit now beside the ones before it. Where the pools fit,
    the CPU actor that does not is named, the largest first."""
    gangs = request.gangs()
    alone = [(name, Request(request.key, *gang)) for name, gang in gangs]
    for name, gang in alone:
        if not can_ever_fit(gang, totals):
            return f"its {name} pool {shortfall(gang, free, totals)}"
    pools = " + ".join(f"{name} {n}x{g}" for name, (n, g, _) in gangs)
    if not can_ever_fit(request, totals):
        first = next(_pool_placements(request, totals), None)
        if first is None:
            return (
                f"needs its pools at once ({pools} GPUs, each pool on nodes of its own); the cluster cannot hold "
                "them all: it can start only when more nodes join"
            )
        short = _short_actor(request.actors, first[1], {})
        assert short is not None  # _place_all tried this very placement of the pools
        actor, most = short
        return (
            f"its {actor.name} actor needs {_cpus(actor.cpus)} on one worker node beside its pools ({pools}) and its "
            f"other actors; the worker nodes would have at most {_cpus(most)} left on one: it can start only when "
            f"larger nodes join{_actors_words(request)}"
        )
    room = dict(free)
    before: list[str] = []
    for name, gang in alone:
        where = place(gang, room)
        if where is None:
            beside = f" beside its {' and '.join(before)} pool{'s' if len(before) > 1 else ''}" if before else ""
            return f"its {name} pool {shortfall(gang, room, totals)}{beside}"
        for node, gpus in where.items():
            taken = room[node]
            room[node] = Room(taken.gpus - gpus, taken.cpus - gang.cpus_per_node)
        before.append(name)
    short = _short_actor(request.actors, room, {})
    if short is not None:
        actor, most = short
        return (
            f"its {actor.name} actor needs {_cpus(actor.cpus)} free on one worker node beside its pools; at most "
            f"{_cpus(most)} free on one now{_actors_words(request)}"
        )
    return f"needs its pools at once ({pools}); they fit now"


def _actors_words(request: Request) -> str:
    return f" (verl's actors outside its GPU bundles: {describe_actors(request.actors)})"
