"""Scheduling policies on a trace, through the scheduler's own admission code.

    .venv/bin/python bench/policy_sim.py --trace FILE.csv [--nodes 8] [--gpus 8]
                                         [--policies strict_fifo,best_effort_fifo,backfill,default]
                                         [--preemption on|off|both]
                                         [--groups QUOTAS.json] [--quotas none,hard,borrow]

The trace is a CSV with the header
``arrive_s,user,nnodes,gpus_per_node,run_s,time_limit_s,priority,preemptible,checkpoint_s,group``
(bench/trace_gen.py makes one; the last five columns may be left out): a task arrives at
``arrive_s``, runs ``run_s`` seconds of work once started (or until its time limit, where Argus
stops it), and the schedulers know only ``time_limit_s`` (empty: none). ``priority`` is normal
(the default) or high; ``preemptible`` true or false (the default); ``checkpoint_s`` the seconds
of work between two checkpoints (verl's ``save_freq`` steps; default 600); ``group`` its user's
quota group (empty: none).

Groups (``--groups``: their quotas, JSON as bench/trace_gen.py's ``--quotas-out`` writes it) run
the default policy once per ``--quotas`` mode: ``none`` (no quotas, fair share among users),
``hard`` (each group within its nominal: borrow limit 0) and ``borrow`` (the quotas as given:
borrowing idle quota, reclaim taking it back). Under quotas admission gets ``groups=`` and the
order is fair share across groups first (fairshare.fair_tree). A reclaimed victim stops when
reclaim.stops_at says (its next checkpoint when due within ARGUS_RECLAIM_GRACE_S, else at once),
goes back to the queue in its place, and resumes from its last checkpoint, as a preempted one.
After the run's line comes one per group: ``gpu_h``, ``borrowed_share``, ``quota_wait_mean_s`` /
``quota_wait_max_s`` (how long its tasks waited while they fit in its nominal quota and other
groups borrowed: the time a group below its quota waited to get it back), ``wasted_gpu_h``,
``utilization`` (of its nominal quota; above 1 when it borrowed) and ``cluster_share``. Tasks a
hard quota can never hold (larger than their group's nominal) are counted as ``never_started``.

An event simulation: at each arrival, end and preemption stop, the queue is ordered by
tasks.queue.fairshare.order and admitted by tasks.scheduler.admission.decide, the very
functions the scheduler's tick calls (tasks/scheduler/launch.py), over ``--nodes`` worker nodes of
``--gpus`` GPUs. Admission is instantaneous and a started task runs exactly its work: the figures
compare policies, not Ray's start-up costs.

Preemption as Argus does it, each pass shaped like tasks.scheduler.launch.admit: decide() is
given the grace and the victims that yield (preempt.yielded) and names the victims; the choices
whose task would no longer start once its victims are gone are withdrawn by
admission.preemption_holds, as launch._withdraw_unserved does, and those whose task no longer
waits, as watch._preempt_due does. A victim runs on until its next checkpoint after it was
chosen or until ARGUS_PREEMPT_GRACE_S passes, whichever comes first (watch._preempt_due), then
stops, goes back to the queue in its place (its arrival) and later resumes from its last
checkpoint: the work since that checkpoint is done twice (``wasted_gpu_h``: GPUs x seconds
redone). While it stops, admission sees it as stopping, ending at chosen + grace
(launch.running_now). The one rule modelled here rather than called: a task that resumed after
a preemption is passed to decide() as not preemptible until it has run ARGUS_PREEMPT_MIN_RUN_S,
as launch.running_now does. The scheduler ticks every few seconds; here a pass that changed
anything is followed at once by another, until one changes nothing (what the next tick does).

Policies: ``strict_fifo``, ``best_effort_fifo`` and ``backfill`` (EASY backfill) with plain
priority + FIFO order and no preemption, and ``default``: what ships, read from the settings
(ARGUS_SCHEDULING_POLICY, fair share per ARGUS_FAIR_SHARE_WINDOW_S / _HALF_LIFE_S, preemption per
ARGUS_PREEMPTION / ARGUS_PREEMPT_GRACE_S / ARGUS_PREEMPT_MIN_RUN_S, ARGUS_DEFAULT_TIME_LIMIT_S for
tasks without a limit, and the ARGUS_USER_MAX_RUNNING_* site limits). ``--preemption off`` runs
every policy without preemption; ``both`` runs each policy that preempts twice, on the same trace,
and adds a line comparing the two.

Prints one JSON object per policy per line: ``policy``, ``mean_wait_s``, ``p95_wait_s``,
``max_wait_s``, ``utilization`` (busy GPU-seconds, redone work included, over the cluster's
GPU-seconds from the first arrival to the last end), ``preemptions`` (victims stopped),
``withdrawn``, ``wasted_gpu_h``, ``high_mean_wait_s``, ``high_p95_wait_s``,
``normal_mean_wait_s``, ``unsettled`` (instants where passes never stopped changing things),
``longest_waiter_gpus`` / ``_group`` (the task that waited longest) and more; ``default`` also
gets its ratios to ``backfill``. A task's wait is all its time in the queue, before its first
start and after each preemption.
"""

