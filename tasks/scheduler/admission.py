"""Which waiting tasks start now, why the others wait, which preemptible tasks make room for a
higher-priority one, and when each waiting task should start.

Pure functions over plain numbers and a queue already in order (tasks.queue.fairshare), so
that policies are easy to swap and to test, and bench/policy_sim.py drives this very code.

Policies:

* ``backfill`` (the default): EASY backfill as Slurm does it. The first task that cannot start
  gets a reservation at the earliest time enough nodes free up, planned from running tasks'
  start + time limit (tasks.scheduler.plan). A later task may start now if it fits and either
  ends, by its time limit, before the reservation, or uses only room the reservation leaves
  spare. A task with no planned run time never ends "before" anything: it can only use spare
  room.
* ``strict_fifo``: the first task that cannot start blocks everyone behind it.
* ``best_effort_fifo``: a task that fits may pass one that does not (Kueue's BestEffortFIFO);
  large tasks can starve.

Under all three, a task that can never fit the cluster as it stands does not block the others
(it waits for nodes to join), and a task over its user's running limit, or beyond what its
group's quota lets it use (tasks.scheduler.quotas), waits without blocking.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from operator import attrgetter

from tasks.queue.request import Cpus, Request, Shape, shape_gangs
from tasks.scheduler import reclaim
from tasks.scheduler.plan import NEVER, Profile, Release
from tasks.scheduler.quotas import GroupQuota, Ledger, borrowed, label, with_ungrouped
from tasks.scheduler.rooms import Room, can_ever_fit, cpus_at, enough, given_back, place, plural, shortfall

STRICT_FIFO = "strict_fifo"
BEST_EFFORT_FIFO = "best_effort_fifo"
BACKFILL = "backfill"
POLICIES = (BACKFILL, STRICT_FIFO, BEST_EFFORT_FIFO)
# Victim sets up to this size are searched exhaustively for the fewest; larger ones greedily.
EXHAUSTIVE_VICTIMS = 2


@dataclass(frozen=True)
class Running:
    """A task on Ray (or on its way), as admission needs it."""

    key: int
    placement: Mapping[str, int]  # {node: gpus}
    cpus_per_node: Cpus = 0.0  # per node where its pools hold different room on different nodes
    ends_at: float | None = None  # planned end (start + time limit); None: unknown
    user: str = ""
    priority: int = 0
    preemptible: bool = False
    started_at: float = 0.0
    stopping: bool = False  # being stopped: its room comes back at ends_at
    group: str = ""  # the quota group it was admitted in ("": none)
    borrowed: bool = False  # admitted beyond its group's nominal quota (Attempt.quota)
    # Its last checkpoint's time (None: none yet in this attempt, its work runs from started_at)
    # and the time between its last two: what stopping it loses, when its next one is due.
    checkpoint_at: float | None = None
    checkpoint_every_s: float | None = None
    # It resumed after a preemption or a reclaim less than ARGUS_PREEMPT_MIN_RUN_S ago: neither
    # chooses it again yet.
    settling_in: bool = False
    # The GPUs it counts against its group's quota: its attempt's (None: its placement's). Its
    # placement may hold more for a while (launch.held_nodes, while another attempt settles).
    quota_gpus: int | None = None

    @property
    def gpus(self) -> int:
        return sum(self.placement.values())


@dataclass(frozen=True)
class Caps:
    """A user's running limits (0: none)."""

    max_gpus: int = 0
    max_tasks: int = 0


