"""The pass that keeps checkpoints within bounds, run by the tick after admission (off its
critical path: every file call bounded, tasks.scheduler.storage.bounded; the tick's budget
stops it): the checkpoints of each running task, and of each task that ended lately (its last
saves), at most once every ARGUS_CHECKPOINT_PRUNE_S. Each deletion is an event
(CHECKPOINT_DELETED, data {"step", "bytes"})."""

from __future__ import annotations

import logging
import math
from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import Q
from django.utils import timezone

from tasks.checkpoints import folders
from tasks.checkpoints.deletion import delete
from tasks.checkpoints.needs import needs
from tasks.checkpoints.retention import best_step, doomed
from tasks.choices import ACTIVE_STATES, TRAINING_WORKLOADS
from tasks.jobfiles import checkpoint_dir, task_curves
from tasks.models import Task
from tasks.scheduler.settle import ACTOR
from tasks.scheduler.storage import bounded
from tasks.scheduler.turns import Budget
from tasks.specs.resolved import ResolvedSpec

logger = logging.getLogger(__name__)

# A task that ended is pruned for this long after (its last saves, and what its running attempt
# needed until it ended), at least a few passes.
AFTER_END_PASSES = 4
MIN_AFTER_END = timedelta(minutes=5)

# When each task (by task id) was last pruned by this process (time.monotonic()): a new process
# prunes each once more, which costs a scan, no more.
_pruned: dict[str, float] = {}


def due_tasks(now: datetime) -> list[Task]:
    """Training tasks running now, or that ended lately."""
    after_end = max(MIN_AFTER_END, timedelta(seconds=AFTER_END_PASSES * settings.ARGUS_CHECKPOINT_PRUNE_S))
    recent = Q(finished_at__gte=now - after_end)
    tasks = Task.objects.filter(Q(state__in=ACTIVE_STATES) | recent, workload__in=TRAINING_WORKLOADS)
    return list(tasks.select_related("user").order_by("pk"))


def prune_due(budget: Budget, clock: float, now: datetime | None = None) -> int:
    """Prune each due task not pruned within ARGUS_CHECKPOINT_PRUNE_S of ``clock``
    (time.monotonic()) while ``budget`` lasts; returns the checkpoints deleted."""
    deleted = 0
    due = due_tasks(now or timezone.now())
    for gone in _pruned.keys() - {task.task_id for task in due}:
        del _pruned[gone]  # no longer due: the memo stays as small as what runs
    for task in due:
        if budget.spent():
            break
        if clock - _pruned.get(task.task_id, -math.inf) < settings.ARGUS_CHECKPOINT_PRUNE_S:
            continue
        _pruned[task.task_id] = clock
        try:
            deleted += len(prune(task))
        except OSError as error:  # shared storage slow or failing: the next pass tries again
            logger.warning("checkpoints of %s not pruned: %s", task.task_id, error)
        except Exception:  # housekeeping: a task it cannot read never stops the tick
            logger.exception("checkpoints of %s not pruned", task.task_id)
    return deleted


def prune(task: Task) -> list[int]:
    """Delete what ``task``'s keep_checkpoints (and keep_best) no longer keeps; returns the steps."""
    spec = ResolvedSpec.from_json(task.spec)
    keep = spec.keep_checkpoints or 0
    folder = checkpoint_dir(task.user.username, task.task_id)
    bounded(folders.leftovers, folder)
    if not keep:
        return []
    found = bounded(folders.scan, folder, sizes=False)
    needed = {need.step for need in needs(task, found.latest)}
    gone = doomed(found.steps(), found.latest, keep, needed)
    if gone and spec.keep_best:
        # Read only when something would go: the curves of a long run are a long file.
        attempts = list(task.attempts.order_by("attempt_no"))
        curves = bounded(task_curves, task, attempts)
        values = curves.curves.series.get(spec.keep_best["metric"], {})
        best = best_step(values, found.steps(), spec.keep_best["mode"])
        gone = doomed(found.steps(), found.latest, keep, needed | ({best} if best is not None else set()))
    for step in gone:
        delete(task, found.at(step), f"keep_checkpoints {keep} keeps the newest up to step {found.latest}", ACTOR)
    return gone