from __future__ import annotations

import argparse
import csv
import heapq
import json
import math
import os
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tasks.queue import fairshare  # noqa: E402
from tasks.queue.request import Request  # noqa: E402
from tasks.scheduler import admission, reclaim  # noqa: E402
from tasks.scheduler.quotas import UNGROUPED, GroupQuota, with_ungrouped  # noqa: E402
from tasks.scheduler.rooms import Room  # noqa: E402

PRIORITY = {"normal": 0, "high": 10}
HIGH = PRIORITY["high"]
BOOLEAN = {"": False, "false": False, "0": False, "no": False, "true": True, "1": True, "yes": True}
DEFAULT_CHECKPOINT_S = 600.0
# Float sums of seconds: a progress within this of a checkpoint is at it.
EPSILON = 1e-6
# Passes at one instant before giving up on it settling (counted as ``unsettled``): a choice
# made and withdrawn on every tick would never settle.
MAX_PASSES = 10
# Rounds of events at one instant before the simulation gives up (each round up to MAX_PASSES).
MAX_ROUNDS = 100


@dataclass
class Task:
    key: int
    arrive: float
    user: str
    nnodes: int
    gpus_per_node: int
    run_s: float
    limit_s: float | None
    priority: int
    preemptible: bool
    checkpoint_s: float = DEFAULT_CHECKPOINT_S
    group: str = UNGROUPED  # its user's quota group ("": none)
    saved_s: float = 0.0  # work in its last checkpoint: where its next attempt resumes
    queued_since: float = 0.0
    waited: float = 0.0
    started: float | None = None
    placement: dict[str, int] = field(default_factory=dict)
    ends_at: float = 0.0
    # Chosen as a victim: when, for which waiting task, and when it really stops.
    chosen_at: float | None = None
    chosen_for: int | None = None
    stopping_at: float | None = None
    preempted: int = 0  # times stopped for another task
    # The task it was last stopped for, until that task starts: a yield is served once its
    # task has started, even if that task is later stopped in turn (else a victim and the task
    # it yielded to, reclaimed for it later, would each wait for the other for ever).
    yielded_to: int | None = None
    attempt: int = 0
    reclaimed: bool = False  # the stop it is chosen for is a reclaim
    borrowed: bool = False  # this attempt was admitted beyond its group's nominal quota
    owed_wait: float = 0.0  # seconds it waited within its group's quota while others borrowed

    @property
    def gpus(self) -> int:
        return self.nnodes * self.gpus_per_node

    def progress(self, at: float) -> float:
        """Work done by ``at`` in this attempt, from the start of the task."""
        assert self.started is not None
        return self.saved_s + at - self.started

    def next_checkpoint(self, at: float) -> float:
        """When this attempt next saves a checkpoint strictly after ``at`` (verl saves every
        ``save_freq`` steps, counted from the task's first step)."""
        done = self.progress(at)
        boundary = (math.floor((done + EPSILON) / self.checkpoint_s) + 1) * self.checkpoint_s
        return at + boundary - done

    def last_checkpoint(self, at: float) -> float | None:
        """When this attempt last saved a checkpoint, by ``at`` (None: not yet; what Argus reads
        from the trainer's checkpoint folder, Attempt.checkpoint_at)."""
        done = self.progress(at)
        boundary = math.floor((done + EPSILON) / self.checkpoint_s) * self.checkpoint_s
        return at - (done - boundary) if boundary > self.saved_s + EPSILON else None


@dataclass(frozen=True)
class Config:
    policy: str
    scheduling: str
    fair_window_s: float = 0.0
    half_life_s: float = 0.0
    preemption: bool = False
    grace_s: float = 0.0
    default_limit_s: float | None = None
    caps: admission.Caps | None = None
    shortest_first: bool = False
    min_run_s: float = 0.0  # ARGUS_PREEMPT_MIN_RUN_S, applied as launch.running_now does
    # Quota groups (QUOTA_MODES): None, no quotas and fair share among users only; else each
    # group's quota as admission reads it, and fair share across groups first.
    quotas: dict[str, GroupQuota] | None = None
    quota_mode: str = "none"
    reclaim_grace_s: float = 0.0  # ARGUS_RECLAIM_GRACE_S


# How a run treats the trace's groups: "none", as if there were none; "hard", each group within
# its nominal quota (borrow limit 0); "borrow", the quotas as given, borrowing idle quota and
# taking it back by reclaim.
QUOTA_MODES = ("none", "hard", "borrow")