@dataclass
class Decision:
    admitted: list[tuple[Request, dict[str, int]]]  # each with {node_id: gpus}
    waiting: dict[int, str]  # task key -> the reason it waits
    # Keys of the tasks that had their turn and lack resources (PENDING_RESOURCES); the
    # others wait behind them.
    short: set[int]
    # The blocked tasks' reservations: key -> (planned start, {node: gpus}).
    reservations: dict[int, tuple[float, dict[str, int]]] = field(default_factory=dict)
    preempt: dict[int, int] = field(default_factory=dict)  # running key -> the waiting key it makes room for
    reclaim: dict[int, int] = field(default_factory=dict)  # borrowed running key -> the in-quota waiting key
    borrowing: set[int] = field(default_factory=set)  # keys of the admitted that run on borrowed quota
    estimates: dict[int, float | None] = field(default_factory=dict)  # waiting key -> planned start


def _subtract(free: dict[str, Room], placement: Mapping[str, int], cpus: Cpus) -> None:
    for node, gpus in placement.items():
        room = free[node]
        free[node] = Room(room.gpus - gpus, room.cpus - cpus_at(cpus, node))


def _fits(placement: Mapping[str, int], cpus: Cpus, free: Mapping[str, Room]) -> bool:
    return all(node in free and free[node].holds(gpus, cpus_at(cpus, node)) for node, gpus in placement.items())


def _over_cap(request: Request, in_use: Mapping[str, tuple[int, int]], caps: Mapping[str, Caps]) -> str | None:
    cap = caps.get(request.user)
    if cap is None:
        return None
    gpus, tasks = in_use.get(request.user, (0, 0))
    who = request.user
    if cap.max_gpus and request.gpus > cap.max_gpus:
        return (
            f"needs {plural(request.gpus, 'GPU')}, more than {who}'s max_running_gpus of {cap.max_gpus}: "
            "it cannot start under this limit"
        )
    if cap.max_tasks and tasks >= cap.max_tasks:
        return f"waits for its user's limit: {who} runs {plural(tasks, 'task')}; max_running_tasks is {cap.max_tasks}"
    if cap.max_gpus and gpus + request.gpus > cap.max_gpus:
        return (
            f"waits for its user's limit: {who} has {plural(gpus, 'GPU')} in use and this task needs "
            f"{request.gpus}; max_running_gpus is {cap.max_gpus}"
        )
    return None


def choose_victims(request: Request, free: Mapping[str, Room], candidates: Sequence[Running]) -> list[Running] | None:
    """The fewest of ``candidates`` (ordered most recently started first) whose room lets
    ``request`` fit; among equally few, the most recently started. None when all of them
    together are not enough."""
    if place(request, given_back(free, candidates)) is None:
        return None
    for size in range(1, min(EXHAUSTIVE_VICTIMS, len(candidates)) + 1):
        for group in itertools.combinations(candidates, size):
            if place(request, given_back(free, group)) is not None:
                return list(group)
    # Dropping the ones the others make unnecessary, the longest-running first.
    return enough(request, free, candidates, attrgetter("started_at"))


def _preempt(
    request: Request,
    free: Mapping[str, Room],
    running: Sequence[Running],
    decision: Decision,
    profile: Profile | None,
    release_at: float,
) -> str | None:
    """Make room for ``request`` by stopping preemptible tasks of lower priority; what it waits
    for, in words, or None when preemption cannot help.

    The victims' room is planned free at ``release_at`` (now + their grace): the reservation
    ``request`` gets next is made on it, so backfill never takes it meanwhile."""
    stopping = [r for r in running if r.stopping]
    after_stops = given_back(free, stopping)
    if stopping and place(request, after_stops) is not None:
        return f"waiting for {plural(len(stopping), 'preempted task')} to stop"
    candidates = sorted(
        (r for r in running if r.preemptible and not r.stopping and r.priority < request.priority),
        key=lambda r: -r.started_at,
    )
    victims = choose_victims(request, after_stops, candidates) if candidates else None
    if not victims:
        return None
    for victim in victims:
        decision.preempt[victim.key] = request.key
        if profile is not None:
            profile.release_early(release_at, victim.ends_at, victim.placement, victim.cpus_per_node)
    return f"preempting {plural(len(victims), 'task')} of lower priority to make room"


