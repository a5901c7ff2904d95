"""The tick's pass over sweeps' trials, after sync (which keeps each attempt's last logged step)
and before the cancels are sent: refresh each trial's TrialCurve from the curves Argus already
reads (tasks.jobfiles.task_curves, what the task's metrics API reads), and stop the losers of
its early stopping (tasks.sweeps.early_stop) at the rungs each trial newly reached.

A running trial's curve is read again when its logged step moved past what the curve last read
and either reached a rung since (its early stopping waits for no one) or REFRESH_EVERY passed
since the last read: a curve is the whole file logger of the run, read whole (a 10,000-step run
of 60 metrics: 15 MB, over a second), and the pages can wait a little for theirs. A run without
verl's console logger shows no step in its driver log: it is read when its file logger was
written since, at most every REFRESH_EVERY. A trial is read once more after it ended (its last
steps, so that finished trials' curves and rung values are whole). Every read is bounded
(tasks.scheduler.storage) and the pass stops when the tick's budget is spent; what it did not
reach is due at the next tick.

A loser is stopped at once: Task.early_stopped, an EARLY_STOPPED event, then the task's
ordinary cancel (it ends CANCELED through the scheduler's stop, just below in the tick; its
checkpoints stay). The claim is one conditional UPDATE, so a trial that ended meanwhile, one a
person canceled first, or one another tick stopped is left alone.
"""

from __future__ import annotations

import logging
import os
from datetime import UTC, datetime, timedelta

from django.db import transaction
from django.db.models import F, OuterRef, Q, Subquery
from django.utils import timezone

from tasks.attempts import Attempt
from tasks.choices import ACTIVE_STATES, TERMINAL_STATES, EventKind, SweepState, Workload
from tasks.jobfiles import metrics_log, task_curves
from tasks.models import Task
from tasks.scheduler.settle import ACTOR
from tasks.scheduler.storage import bounded
from tasks.scheduler.turns import Budget
from tasks.sweeps.early_stop import Verdict, judge, next_rung, rungs, value_at
from tasks.sweeps.lifecycle import AFTER_END, last_read_due
from tasks.sweeps.models import Mode, RungValue, Sweep, TrialCurve

logger = logging.getLogger(__name__)

# A running trial's curve, for its sweep's page and API, is read at most this often unless it
# reached a rung.
REFRESH_EVERY = timedelta(seconds=30)


def due_trials(now: datetime) -> list[Task]:
    """Trials of sweeps with a metric whose curve is behind: those not ended whose latest attempt
    logged a step past the curve's last read (running, or back in the queue after an attempt that
    ended: its last steps were caught up at its end), and those that ended after the read; least
    lately read first. Also those running with no step seen in their driver log (a run without
    verl's console logger shows its steps only in its file logger). ``read_now`` says which of
    them this tick reads."""
    logged = (
        Attempt.objects.filter(task=OuterRef("pk"), last_step__isnull=False)
        .order_by("-attempt_no")
        .values("last_step")[:1]
    )
    moved = (
        ~Q(state__in=TERMINAL_STATES)
        & Q(logged_step__isnull=False)
        # Another step than the last read's: past it, or short of it in an attempt that resumed from
        # an earlier checkpoint, whose redone steps replace the earlier attempt's on the curve.
        & (Q(trial_curve__read_step__isnull=True) | ~Q(logged_step=F("trial_curve__read_step")))
    )
    ended = last_read_due(now)
    unseen = Q(state__in=ACTIVE_STATES, logged_step__isnull=True)
    # Only running sweeps' trials, and those of sweeps that ended lately (the trial whose end
    # ended its sweep): what the pass looks at grows with what runs, not with every sweep's history.
    live = Q(sweep__state=SweepState.RUNNING) | Q(sweep__finished_at__gte=now - AFTER_END)
    trials = (
        Task.objects.filter(live)
        .exclude(sweep__metric="")
        .annotate(
            logged_step=Subquery(logged),
            curve_read_at=F("trial_curve__read_at"),
            curve_read_step=F("trial_curve__read_step"),
        )
        .filter(moved | ended | unseen)
        .select_related("sweep", "user")
        .order_by(F("trial_curve__read_at").asc(nulls_first=True), "pk")
    )
    return list(trials)


def refresh_trials(budget: Budget, now: datetime | None = None) -> int:
    """Refresh the due trials' curves while ``budget`` lasts; returns the trials stopped early."""
    stopped = 0
    now = now or timezone.now()
    for task in due_trials(now):
        if budget.spent():
            break
        try:
            if read_now(task, now):
                stopped += refresh(task) is not None
        except OSError as error:  # shared storage slow or failing: the next tick reads again
            logger.warning("curve of trial %s unread: %s", task.task_id, error)
        except Exception:  # one trial it cannot read never stops the tick
            logger.exception("curve of trial %s unread", task.task_id)
    return stopped


def read_now(task: Task, now: datetime) -> bool:
    """Whether a trial due_trials found behind is read in this tick (see the module's doc)."""
    if task.state not in ACTIVE_STATES:
        return True  # ended (its last read), or back in the queue after an attempt: once
    # due_trials' annotations: the step the watch saw last, the curve's last read.
    logged: int | None = getattr(task, "logged_step", None)
    read_at: datetime | None = getattr(task, "curve_read_at", None)
    read_step: int | None = getattr(task, "curve_read_step", None)
    stale = read_at is None or now - read_at >= REFRESH_EVERY
    if logged is None:
        return stale and file_moved(task, read_at)
    early_stop = task.sweep.early_stop if task.sweep is not None else {}
    # An SFT run's rung at the step last read may still wait for that step's validation (rung_complete).
    after = read_step - 1 if read_step is not None and task.workload == Workload.SFT else read_step
    at_rung = bool(early_stop) and logged >= next_rung(int(early_stop["min_steps"]), int(early_stop["eta"]), after)
    return stale or at_rung