def with_quotas(config: Config, quotas: dict[str, GroupQuota], mode: str) -> Config:
    """``config`` under ``quotas`` in one of QUOTA_MODES."""
    if mode == "none":
        return replace(config, quotas=None, quota_mode=mode)
    if mode == "hard":
        quotas = {name: replace(quota, borrow_limit=0) for name, quota in quotas.items()}
    return replace(config, quotas=quotas, quota_mode=mode)


def read_quotas(text: str) -> dict[str, GroupQuota]:
    """Quotas from JSON (or a file holding it): ``{"vision": {"nominal": 24, "borrow_limit":
    null, "lend_limit": 8, "weight": 1}, ...}`` (all but nominal may be left out). A bad entry
    is a SystemExit naming it."""
    path = Path(text)
    try:
        raw = json.loads(path.read_text() if path.is_file() else text)
    except (OSError, ValueError) as error:
        raise SystemExit(f"--groups: neither a JSON file nor JSON: {error}") from None
    if not isinstance(raw, dict):
        raise SystemExit("--groups: a JSON object of groups, {name: {nominal: GPUs, ...}}")
    quotas = {}
    known = {"nominal", "borrow_limit", "lend_limit", "weight"}
    for name, entry in raw.items():
        if not isinstance(entry, dict) or set(entry) - known or "nominal" not in entry:
            raise SystemExit(f"--groups: group {name!r}: an object with nominal and optionally {sorted(known)}")
        try:
            quota = GroupQuota(
                nominal=int(entry["nominal"]),
                borrow_limit=None if entry.get("borrow_limit") is None else int(entry["borrow_limit"]),
                lend_limit=None if entry.get("lend_limit") is None else int(entry["lend_limit"]),
                weight=float(entry.get("weight", 1.0)),
            )
        except (TypeError, ValueError) as error:
            raise SystemExit(f"--groups: group {name!r}: {error}") from None
        limits = (quota.borrow_limit or 0, quota.lend_limit or 0)
        if quota.nominal < 0 or min(limits) < 0 or not quota.weight > 0:
            raise SystemExit(f"--groups: group {name!r}: GPUs may not be negative, the weight must be positive")
        quotas[str(name)] = quota
    return quotas


def read_trace(path: Path) -> list[Task]:
    with path.open(newline="") as handle:
        return read_rows(csv.DictReader(handle))


REQUIRED = ("arrive_s", "user", "nnodes", "gpus_per_node", "run_s")


def _field(row: dict[str, str], name: str) -> str:
    return (row.get(name) or "").strip().lower()


def read_rows(rows: Iterable[dict[str, str]]) -> list[Task]:
    """Tasks from CSV rows (header as above); ``time_limit_s`` empty or 0: none. A bad row is a
    SystemExit naming its line and field."""
    tasks = []
    for key, row in enumerate(rows):
        line = key + 2  # the header is line 1
        missing = [name for name in REQUIRED if not (row.get(name) or "").strip()]
        if missing:
            raise SystemExit(f"line {line}: {', '.join(missing)} missing")
        priority, preemptible = _field(row, "priority") or "normal", _field(row, "preemptible")
        if priority not in PRIORITY:
            raise SystemExit(f"line {line}: priority {priority!r}: use normal or high")
        if preemptible not in BOOLEAN:
            raise SystemExit(f"line {line}: preemptible {preemptible!r}: use true or false")
        try:
            limit = _field(row, "time_limit_s")
            checkpoint = _field(row, "checkpoint_s")
            task = Task(
                key=key,
                arrive=float(row["arrive_s"]),
                user=row["user"].strip(),
                nnodes=int(row["nnodes"]),
                gpus_per_node=int(row["gpus_per_node"]),
                run_s=float(row["run_s"]),
                limit_s=float(limit) if limit and float(limit) > 0 else None,
                priority=PRIORITY[priority],
                preemptible=BOOLEAN[preemptible],
                checkpoint_s=float(checkpoint) if checkpoint else DEFAULT_CHECKPOINT_S,
                group=(row.get("group") or "").strip(),
            )
        except ValueError as error:
            raise SystemExit(f"line {line}: {error}") from None
        if task.nnodes < 1 or task.gpus_per_node < 1 or task.run_s < 0:
            raise SystemExit(f"line {line}: nnodes and gpus_per_node must be at least 1, run_s not negative")
        if not task.checkpoint_s > 0:
            raise SystemExit(f"line {line}: checkpoint_s must be more than 0")
        tasks.append(task)
    return tasks