def decide(
    queue: Iterable[Request],
    free: Mapping[str, Room],
    totals: Mapping[str, Room],
    *,
    policy: str = STRICT_FIFO,
    max_new: int | None = None,
    now: float = 0.0,
    running: Sequence[Running] = (),
    caps: Mapping[str, Caps] | None = None,
    preemption: bool = False,
    shortest_first: bool = False,
    estimate: int = 0,
    grace: float = 0.0,
    yielded: Mapping[int, int] | None = None,
    groups: Mapping[str, GroupQuota] | None = None,
    reclaim_grace: float = 0.0,
) -> Decision:
    """Walk the queue in order and admit what the policy lets start; plan the first
    ``estimate`` waiting tasks' starts.

    Backfill keeps a profile of free room over time (tasks.scheduler.plan): running tasks give
    room back at their planned end, and the first task that cannot start takes room from its
    planned start on (its reservation). Any later task starts now only if the profile has room
    for it from now for its whole planned run, so it never delays the reservation.
    ``shortest_first``: once the reservation is made, the others are tried shortest planned run
    first, which fills the holes before it with the tasks that fit them (ARGUS_BACKFILL_SHORTEST_FIRST;
    bench/README.md has the figures).
    ``grace``: how long a preempted task may run on before it is stopped. ``yielded``: waiting
    tasks preempted for another that still waits, {victim: beneficiary}: a victim does not take
    back the room it freed until the task it freed it for has started; with ``groups``, that task
    starts first, before the queue's walk, where it fits (``_Pass.start_owed``).
    ``groups``: the quota groups ({name: quota}; None or {}: no quotas): a task starts within its
    group's nominal quota, or beyond it by borrowing (Decision.borrowing), as
    tasks.scheduler.quotas allows; the users without a group are the group "" (quotas.UNGROUPED).
    A task within its group's nominal that lacks room takes it back from other groups' borrowed
    tasks (``_Pass.take_back``, Decision.reclaim), whatever their priority or ``preemptible``;
    ``reclaim_grace``: how long such a victim may run on to its next checkpoint.

    Each task is asked, in turn: is it held back whatever the room (``_Pass.held_back``), where
    would it start now (``_Pass.placement``), and when it cannot, why and whether preemption
    helps (``_Pass.cannot_start``), and whether it blocks or reserves (``_Pass.block_or_reserve``).
    """
    pending = list(queue)
    state = _Pass(
        policy=policy,
        free=dict(free),
        totals=totals,
        now=now,
        running=running,
        caps=caps or {},
        max_new=max_new,
        preempt_tried=not preemption,
        grace=grace,
        yielded=yielded or {},
        # Only a task that yielded asks whether the task it yielded to is in the queue.
        queued={request.key: request for request in pending} if yielded else {},
        ledger=_ledger(groups, totals, running) if groups else None,
        reclaim_grace=reclaim_grace,
    )
    state.owe_made_room()
    state.start_owed()
    walk = [request for request in pending if request.key not in state.started] if state.started else pending
    _walk(state, walk, shortest_first=shortest_first)
    if estimate:
        profile = state.profile or Profile(now, state.free, state.releases, totals)
        _estimate(state.decision, pending, profile, estimate, strict=policy == STRICT_FIFO)
    return state.decision


def _ledger(groups: Mapping[str, GroupQuota], totals: Mapping[str, Room], running: Sequence[Running]) -> Ledger:
    """The groups' use as the pass starts: each running task counts against the group it was
    admitted in."""
    total = int(sum(room.gpus for room in totals.values()))
    return Ledger.of(with_ungrouped(groups, total), ((holder.group, _quota_gpus(holder)) for holder in running))


def _quota_gpus(holder: Running) -> int:
    return holder.gpus if holder.quota_gpus is None else holder.quota_gpus


