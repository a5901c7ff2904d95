"""A sweep's life beside its trials' (each a task): it ends when its last trial ends and the
tick has read that trial's last values (its best trial and its SWEEP_SUCCEEDED need them), and
runs again when an operator requeues a trial.

tasks.models calls these from a task's moves (Task._ended, Task.requeue), so this module sits
below it: it reaches the trials through the Sweep's reverse relation, never by importing Task.
The tick's check (``finish_sweeps``) is the safety net, as tasks.pipelines.waiting.finish_pipelines
is for pipelines.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone

from tasks.choices import TERMINAL_STATES, EventKind, SweepState, TaskState
from tasks.lease import request_tick
from tasks.sweeps.models import Sweep

# What the trial whose end ended its sweep records, which the webhooks send. A canceled sweep
# records none, as a canceled pipeline: its owner canceled it and knows.
END_EVENTS: dict[str, str] = {
    SweepState.SUCCEEDED: EventKind.SWEEP_SUCCEEDED,
    SweepState.FAILED: EventKind.SWEEP_FAILED,
}

UNFINISHED = tuple(state for state in TaskState if state not in TERMINAL_STATES)

# An ended trial's last read (tasks.sweeps.curves) is due for this long after its end: beyond it
# (shared storage unreadable all that while) its curve stays as last read, and its sweep ends
# without it, rather than every ended trial being looked at each tick for ever.
AFTER_END = timedelta(minutes=10)

# A trial as the end reads it: (task pk, state, finished_at).
TrialRow = tuple[int, str, datetime | None]


def sweep_state_of(states: Sequence[str], *, canceled: bool) -> str:
    """A sweep's state from its trials' states (SweepState says how): an early-stopped trial is
    CANCELED and counts as ended, never as a success."""
    if not states or any(state not in TERMINAL_STATES for state in states):
        return SweepState.RUNNING
    if TaskState.SUCCEEDED in states:
        return SweepState.SUCCEEDED
    return SweepState.CANCELED if canceled else SweepState.FAILED


def trial_ended(sweep_pk: int, actor: str) -> None:
    """In a trial's last move's transaction (Task._ended): a place under the sweep's cap is
    free, so a tick is asked for when trials wait for one (tasks.sweeps.cap queues them); else
    the sweep ends if this was its last unfinished trial."""
    sweep = Sweep.objects.get(pk=sweep_pk)
    rows = _trials(sweep)
    if any(state == TaskState.WAITING for _, state, _ in rows):
        request_tick()
    else:
        _finish(sweep, rows, actor)


def finish_if_done(sweep: Sweep, actor: str) -> bool:
    """When every trial has ended: the sweep's state from theirs, written once (a conditional
    UPDATE), and SWEEP_SUCCEEDED / SWEEP_FAILED on the trial that ended last."""
    return _finish(sweep, _trials(sweep), actor)


def finish_sweeps(actor: str) -> None:
    """Sweeps still RUNNING whose trials have all ended (each trial's last move ends its sweep in
    its own transaction; two last trials ending at once on PostgreSQL can each miss the other).
    One query, bounded by the running sweeps."""
    for sweep in Sweep.objects.filter(state=SweepState.RUNNING).exclude(trials__state__in=UNFINISHED):
        finish_if_done(sweep, actor)


def reopen(sweep_pk: int) -> None:
    """An operator requeued a trial: its sweep runs again, and its end is judged anew. A person's
    earlier cancel of the sweep is over (it would hold the requeued trial back from the cap's
    release, and end the sweep CANCELED for a trial that then ran and failed)."""
    Sweep.objects.filter(pk=sweep_pk).update(
        state=SweepState.RUNNING, finished_at=None, canceled_at=None, updated_at=timezone.now()
    )


def _trials(sweep: Sweep) -> list[TrialRow]:
    return list(sweep.trials.order_by().values_list("pk", "state", "finished_at"))


def last_read_due(now: datetime) -> Q:
    """Trials that ended (within AFTER_END) and whose curve has not been read since: their last
    steps, the last validation among them, are not in their TrialCurve yet. read_at is taken
    before the read: a trial that ended during a read is read again."""
    return Q(state__in=TERMINAL_STATES, finished_at__gte=now - AFTER_END) & (
        Q(trial_curve__read_at__isnull=True) | Q(trial_curve__read_at__lt=F("finished_at"))
    )


def _finish(sweep: Sweep, rows: Sequence[TrialRow], actor: str) -> bool:
    state = sweep_state_of([state for _, state, _ in rows], canceled=sweep.canceled_at is not None)
    if state == SweepState.RUNNING:
        return False
    now = timezone.now()
    if sweep.metric and sweep.trials.filter(last_read_due(now), attempts__isnull=False).exists():
        # Its best trial, the API's values and what a SWEEP_SUCCEEDED receiver reads next need the
        # ended trials' last records (the last validation, often the best): the tick's curve pass
        # reads them after sync, and its finish_sweeps ends the sweep then, in the same tick. A
        # trial that never ran (canceled while it waited) has nothing to read.
        request_tick()
        return False
    with transaction.atomic():
        ended = Sweep.objects.filter(pk=sweep.pk, state=SweepState.RUNNING)
        if ended.update(state=state, finished_at=now, updated_at=now) != 1:
            return False  # ended already (by the tick's check, or another trial's end)
        sweep.state, sweep.finished_at, sweep.updated_at = state, now, now
        if state in END_EVENTS:
            last_pk = max(rows, key=lambda row: (row[2] or now, row[0]))[0]
            succeeded = sum(1 for _, trial_state, _ in rows if trial_state == TaskState.SUCCEEDED)
            sweep.trials.get(pk=last_pk).record(
                END_EVENTS[state],
                actor=actor,
                message=f"Sweep {sweep.sweep_id} {state.lower()}: {succeeded} of {len(rows)} trials succeeded.",
                data={"sweep_id": sweep.sweep_id, "state": state, "succeeded": succeeded, "trials": len(rows)},
            )
    return True