def configs(names: list[str]) -> list[Config]:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "argus_site.settings")
    os.environ.setdefault("ARGUS_SECRET_KEY", "argus-bench-secret-key")
    from django.conf import settings

    shipped = Config(
        policy="default",
        scheduling=settings.ARGUS_SCHEDULING_POLICY,
        shortest_first=settings.ARGUS_BACKFILL_SHORTEST_FIRST,
        fair_window_s=float(settings.ARGUS_FAIR_SHARE_WINDOW_S or 0),
        half_life_s=float(settings.ARGUS_FAIR_SHARE_HALF_LIFE_S),
        preemption=settings.ARGUS_PREEMPTION,
        grace_s=float(settings.ARGUS_PREEMPT_GRACE_S),
        default_limit_s=float(settings.ARGUS_DEFAULT_TIME_LIMIT_S) or None,
        caps=admission.Caps(settings.ARGUS_USER_MAX_RUNNING_GPUS, settings.ARGUS_USER_MAX_RUNNING_TASKS),
        min_run_s=float(settings.ARGUS_PREEMPT_MIN_RUN_S),
        reclaim_grace_s=float(settings.ARGUS_RECLAIM_GRACE_S),
    )
    known = {name: Config(policy=name, scheduling=name) for name in admission.POLICIES}
    known["default"] = shipped
    unknown = [name for name in names if name not in known]
    if unknown:
        raise SystemExit(f"unknown policies: {', '.join(unknown)} (known: {', '.join(known)})")
    return [known[name] for name in names]