def _walk(state: _Pass, pending: list[Request], *, shortest_first: bool) -> None:
    """decide's pass over the queue: each task admitted, or given its reason to wait."""
    index = 0
    while index < len(pending):
        if state.blocked:
            # Every task left waits for the same reason: one step, not a pass over the queue.
            state.decision.waiting.update(dict.fromkeys(map(attrgetter("key"), pending[index:]), state.blocked))
            break
        request = pending[index]
        index += 1
        reason = state.held_back(request)
        if reason:
            state.decision.waiting[request.key] = reason
            continue
        known = state.settled.get((request.shape, request.priority, request.group))
        if known is not None:
            # As the last task of its shape and priority (cannot_start's outcome, without its steps).
            state.decision.short.add(request.key)
            state.decision.waiting[request.key], fits = known
        else:
            placement = state.placement(request)
            if placement is not None:
                state.admit(request, placement)
                continue
            fits = state.cannot_start(request)
        if fits and state.block_or_reserve(request) and shortest_first:
            # Shortest planned run first, those without one last, each in queue order (a key
            # read in C: the rest of a long queue is sorted here).
            rest = pending[index:]
            timed = sorted((r for r in rest if r.run_s is not None), key=attrgetter("run_s"))
            pending[index:] = timed + [r for r in rest if r.run_s is None]


