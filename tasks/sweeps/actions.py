"""Submit a sweep document (every trial's task at once) and cancel a sweep.

Views call these; the document's checks are tasks.sweeps.document's, and every trial passes a
submission's checks (tasks.submit.admit_new), as a pipeline's steps do. Releasing waiting trials
under the cap and ending the sweep are tasks.sweeps.cap's and .lifecycle's.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone

from tasks.choices import TERMINAL_STATES, TaskState
from tasks.models import IllegalTransition, StaleState, Task, with_new_id
from tasks.specs.errors import SpecError
from tasks.submit import admit_new, request_errors
from tasks.sweeps.cap import Capped
from tasks.sweeps.document import SweepDocument, Trial, describe_params, parse_sweep, trial_errors
from tasks.sweeps.models import Mode, Sweep

# A sweep's id reads like a task's: alice-sweep-20261127-031500-3f2a.
SWEEP_ID_KIND = "sweep"


def submit_sweep(user: User, source: bytes | str | dict[str, Any], *, actor: str) -> Sweep:
    """Validate a whole document for ``user`` and create the sweep with every trial's task, in
    one transaction: the first max_concurrent trials QUEUED, the others WAITING for a place under
    the cap. Raises SpecError (every problem, by field), PriorityNotAllowed, QuotaError (every
    trial counts toward max_queued_tasks; the disk quota too)."""
    document = parse_sweep(source, user=user)
    with transaction.atomic():
        try:
            admit_new(user, [("", trial.parsed) for trial in document.trials])
        except SpecError as refused:
            # The site's limits refuse a trial's spec (a secret it names is missing, too many
            # GPUs): said again by the key that made that trial, as parse_sweep says its problems
            # (as admit_new said them should a secret appear meanwhile).
            named = trial_errors(document, lambda parsed: request_errors(user, parsed))
            raise SpecError(named or refused.fields) from None
        return _create(user, document, actor)


def _create(user: User, document: SweepDocument, actor: str) -> Sweep:
    sweep = with_new_id(
        lambda sweep_id: Sweep.objects.create(
            sweep_id=sweep_id,
            user=user,
            name=document.name,
            document=document.raw,
            max_concurrent=document.max_concurrent,
            metric=document.metric,
            mode=Mode(document.mode),
            early_stop=document.early_stop,
        ),
        user.username,
        SWEEP_ID_KIND,
    )
    cap = document.max_concurrent
    admitted = min(cap, len(document.trials)) if cap is not None else len(document.trials)
    for trial in document.trials:
        _trial_task(user, sweep, trial, actor, admitted)
    return sweep


def _trial_task(user: User, sweep: Sweep, trial: Trial, actor: str, admitted: int) -> Task:
    """A trial's task: QUEUED among the first ``admitted`` trials, else WAITING for its place."""
    fields = trial.parsed.model_fields()
    where = f"Trial {trial.index} of sweep {sweep.sweep_id} ({describe_params(trial.params)})"
    if trial.index < admitted:
        message = f"{where}: queued."
    else:
        # The words the cap's release keeps up to date: one owner of them.
        reason = Capped(sweep.name or sweep.sweep_id, sweep.max_concurrent, admitted).reason()
        fields.update(state=TaskState.WAITING, pending_reason=reason)
        message = f"{where}: it waits for a place under the sweep's max_concurrent ({reason})."
    return Task.create(
        user=user,
        actor=actor,
        sweep=sweep,
        trial_index=trial.index,
        params=trial.params,
        message=message,
        data={"sweep_id": sweep.sweep_id, "trial_index": trial.index, "params": trial.params},
        **fields,
    )


def cancel_sweep(sweep: Sweep, actor: str) -> None:
    """A person cancels the sweep: ``canceled_at`` is set (the cap releases no more of its trials,
    and it ends CANCELED unless a trial SUCCEEDED), then every trial not ended is canceled by its
    own cancel (a waiting or queued one at once, one on Ray once Ray stops it)."""
    now = timezone.now()
    Sweep.objects.filter(pk=sweep.pk, canceled_at=None).update(canceled_at=now, updated_at=now)
    sweep.refresh_from_db(fields=["canceled_at", "updated_at"])
    for task in sweep.trials.exclude(state__in=TERMINAL_STATES).order_by("trial_index"):
        if task.cancel_requested_at is not None:
            continue
        try:
            task.cancel(actor=actor)
        except (IllegalTransition, StaleState):
            task.refresh_from_db()  # it ended meanwhile: nothing to cancel