class Simulation:
    def __init__(self, tasks: list[Task], nodes: int, gpus: int, config: Config) -> None:
        self.config = config
        self.tasks = [Task(**{**vars(t), "placement": {}, "yielded_to": None}) for t in tasks]
        for task in self.tasks:
            task.queued_since = task.arrive
        self.totals = {f"n{index}": Room(float(gpus), 0.0) for index in range(nodes)}
        self.events: list[tuple[float, int, str, int, int]] = []
        self.sequence = 0
        self.waiting: dict[int, Task] = {}
        self.running: dict[int, Task] = {}
        self.usage: dict[str, float] = {}
        self.usage_at = 0.0
        self.busy_gpu_s = 0.0
        self.clock = 0.0
        self.preemptions = 0  # victims stopped (reclaims included)
        self.reclaims = 0  # of which reclaims
        total = int(nodes * gpus)
        # The groups' quotas, the users without one as the group "" (as admission sees them).
        self.quotas = with_ungrouped(config.quotas, total) if config.quotas is not None else {}
        self.group_busy_s: dict[str, float] = {}  # GPU-seconds run, redone work included
        self.group_borrowed_s: dict[str, float] = {}  # of which by attempts admitted as borrowed
        self.group_wasted_s: dict[str, float] = {}
        self.withdrawn = 0  # choices withdrawn before the victim stopped
        self.wasted_gpu_s = 0.0  # work redone after preemptions, in GPU-seconds
        self.unsettled = 0  # instants where passes kept changing things (MAX_PASSES reached)
        self.unplaceable: list[int] = []
        self.span = 0.0  # the first arrival to the last end, once run
        for task in self.tasks:
            self._push(task.arrive, "arrive", task)

    def _push(self, at: float, kind: str, task: Task) -> None:
        self.sequence += 1
        heapq.heappush(self.events, (at, self.sequence, kind, task.key, task.attempt))

    def _advance(self, to: float) -> None:
        seconds = to - self.clock
        if seconds > 0:
            half_life = self.config.half_life_s
            self.usage = {user: fairshare.decayed(used, seconds, half_life) for user, used in self.usage.items()}
            for task in self.running.values():
                self.busy_gpu_s += task.gpus * seconds
                self.usage[task.user] = self.usage.get(task.user, 0.0) + task.gpus * seconds
                used = task.gpus * seconds
                self.group_busy_s[task.group] = self.group_busy_s.get(task.group, 0.0) + used
                if task.borrowed:
                    self.group_borrowed_s[task.group] = self.group_borrowed_s.get(task.group, 0.0) + used
            if self.quotas:
                self._owe(seconds)
        self.clock = to

    def _owe(self, seconds: float) -> None:
        """Charge ``seconds`` to each waiting task that would fit in its group's nominal quota
        while other groups run on borrowed GPUs: the time its group waits to get its quota back."""
        in_use: dict[str, int] = {}
        borrowing: dict[str, int] = {}
        for task in self.running.values():
            in_use[task.group] = in_use.get(task.group, 0) + task.gpus
            if task.borrowed:
                borrowing[task.group] = borrowing.get(task.group, 0) + task.gpus
        lent = sum(borrowing.values())
        for task in self.waiting.values():
            quota = self.quotas.get(task.group)
            if quota is None or in_use.get(task.group, 0) + task.gpus > quota.nominal:
                continue
            if lent - borrowing.get(task.group, 0) > 0:
                task.owed_wait += seconds

    def _planned(self, task: Task) -> float | None:
        return task.limit_s if task.limit_s is not None else self.config.default_limit_s

    def run(self) -> dict[str, float | int | str]:
        first = min((t.arrive for t in self.tasks), default=0.0)
        self.clock = first
        rounds = 0  # rounds of events and passes at this instant
        while self.events:
            at = self.events[0][0]
            rounds = rounds + 1 if at == self.clock else 1
            if rounds > MAX_ROUNDS:
                # Passes that keep making stops due at once: a loop of the scheduler's, not a figure.
                raise SystemExit(f"the simulation makes no progress at {at:.0f} s: events keep coming at that instant")
            self._advance(at)
            while self.events and self.events[0][0] == at:
                _, _, kind, key, attempt = heapq.heappop(self.events)
                task = self.tasks[key]
                if attempt != task.attempt:
                    continue  # planned for an attempt that has ended since
                getattr(self, f"_on_{kind}")(task)
            self._schedule()
        return self._report(first)

    def _on_arrive(self, task: Task) -> None:
        if sum(1 for room in self.totals.values() if room.gpus >= task.gpus_per_node) < task.nnodes:
            self.unplaceable.append(task.key)  # larger than the cluster: it would wait for ever
            return
        self.waiting[task.key] = task

    def _on_end(self, task: Task) -> None:
        del self.running[task.key]
        task.attempt += 1  # a preemption stop planned for it is void now

    def _on_wake(self, task: Task) -> None:
        """A resumed task has run ARGUS_PREEMPT_MIN_RUN_S: preemptible again (the pass that
        follows every event may choose it)."""

    def _on_stop(self, task: Task) -> None:
        """A victim saved its checkpoint or its grace ended: it stops, loses the work since its
        last checkpoint, and waits again in its place (yielding to the task it was stopped for
        while that one waits). The task it serves still waits: had it started, the pass after
        would have withdrawn the choice."""
        if task.stopping_at != self.clock:
            return  # withdrawn meanwhile (or chosen again, with a later stop)
        assert task.chosen_for is not None
        task.yielded_to = task.chosen_for
        del self.running[task.key]
        done = task.progress(self.clock)
        saved = math.floor((done + EPSILON) / task.checkpoint_s) * task.checkpoint_s
        task.saved_s = max(task.saved_s, min(saved, done))
        lost = task.gpus * max(0.0, done - task.saved_s)
        self.wasted_gpu_s += lost
        self.group_wasted_s[task.group] = self.group_wasted_s.get(task.group, 0.0) + lost
        self.preemptions += 1
        self.reclaims += task.reclaimed
        task.preempted += 1
        task.chosen_at = task.chosen_for = task.stopping_at = None
        task.reclaimed = False
        task.attempt += 1
        task.queued_since = self.clock
        self.waiting[task.key] = task

    def _free(self) -> dict[str, Room]:
        free = dict(self.totals)
        for task in self.running.values():
            for node, gpus in task.placement.items():
                free[node] = Room(free[node].gpus - gpus, 0.0)
        return free

    def _settling_in(self, task: Task) -> bool:
        """launch.running_now: a task that resumed after a preemption or a reclaim runs a while
        before either chooses it again."""
        assert task.started is not None
        return bool(task.preempted) and self.clock - task.started < self.config.min_run_s

    def _preemptible(self, task: Task) -> bool:
        return task.preemptible and not self._settling_in(task)

    def _queue(self) -> list[Request]:
        config = self.config
        users = {t.user for t in self.waiting.values()} | {t.user for t in self.running.values()}
        factor = {}
        if config.fair_window_s:
            # Fair share across groups first when they have quotas (tasks.queue's fair tree); with
            # none, every user is in the group "" and the factors are the classic ones.
            group_of = {t.user: t.group for t in self.tasks} if self.quotas else {}
            weights = {name: quota.weight for name, quota in self.quotas.items()}
            factor = fairshare.fair_tree(self.usage, {}, users, group_of, weights).factor
        ordered = fairshare.order(
            [fairshare.Waiting(t.key, t.user, t.priority, t.arrive) for t in self.waiting.values()],
            factor,
            config.fair_window_s,
        )
        queue = []
        for item in ordered:
            task = self.tasks[item.key]
            queue.append(
                Request(
                    task.key,
                    task.nnodes,
                    task.gpus_per_node,
                    0.0,
                    task.user,
                    self._planned(task),
                    task.priority,
                    group=task.group if self.quotas else UNGROUPED,
                )
            )
        return queue

    def _running(self) -> list[admission.Running]:
        """The running tasks as launch.running_now passes them."""
        running = []
        for task in self.running.values():
            planned = self._planned(task)
            assert task.started is not None
            # What the scheduler knows: a victim ends by its grace, not at the checkpoint it
            # cannot foresee; a reclaimed one when reclaim.stops_at said.
            if task.reclaimed:
                ends: float | None = task.stopping_at
            elif task.chosen_at is not None:
                ends = task.chosen_at + self.config.grace_s
            else:
                ends = task.started + planned if planned is not None else None
            running.append(
                admission.Running(
                    task.key,
                    task.placement,
                    0.0,
                    ends,
                    task.user,
                    task.priority,
                    self._preemptible(task),
                    task.started,
                    stopping=task.chosen_at is not None,
                    group=task.group if self.quotas else UNGROUPED,
                    borrowed=task.borrowed,
                    checkpoint_at=task.last_checkpoint(self.clock),
                    checkpoint_every_s=task.checkpoint_s,
                    settling_in=self._settling_in(task),
                )
            )
        return running

    def _caps(self) -> dict[str, admission.Caps] | None:
        caps = self.config.caps
        if caps is None or not (caps.max_gpus or caps.max_tasks):
            return None
        users = {t.user for t in self.waiting.values()} | {t.user for t in self.running.values()}
        return {user: caps for user in users}

    def _schedule(self) -> None:
        for _ in range(MAX_PASSES):
            if not self._pass():
                return
        self.unsettled += 1

    def _pass(self) -> bool:
        """One tick's watch and admission (tasks.scheduler.tick): whether it changed anything."""
        changed = self._watch()
        if not self.waiting:
            return changed
        config = self.config
        queue, running, caps, free = self._queue(), self._running(), self._caps(), self._free()
        yielded = {t.key: t.yielded_to for t in self.waiting.values() if t.yielded_to in self.waiting}
        decision = admission.decide(
            queue,
            free,
            self.totals,
            policy=config.scheduling,
            now=self.clock,
            running=running,
            caps=caps,
            preemption=config.preemption,
            shortest_first=config.shortest_first,
            grace=config.grace_s,
            yielded=yielded,
            groups=self.quotas or None,
            reclaim_grace=config.reclaim_grace_s,
        )
        changed = self._withdraw_unserved(queue, running, free, caps) or changed
        for victim_key, beneficiary in decision.preempt.items():
            victim = self.running[victim_key]
            victim.chosen_at, victim.chosen_for = self.clock, beneficiary
            # It stops once it has saved a checkpoint since it was chosen, or when its grace ends.
            victim.stopping_at = min(victim.next_checkpoint(self.clock), self.clock + config.grace_s)
            if victim.stopping_at < victim.ends_at:
                self._push(victim.stopping_at, "stop", victim)
        views = {holder.key: holder for holder in running}
        for victim_key, beneficiary in decision.reclaim.items():
            victim = self.running[victim_key]
            victim.chosen_at, victim.chosen_for, victim.reclaimed = self.clock, beneficiary, True
            # At its next checkpoint when due within the grace, else at once (reclaim.stops_at).
            victim.stopping_at = reclaim.stops_at(views[victim_key], self.clock, config.reclaim_grace_s)
            if victim.stopping_at < victim.ends_at:
                self._push(victim.stopping_at, "stop", victim)
        for request, placement in decision.admitted:
            task = self.waiting.pop(request.key)
            task.waited += self.clock - task.queued_since
            task.started = self.clock
            task.placement = placement
            task.borrowed = request.key in decision.borrowing
            for other in self.waiting.values():
                if other.yielded_to == task.key:
                    other.yielded_to = None  # served
            # Argus stops a task at its time limit, which counts from each attempt's start.
            left = task.run_s - task.saved_s
            length = left if task.limit_s is None else min(left, task.limit_s)
            task.ends_at = self.clock + length
            self.running[task.key] = task
            self._push(task.ends_at, "end", task)
            if task.preempted and config.min_run_s and config.min_run_s < length:
                self._push(self.clock + config.min_run_s, "wake", task)
        return changed or bool(decision.preempt) or bool(decision.reclaim) or bool(decision.admitted)

    def _withdraw(self, task: Task) -> None:
        task.chosen_at = task.chosen_for = task.stopping_at = None
        task.reclaimed = False
        self.withdrawn += 1

    def _watch(self) -> bool:
        """watch._preempt_due: a victim whose task no longer waits runs on; one due stops (a
        reclaim's victim with no checkpoint due within its grace is due at once: the tick's
        watch stops it before the next admission could withdraw it)."""
        gone = [t for t in self.running.values() if t.chosen_for is not None and t.chosen_for not in self.waiting]
        for task in gone:
            self._withdraw(task)
        due = [t for t in self.running.values() if t.stopping_at is not None and t.stopping_at <= self.clock]
        for task in due:
            self._on_stop(task)
        return bool(gone) or bool(due)

    def _withdraw_unserved(
        self,
        queue: list[Request],
        running: list[admission.Running],
        free: dict[str, Room],
        caps: dict[str, admission.Caps] | None,
    ) -> bool:
        """launch._withdraw_unserved: the victims run on when the task they make room for would
        not start once they are gone (admission.preemption_holds), on the pass's own view."""
        victims: dict[int, list[admission.Running]] = {}
        for holder in running:
            beneficiary = self.running[holder.key].chosen_for
            if beneficiary is not None:
                victims.setdefault(beneficiary, []).append(holder)
        requests = {request.key: request for request in queue}
        changed = False
        for beneficiary, chosen in victims.items():
            reclaimed = any(self.running[holder.key].reclaimed for holder in chosen)
            groups = self.quotas or None
            if admission.preemption_holds(
                requests[beneficiary], chosen, free, running, caps, groups, self.totals, reclaim=reclaimed
            ):
                for holder in chosen:
                    self._withdraw(self.running[holder.key])
                changed = True
        return changed

    def _report(self, first: float) -> dict[str, float | int | str]:
        # Tasks still waiting when nothing is left to end: their quota can never hold them (a task
        # larger than its group's nominal under hard quotas). Their waits have no end: counted
        # apart (``never_started``), not averaged.
        done = [t for t in self.tasks if t.key not in self.unplaceable and t.started is not None]
        waits = sorted(t.waited for t in done)
        longest = max(done, key=lambda t: t.waited, default=None)
        high = sorted(t.waited for t in done if t.priority >= HIGH)
        normal = sorted(t.waited for t in done if t.priority < HIGH)
        last_end = max((t.ends_at for t in done), default=first)
        span = max(1e-9, last_end - first)
        self.span = span
        capacity = sum(room.gpus for room in self.totals.values()) * span
        config = self.config
        result: dict[str, float | int | str] = {
            "policy": config.policy,
            "scheduling": config.scheduling,
            "fair_share_window_s": config.fair_window_s,
            "preemption": int(config.preemption),
            "quotas": config.quota_mode,
            "tasks": len(done),
            "never_fit": len(self.unplaceable),
            "never_started": len(self.waiting),
            "mean_wait_s": mean(waits),
            "p95_wait_s": round(percentile(waits, 95), 1) if waits else 0.0,
            "max_wait_s": round(waits[-1], 1) if waits else 0.0,
            # Who waited longest: its GPUs and group (with quotas, whether it needed more than its
            # group's nominal, so could only run on borrowed GPUs).
            "longest_waiter_gpus": longest.gpus if longest is not None else 0,
            "longest_waiter_group": longest.group if longest is not None else "",
            "utilization": round(self.busy_gpu_s / capacity, 4),
            "makespan_s": round(span, 1),
            "preemptions": self.preemptions,
            "reclaims": self.reclaims,
            "preempted_tasks": sum(1 for t in done if t.preempted),
            "withdrawn": self.withdrawn,
            "wasted_gpu_h": round(self.wasted_gpu_s / 3600, 3),
            "unsettled": self.unsettled,
            "high_tasks": len(high),
            "high_mean_wait_s": mean(high),
            "high_p95_wait_s": round(percentile(high, 95), 1) if high else 0.0,
            "normal_mean_wait_s": mean(normal),
        }
        return result

    def per_group(self, quotas: Mapping[str, GroupQuota] | None = None) -> list[dict[str, float | int | str | None]]:
        """Once run, a row per group of the trace (the quotas' groups first): its GPU-hours
        (redone work included), the share of them run on borrowed quota, how long its tasks
        waited while within its nominal quota and other groups borrowed (``quota_wait``: the
        time a group below its quota waited to get it back; mean over the tasks that waited so,
        and the longest), the work it redid after preemptions and reclaims, and its utilization:
        its GPU-seconds over its nominal quota's over the run (above 1: it borrowed more than it
        lent), and over the cluster's. ``quotas``: the nominal quotas to measure against when
        the run had none (its mode "none")."""
        total = int(sum(room.gpus for room in self.totals.values()))
        nominal = self.quotas or (with_ungrouped(quotas, total) if quotas else {})
        names = list(nominal) + sorted({t.group for t in self.tasks} - set(nominal))
        cluster = sum(room.gpus for room in self.totals.values()) * self.span
        rows = []
        for name in names:
            mine = [
                t for t in self.tasks if t.group == name and t.key not in self.unplaceable and t.started is not None
            ]
            if not mine and name == UNGROUPED:
                continue  # the users without a group, when there are none
            owed = sorted(t.owed_wait for t in mine if t.owed_wait > 0)
            busy = self.group_busy_s.get(name, 0.0)
            quota = nominal.get(name)
            rows.append(
                {
                    "policy": self.config.policy,
                    "quotas": self.config.quota_mode,
                    "group": name,
                    "nominal_gpus": quota.nominal if quota is not None else None,
                    "tasks": len(mine),
                    "never_started": sum(1 for t in self.waiting.values() if t.group == name),
                    "mean_wait_s": mean(sorted(t.waited for t in mine)),
                    "gpu_h": round(busy / 3600, 1),
                    "borrowed_share": round(self.group_borrowed_s.get(name, 0.0) / busy, 3) if busy else 0.0,
                    "quota_waits": len(owed),
                    "quota_wait_mean_s": mean(owed),
                    "quota_wait_max_s": round(owed[-1], 1) if owed else 0.0,
                    "wasted_gpu_h": round(self.group_wasted_s.get(name, 0.0) / 3600, 3),
                    "utilization": round(busy / (quota.nominal * self.span), 3) if quota and quota.nominal else None,
                    "cluster_share": round(busy / cluster, 3) if cluster else 0.0,
                }
            )
        return rows