@dataclass
class _Pass:
    """One walk of the queue: the room left, the users' use, and what was decided so far."""

    policy: str
    free: dict[str, Room]
    totals: Mapping[str, Room]
    now: float
    running: Sequence[Running]
    caps: Mapping[str, Caps]
    max_new: int | None
    preempt_tried: bool  # one round of victims a pass
    grace: float
    yielded: Mapping[int, int]
    queued: dict[int, Request]
    ledger: Ledger | None = None  # the groups' use (None: no quotas)
    reclaim_grace: float = 0.0
    # Reclaims made in this pass: the victims chosen, the room promised to the tasks they serve
    # (placement, CPUs), and the GPUs so promised per group (within its nominal, with its use).
    reclaimed: list[Running] = field(default_factory=list)
    promised: list[tuple[dict[str, int], Cpus]] = field(default_factory=list)
    reclaiming: dict[str, int] = field(default_factory=dict)
    owed_to: set[int] = field(default_factory=set)  # waiting tasks that victims yielded to
    decision: Decision = field(default_factory=lambda: Decision(admitted=[], waiting={}, short=set()))
    started: set[int] = field(default_factory=set)
    releases: list[Release] = field(default_factory=list)
    profile: Profile | None = None
    in_use: dict[str, tuple[int, int]] = field(default_factory=dict)  # user -> (gpus, tasks)
    # The reason every later task waits for, once one blocks the queue. Not naming the head
    # task: when it starts, every reason behind it would change, and a long queue would be
    # rewritten on each admission. Its position says where.
    blocked: str = ""
    # A shortfall depends only on the shape and the free room, which changes only when a task
    # is admitted: computed once per shape in between, a long queue stays cheap.
    failed_shapes: set[Shape] = field(default_factory=set)
    doomed: dict[Shape, bool] = field(default_factory=dict)
    reasons: dict[Shape, str] = field(default_factory=dict)
    fits: dict[Shape, bool] = field(default_factory=dict)
    no_victims: set[tuple[Shape, int, str]] = field(default_factory=set)
    # What a task of a shape that failed gets, per priority, until the next admission: its
    # shape's reason and whether it could ever fit. Room only shrinks in a pass, so the shape
    # stays doomed; preemption was tried for it or cannot serve it. 10,000 tasks behind a
    # reservation each take one step, not the three of placement and cannot_start.
    # Per group too: a reclaim serves a group's tasks, not another's.
    settled: dict[tuple[Shape, int, str], tuple[str, bool]] = field(default_factory=dict)
    # Whether a running task has a lower priority than this one, per priority: the running tasks
    # do not change during a pass, and a long queue has few priorities.
    lower_running: dict[int, bool] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.releases = [
            Release(r.ends_at, r.placement, r.cpus_per_node) for r in self.running if r.ends_at is not None
        ]
        if self.policy == BACKFILL:
            self.profile = Profile(self.now, self.free, self.releases, self.totals)
        for holder in self.running:
            self._count(holder.user, holder.gpus)

    def _count(self, user: str, gpus: int) -> None:
        used, tasks = self.in_use.get(user, (0, 0))
        self.in_use[user] = (used + gpus, tasks + 1)

    def owe_made_room(self) -> None:
        """The tasks victims yielded to (``yielded``) are owed their GPUs by their group's quota:
        what victims gave back is not idle quota another group may borrow meanwhile, or it would
        take the room a reclaim took back, and the reclaim start again."""
        if self.ledger is None:
            return
        self.owed_to = {key for key in self.yielded.values() if key in self.queued}
        for key in self.owed_to:
            beneficiary = self.queued[key]
            self.ledger.owe(beneficiary.group, beneficiary.gpus)

    def start_owed(self) -> None:
        """The tasks victims yielded to start first, in queue order, where they fit now: the room
        a reclaim took back for a task is that task's until it starts (or the reclaim is
        withdrawn). In its turn, a borrower ahead of it in the queue would start in that room,
        borrowing a third group's idle quota, and be reclaimed for it in the next pass, then the
        next borrower, pass after pass (the quota owed, Ledger.owe, does not hold the room)."""
        for key, request in self.queued.items():
            if key in self.owed_to and self.held_back(request) is None:
                placement = place(request, self.free)
                if placement is not None:
                    self.admit(request, placement)

    def held_back(self, request: Request) -> str | None:
        """Why ``request`` waits whatever the room: the task it yielded to, its user's limits,
        its group's quota, the cluster's limit of running tasks."""
        waits_for = self.yielded.get(request.key)
        if waits_for is not None and waits_for in self.queued and waits_for not in self.started:
            beneficiary = self.queued[waits_for]
            if beneficiary.priority <= request.priority:
                # Not a preemption (its victims are of lower priority): a reclaim's victim, whose
                # borrowed room went back to the group that owns it.
                return (
                    f"it gave the room it borrowed back to a task of {label(beneficiary.group)}, which has not "
                    "started yet; it resumes after"
                )
            return "it made room for a task of higher priority that has not started yet; it resumes after"
        over = _over_cap(request, self.in_use, self.caps) if self.caps else None
        if over is not None:
            return over
        if self.ledger is not None:
            refused = self.ledger.refusal(request.group, request.gpus)
            if refused is not None:
                return refused
        if self.max_new is not None and len(self.decision.admitted) >= self.max_new:
            return "the limit of running tasks is reached (ARGUS_MAX_RUNNING_TASKS)"
        return None

    def placement(self, request: Request) -> dict[str, int] | None:
        """Where ``request`` starts now, or None; once a reservation is made, only where it
        never delays it (then the reason is written here)."""
        placement = None if self._doomed(request.shape) else place(request, self.free)
        if placement is None or self.profile is None or not self.decision.reservations:
            return placement
        found = self.profile.earliest(request, request.run_s)
        placement = found[1] if found is not None and found[0] <= self.now else None
        if placement is not None and not _fits(placement, request.cpus_on(placement), self.free):
            placement = None  # the profile's now is the free room; this keeps it so
        if placement is None:
            self.decision.waiting[request.key] = (
                "the room it needs is reserved for an earlier task, and it would still run when that "
                "task starts" + ("" if request.run_s is not None else " (it has no time limit)")
            )
            self.decision.short.add(request.key)
        return placement

    def _doomed(self, shape: Shape) -> bool:
        """Free room only shrinks during a pass: a shape at least as large as one that failed
        fails too, which keeps a long queue cheap (a long queue has few shapes: once per shape
        until another fails). A request of several pools is doomed when one of its pools is at
        least as large as a one-pool shape that failed, or its very shape failed (CPU actors
        count as pools here: a request with them is a shape of its own)."""
        doomed = self.doomed.get(shape)
        if doomed is None:
            if shape[3] or shape[4]:
                doomed = shape in self.failed_shapes or any(self._dominated(gang) for _, gang in shape_gangs(shape))
            else:
                doomed = self._dominated(shape[:3])
            self.doomed[shape] = doomed
        return doomed

    def _dominated(self, gang: tuple[int, int, float]) -> bool:
        nnodes, gpus, cpus = gang
        return any(
            nnodes >= n and gpus >= g and cpus >= c
            for n, g, c, more, actors in self.failed_shapes
            if not more and not actors
        )

    def admit(self, request: Request, placement: dict[str, int]) -> None:
        cpus = request.cpus_on(placement)
        _subtract(self.free, placement, cpus)
        self.decision.admitted.append((request, placement))
        self.started.add(request.key)
        self._count(request.user, request.gpus)
        if self.ledger is not None:
            if self.ledger.borrows(request.group, request.gpus):
                self.decision.borrowing.add(request.key)
            self.ledger.take(request.group, request.gpus, owed=request.key in self.owed_to)
        if self.profile is not None:
            self.profile.take(self.now, request.run_s, placement, cpus)
        if request.run_s is not None:
            self.releases.append(Release(self.now + request.run_s, placement, cpus))
        self.reasons.clear()
        self.settled.clear()

    def cannot_start(self, request: Request) -> bool:
        """Record why ``request`` lacks room (and the preemption made for it, if any); whether
        it could ever fit the cluster as it stands. A task already given its reason (the room
        is reserved) is not asked again."""
        if request.key in self.decision.waiting:
            return False
        shape = request.shape
        if shape not in self.failed_shapes:
            self.failed_shapes.add(shape)
            self.doomed = {known: True for known, doomed in self.doomed.items() if doomed}
        if shape not in self.reasons:
            self.reasons[shape] = shortfall(request, self.free, self.totals)
        reason = self.reasons[shape]
        self.decision.short.add(request.key)
        if shape not in self.fits:  # per shape: a long queue has few shapes and many tasks
            self.fits[shape] = can_ever_fit(request, self.totals)
        # Reclaim gives GPUs back: a task without any (an export) waits for CPUs as it would.
        taking_back = self.take_back(request) if self.ledger is not None and request.gpus and self.fits[shape] else None
        if taking_back is not None:
            # Not settled: the next task like it may be served by other victims.
            self.decision.waiting[request.key] = f"{reason}; {taking_back}"
            return True
        if (
            self.fits[shape]
            and not self.preempt_tried
            and (shape, request.priority, request.group) not in self.no_victims
            and self._lower_running(request.priority)
        ):
            # A task this pass reclaims is not preempted too: its room is promised already.
            reclaimed = self.decision.reclaim
            running = [r for r in self.running if r.key not in reclaimed] if reclaimed else self.running
            if self.ledger is not None and self.ledger.borrows(request.group, request.gpus):
                # A task that would borrow stops its own group's tasks or borrowed ones: another
                # group's task in its quota would have its group reclaim the room at once.
                running = [r for r in running if r.stopping or r.borrowed or r.group == request.group]
            making_room = _preempt(request, self.free, running, self.decision, self.profile, self.now + self.grace)
            if making_room is not None:
                # One round of victims a pass; a task preemption cannot help does not keep the
                # next high task from its try (free room only shrinks: nor can it help its shape).
                self.preempt_tried = True
                reason = f"{reason}; {making_room}"
            else:
                self.no_victims.add((shape, request.priority, request.group))
        self.decision.waiting[request.key] = reason
        # The next task like it: no preemption (one round a pass, tried or of no help here).
        self.settled[(shape, request.priority, request.group)] = (self.reasons[shape], self.fits[shape])
        return self.fits[shape]

    def take_back(self, request: Request) -> str | None:
        """Reclaim (issue 27 item 4): ``request`` is within its group's nominal quota (with what
        earlier reclaims of this pass promised its group) but lacks room: it takes that room
        from the stopping tasks' (as far as no earlier task of this pass was promised it), else
        from borrowed tasks of other groups that are neither stopping nor settling in, chosen
        by reclaim.choose. The victims' room is planned free when they stop (reclaim.stops_at),
        so backfill never takes it. What it waits for, in words; None when reclaim cannot help."""
        assert self.ledger is not None
        group = request.group
        if not self.ledger.within_nominal(group, request.gpus, self.reclaiming.get(group, 0)):
            return None
        stopping = [holder for holder in self.running if holder.stopping]
        room = given_back(self.free, stopping + self.reclaimed)
        for promised, cpus in self.promised:
            _subtract(room, promised, cpus)
        placement = place(request, room)
        if placement is not None:
            # Those on the nodes it would take: the others' room is not what it waits for.
            freeing = [h for h in stopping + self.reclaimed if not h.placement.keys().isdisjoint(placement)]
            words = f"waiting for {plural(len(freeing), 'task')} being stopped"
        else:
            taken = self.decision.reclaim
            preempted = self.decision.preempt  # promised to the task of higher priority they serve
            # A group gives back only while it borrows: its use, less what already leaves it,
            # beyond its nominal (a task admitted borrowed may run within it since).
            leaving: dict[str, int] = {}
            # What each group runs recorded in its quota: beyond its nominal when the quota was
            # cut, or groups were made, while those tasks ran; they borrow now, as a task admitted
            # borrowed does, or a group would wait for them to end to get its own quota back.
            in_quota: dict[str, int] = {}
            for holder in self.running:
                if holder.stopping or holder.key in taken or holder.key in preempted:
                    leaving[holder.group] = leaving.get(holder.group, 0) + _quota_gpus(holder)
                elif not holder.borrowed:
                    in_quota[holder.group] = in_quota.get(holder.group, 0) + _quota_gpus(holder)
            ledger = self.ledger
            over = {name for name, used in in_quota.items() if used > ledger.quota(name).nominal}
            candidates = [
                holder
                for holder in self.running
                if (holder.borrowed or holder.group in over)
                and holder.group != group
                and not holder.stopping
                and not holder.settling_in
                and holder.key not in taken
                and holder.key not in preempted
            ]
            borrowing = {
                name: borrowed(ledger.quota(name), ledger.used(name) - leaving.get(name, 0))
                for name in {holder.group for holder in candidates}
            }
            victims = reclaim.choose(request, room, candidates, self.now, borrowing) if candidates else None
            if not victims:
                return None
            for victim in victims:
                taken[victim.key] = request.key
                if self.profile is not None:
                    stops = reclaim.stops_at(victim, self.now, self.reclaim_grace)
                    self.profile.release_early(stops, victim.ends_at, victim.placement, victim.cpus_per_node)
            self.reclaimed.extend(victims)
            placement = place(request, given_back(room, victims)) or {}  # choose's victims make room
            words = f"reclaiming {plural(len(victims), 'borrowed task')} of other groups to make room"
        self.promised.append((placement, request.cpus_on(placement)))
        self.reclaiming[group] = self.reclaiming.get(group, 0) + request.gpus
        return words

    def _lower_running(self, priority: int) -> bool:
        lower = self.lower_running.get(priority)
        if lower is None:
            lower = self.lower_running[priority] = any(r.priority < priority for r in self.running)
        return lower

    def block_or_reserve(self, request: Request) -> bool:
        """What a task that could fit but cannot start now does to those behind it: strict FIFO
        blocks them; backfill gives the first such task a reservation (True when it did), or
        blocks when its start cannot be planned."""
        if self.policy == STRICT_FIFO:
            self.blocked = "waiting its turn: the head of the queue goes first (strict FIFO)"
            return False
        if self.profile is None or self.decision.reservations:
            return False
        found = self.profile.earliest(request, request.run_s)
        if found is None:
            # Tasks without a time limit hold the room it needs: its start cannot be planned,
            # so nothing may pass it (it would be delayed by an unknown amount).
            self.blocked = (
                "waiting behind a task whose start cannot be planned (running tasks without a time limit hold its room)"
            )
            return False
        at, where = found
        self.profile.take(at, request.run_s, where, request.cpus_on(where))
        self.decision.reservations[request.key] = (at, where)
        return True


