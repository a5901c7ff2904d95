"""A sweep's cap (max_concurrent, Slurm's %N): at most that many of its trials are admitted at
once, counting every trial that is neither WAITING nor ended (queued, pending, on Ray); the
others wait, WAITING, and are queued in trial order as places free up.

The tick runs ``release_trials`` just before the dependencies (tasks.scheduler.tick.release), so
a place freed in this tick's sync is filled (and may start) in the same tick. Its reads depend on
how many trials wait for a place, never on the queue's length: one query for the WAITING trials
of the running sweeps, one for how many of those sweeps' trials are admitted; then one move per
trial queued, and each waiting trial's reason written only where it changed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial

from django.db import transaction
from django.db.models import Count
from django.utils import timezone

from tasks.choices import TERMINAL_STATES, Role, SweepState, TaskState
from tasks.models import Event, Task
from tasks.queue import reasons as queue_reasons
from tasks.scheduler.settle import ACTOR
from tasks.scheduler.turns import Budget, guarded
from tasks.sweeps.models import Sweep


@dataclass
class Capped:
    """A running sweep with trials waiting for a place, as the two queries read it."""

    label: str  # its name, else its id
    cap: int | None  # None: no cap (a trial waits only until the next tick)
    admitted: int = 0
    waiting: list[tuple[int, str]] = field(default_factory=list)  # (task pk, its reason now), in trial order

    @property
    def free(self) -> int:
        """Places for waiting trials now."""
        return len(self.waiting) if self.cap is None else max(0, self.cap - self.admitted)

    def reason(self) -> str:
        """``sweep lr-sweep: 2 of 2 trials running``."""
        of = "" if self.cap is None else f" of {self.cap}"
        return f"sweep {self.label}: {self.admitted}{of} trials running"


def capped() -> dict[int, Capped]:
    """The running sweeps (not canceled) with WAITING trials, by the sweep's pk."""
    rows = (
        Task.objects.filter(
            state=TaskState.WAITING,
            sweep__isnull=False,
            sweep__state=SweepState.RUNNING,
            sweep__canceled_at__isnull=True,
        )
        .order_by("sweep_id", "trial_index", "pk")
        .values_list("pk", "sweep_id", "sweep__sweep_id", "sweep__name", "sweep__max_concurrent", "pending__text")
    )
    found: dict[int, Capped] = {}
    for pk, sweep_pk, sweep_id, name, cap, reason in rows:
        found.setdefault(sweep_pk, Capped(name or sweep_id, cap)).waiting.append((pk, reason or ""))
    if found:
        admitted = (
            Task.objects.filter(sweep__isnull=False, sweep_id__in=found)
            .exclude(state__in=(TaskState.WAITING, *TERMINAL_STATES))
            .order_by()
            .values("sweep_id")
            .annotate(n=Count("pk"))
            .values_list("sweep_id", "n")
        )
        for sweep_pk, count in admitted:
            found[sweep_pk].admitted = count
    return found


def release_trials(budget: Budget) -> None:
    """Each running sweep's waiting trials, in trial order, QUEUED while fewer than its cap are
    admitted; the others' reason kept up to date."""
    changed: dict[int, str] = {}
    for sweep_pk, sweep in capped().items():
        queued: set[int] = set()
        for pk, _ in sweep.waiting[: sweep.free]:
            if budget.spent():
                break
            task = Task.objects.select_related("user").filter(pk=pk, state=TaskState.WAITING).first()
            if task is None:
                continue  # moved meanwhile (canceled by its owner)
            if guarded(task, partial(_queue, task, sweep_pk, sweep)) is not None:
                queued.add(pk)
                sweep.admitted += 1
        reason = sweep.reason()[: queue_reasons.MAX_LENGTH]
        changed.update({pk: reason for pk, now in sweep.waiting if pk not in queued and now != reason})
    queue_reasons.write(changed, states=(TaskState.WAITING,))


def _queue(task: Task, sweep_pk: int, sweep: Capped) -> Event | None:
    """The trial QUEUED, unless its sweep was canceled (or ended) since ``capped`` read it: None.
    cancel_sweep sets canceled_at before it cancels the trials one by one, so a trial queued after
    that would reach the queue (and Ray) before its cancel; the sweep's row, locked here and
    written there, orders the two."""
    running = "" if sweep.cap is None else f" ({sweep.admitted + 1} of {sweep.cap} trials running)"
    with transaction.atomic():
        still = Sweep.objects.select_for_update().filter(
            pk=sweep_pk, state=SweepState.RUNNING, canceled_at__isnull=True
        )
        if still.only("pk").first() is None:
            return None
        return task.transition(
            TaskState.QUEUED,
            role=Role.SCHEDULER,
            actor=ACTOR,
            message=f"A place under its sweep's cap is free{running}: queued.",
            queued_at=timezone.now(),
            pending_reason="",
        )