def mean(values: list[float]) -> float:
    return round(sum(values) / len(values), 1) if values else 0.0


def percentile(ordered: list[float], p: float) -> float:
    """Nearest-rank percentile of a sorted, non-empty list."""
    rank = max(1, -(-len(ordered) * p // 100))
    return ordered[int(min(rank, len(ordered))) - 1]


def ratio(value: float | int | str, base: float | int | str) -> float | None:
    """``value / base`` to 3 places; 1 when both are 0, None when only the base is."""
    if float(base):
        return round(float(value) / float(base), 3)
    return 1.0 if not float(value) else None


COMPARED = ("preemptions", "wasted_gpu_h", "high_mean_wait_s", "high_p95_wait_s", "normal_mean_wait_s")


def compare(on: dict[str, float | int | str], off: dict[str, float | int | str]) -> dict[str, object]:
    """The same policy on the same trace with preemption and without: each figure as
    [with, without], and the waits' ratios."""
    row: dict[str, object] = {"policy": on["policy"], "compare": "preemption on / off"}
    for name in (*COMPARED, "mean_wait_s", "utilization"):
        row[name] = [on[name], off[name]]
    for name in ("high_mean_wait_s", "high_p95_wait_s", "normal_mean_wait_s"):
        row[f"{name.removesuffix('_s')}_on_vs_off"] = ratio(on[name], off[name])
    return row


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trace", type=Path, required=True)
    parser.add_argument("--nodes", type=int, default=8)
    parser.add_argument("--gpus", type=int, default=8)
    parser.add_argument("--policies", default="strict_fifo,best_effort_fifo,backfill,default")
    parser.add_argument(
        "--preemption",
        choices=("on", "off", "both"),
        default="on",
        help="on: as each policy has it; off: none; both: each policy that preempts, with and without",
    )
    parser.add_argument(
        "--groups",
        help='the groups\' quotas, JSON or a file of it: {"vision": {"nominal": 24, "borrow_limit": null, '
        '"lend_limit": null, "weight": 1}, ...} (the trace\'s group column names them)',
    )
    parser.add_argument(
        "--quotas",
        default=",".join(QUOTA_MODES),
        help="with --groups, the default policy under each of: none (no quotas), hard (borrow limit 0), "
        "borrow (the quotas as given, with reclaim)",
    )
    args = parser.parse_args(argv)
    if not args.trace.is_file():
        raise SystemExit(f"--trace {args.trace}: no such file")
    tasks = read_trace(args.trace)
    quotas = read_quotas(args.groups) if args.groups else None
    modes = [mode.strip() for mode in args.quotas.split(",") if mode.strip()] if quotas else ["none"]
    unknown = [mode for mode in modes if mode not in QUOTA_MODES]
    if unknown:
        raise SystemExit(f"--quotas: unknown {', '.join(unknown)} (known: {', '.join(QUOTA_MODES)})")
    easy: dict[str, float | int | str] | None = None
    for config in configs([name.strip() for name in args.policies.split(",") if name.strip()]):
        if args.preemption == "off":
            config = replace(config, preemption=False)
        # The quotas apply to what ships; the others stay the references they are.
        for mode in modes if config.policy == "default" else ["none"]:
            run_config = with_quotas(config, quotas, mode) if quotas else config
            simulation = Simulation(tasks, args.nodes, args.gpus, run_config)
            result = simulation.run()
            if config.policy == "backfill":
                easy = result
            if config.policy == "default" and easy is not None:
                for name in ("mean_wait_s", "max_wait_s"):
                    result[f"{name.removesuffix('_s')}_vs_backfill"] = ratio(result[name], easy[name]) or 1.0
                result["utilization_vs_backfill"] = round(float(result["utilization"]) - float(easy["utilization"]), 4)
            print(json.dumps(result), flush=True)
            if quotas and config.policy == "default":
                for row in simulation.per_group(quotas):
                    print(json.dumps(row), flush=True)
            if args.preemption == "both" and config.preemption:
                off = Simulation(tasks, args.nodes, args.gpus, replace(run_config, preemption=False)).run()
                print(json.dumps(off), flush=True)
                print(json.dumps(compare(result, off)), flush=True)


if __name__ == "__main__":
    main()