def file_moved(task: Task, since: datetime | None) -> bool:
    """Whether the latest attempt's file logger (metrics.jsonl) was written since ``since`` (the
    curve's last read; None: never read): one bounded stat, where reading it would cost its size."""
    attempt = task.attempts.order_by("-attempt_no").first()
    if attempt is None:
        return False
    try:
        written = bounded(os.stat, metrics_log(task, attempt)).st_mtime
    except FileNotFoundError:
        return False  # verl has not made it yet (or never will: no file logger, no console either)
    return since is None or datetime.fromtimestamp(written, tz=UTC) > since


def refresh(task: Task) -> Verdict | None:
    """Read ``task``'s curve of its sweep's metric, keep it, and judge it at the rungs it newly
    reached; returns the verdict that stopped it, if one did."""
    sweep = task.sweep
    assert sweep is not None
    read_at = timezone.now()
    attempts = list(task.attempts.order_by("attempt_no"))
    read = bounded(task_curves, task, attempts).curves
    points = sorted(read.series.get(sweep.metric, {}).items())
    TrialCurve.objects.update_or_create(
        task=task,
        defaults={"points": [[step, value] for step, value in points], "read_step": read.last_step, "read_at": read_at},
    )
    if not sweep.early_stop or read.last_step is None:
        return None
    # The read's own last step, not the attempt's: verl writes a step's record (its validation
    # included) whole and in order, so every point up to it is in what was read.
    return judge_rungs(task, sweep, points, read.last_step)


def judge_rungs(task: Task, sweep: Sweep, points: list[tuple[int, float]], last_step: int) -> Verdict | None:
    """Record ``task``'s value at each rung it reached that has none recorded yet, and judge it
    there while it has not ended; stop it at the first it loses."""
    if task.early_stopped:
        # It lost at a rung: the steps it logged until Ray stopped it are no rung's (how far it
        # got is the stop's latency, and successive halving never promotes a loser).
        return None
    eta = int(sweep.early_stop["eta"])
    done = set(RungValue.objects.filter(task=task).values_list("rung", flat=True))
    for rung in rungs(int(sweep.early_stop["min_steps"]), eta, last_step):
        if not rung_complete(task, rung, last_step):
            break
        point = None if rung in done else value_at(points, rung)
        if point is None:
            continue  # recorded already, or no point at or before it: not judged
        step, value = point
        _, created = RungValue.objects.get_or_create(
            task=task, rung=rung, defaults={"sweep": sweep, "step": step, "value": value}
        )
        if not created or task.state in TERMINAL_STATES:
            continue  # another tick recorded (and judged) it; an ended trial's values only count
        recorded = list(RungValue.objects.filter(sweep=sweep, rung=rung).values_list("value", flat=True))
        verdict = judge(rung, step, value, recorded, eta, sweep.mode)
        if verdict.stop:
            return verdict if stop(task, sweep, verdict) else None
    return None


def rung_complete(task: Task, rung: int, last_step: int) -> bool:
    """Whether every record of step ``rung`` is in a read whose last step is ``last_step``. verl's
    PPO trainer logs a step's validation in the step's one record; its SFT trainer (sft_trainer.py
    fit) logs the step's training metrics, then validates and logs val/loss in a record of its own,
    so a read between the two would take an earlier validation as the rung's value, for good. An
    SFT rung waits for a later step, or the trial's end."""
    return task.workload != Workload.SFT or last_step > rung or task.state in TERMINAL_STATES


def stop(task: Task, sweep: Sweep, verdict: Verdict) -> bool:
    """Stop a trial that lost at a rung: False when it ended, a cancel was requested or it was
    stopped early already before this claim."""
    worse = "below" if sweep.mode == Mode.MAX else "above"
    value, line = f"{verdict.value:g}", f"{verdict.cutoff:g}"
    if value == line:  # six digits cannot tell them apart: as logged
        value, line = repr(verdict.value), repr(verdict.cutoff)
    message = (
        f"Stopped early at rung {verdict.rung}: {sweep.metric} was {value} (step {verdict.step}), "
        f"{worse} the cutoff {line}: of the {verdict.recorded} values the sweep's trials had at "
        f"this rung, the best {verdict.kept} go on. Its checkpoints stay."
    )
    data: dict[str, object] = {
        "rung": verdict.rung,
        "step": verdict.step,
        "metric": sweep.metric,
        "value": verdict.value,
        "cutoff": verdict.cutoff,
        "mode": sweep.mode,
    }
    with transaction.atomic():
        claimed = (
            Task.objects.filter(pk=task.pk, cancel_requested_at=None, early_stopped=False)
            .exclude(state__in=TERMINAL_STATES)
            .update(early_stopped=True, updated_at=timezone.now())
        )
        if not claimed:
            return False
        task.refresh_from_db()
        task.record(EventKind.EARLY_STOPPED, actor=ACTOR, message=message, data=data)
        task.cancel(ACTOR)
    return True