def preemption_holds(
    request: Request,
    victims: Sequence[Running],
    free: Mapping[str, Room],
    running: Sequence[Running],
    caps: Mapping[str, Caps] | None = None,
    groups: Mapping[str, GroupQuota] | None = None,
    totals: Mapping[str, Room] | None = None,
    *,
    reclaim: bool = False,
) -> str:
    """Whether ``request`` would start once ``victims`` are gone: "" when it would, else why not,
    in words (its user's limits, its group's quota; the room is not there any more, say a node
    died). A reclaim (``reclaim``) holds only while ``request`` is within its group's nominal
    quota: a task that would borrow takes no borrowed room back. ``groups`` and ``totals``: as
    decide's.

    "Once they are gone" is when the last of them stops (its ``ends_at``): a task backfilled
    meanwhile that ends by then gives its room and its place under the user's limits back too,
    as the reservation planned."""
    stops = max((v.ends_at for v in victims if v.ends_at is not None), default=None)
    gone = [r for r in running if r in victims or (stops is not None and r.ends_at is not None and r.ends_at <= stops)]
    in_use: dict[str, tuple[int, int]] = {}
    for holder in running:
        if holder in gone:
            continue
        gpus, tasks = in_use.get(holder.user, (0, 0))
        in_use[holder.user] = (gpus + holder.gpus, tasks + 1)
    over = _over_cap(request, in_use, caps or {})
    if over is not None:
        return f"the task it made room for {over}"
    if groups:
        ledger = _ledger(groups, totals or {}, [holder for holder in running if holder not in gone])
        refused = ledger.refusal(request.group, request.gpus)
        if refused is not None:
            return f"its group's quota holds the task it made room for back ({refused})"
        if reclaim and ledger.borrows(request.group, request.gpus):
            return (
                f"the task it made room for would run beyond its group's nominal quota "
                f"({label(request.group)}: {ledger.used(request.group)} of {ledger.quota(request.group).nominal} "
                f"GPUs in use, it needs {request.gpus})"
            )
    if place(request, given_back(free, gone)) is None:
        return "the task it made room for would not fit once it is gone (the cluster changed)"
    return ""


def _estimate(decision: Decision, queue: Sequence[Request], profile: Profile, depth: int, *, strict: bool) -> None:
    """Planned starts for the first ``depth`` waiting tasks, in queue order, each planned where
    it fits without moving an earlier one (conservative backfill: an estimate, not a promise;
    under strict FIFO no task is planned before the one ahead). Reserved tasks keep their
    reservation. None: not plannable (tasks without a time limit hold the room)."""
    not_before: float | None = None
    planned = 0
    for request in queue:
        if planned >= depth:
            break
        if request.key not in decision.waiting:
            continue
        planned += 1
        if request.key in decision.reservations:
            start = decision.reservations[request.key][0]
            decision.estimates[request.key] = start
            not_before = start if strict else None
            continue
        found = profile.earliest(request, request.run_s, not_before)
        if found is None:
            decision.estimates[request.key] = None
            if strict:
                not_before = NEVER
            continue
        start, placement = found
        decision.estimates[request.key] = start
        profile.take(start, request.run_s, placement, request.cpus_on(placement))
        if strict:
            not_before = start
