"""A sweep made by hand for the tests of what shows one (its summary, page, CLI): a Sweep row and
its trials as tasks created the way the API creates them, with the curves the tick would have
kept. Submitting a sweep document is tasks.sweeps.actions' (tests/tasks/sweeps/test_actions.py)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from django.contrib.auth.models import User

from tasks.attempts import Attempt
from tasks.models import Task, new_task_id
from tasks.sweeps.models import Sweep, TrialCurve

METRIC = "val-core/openai/gsm8k/acc/mean@1"
LR = "actor_rollout_ref.actor.optim.lr"
BATCH = "data.train_batch_size"


def make_sweep(
    user: User,
    make_task: Callable[..., Task],
    params: Sequence[dict[str, Any]],
    *,
    curves: Sequence[Sequence[tuple[int, float]] | None] = (),
    name: str = "lr-sweep",
    mode: str = "max",
    metric: str = METRIC,
) -> tuple[Sweep, list[Task]]:
    """A running sweep with one QUEUED trial per ``params``, in that order; ``curves[i]``, when
    given, the points of trial i's TrialCurve, its last step logged by an attempt."""
    sweep = Sweep.objects.create(
        sweep_id=new_task_id(user.username, "sweep"),
        user=user,
        name=name,
        document=f"name: {name}\n",
        metric=metric,
        mode=mode,
        max_concurrent=2,
        early_stop={"min_steps": 10, "eta": 2},
    )
    trials = []
    for index, values in enumerate(params):
        task = make_task(user, sweep=sweep, trial_index=index, params=values)
        points = curves[index] if index < len(curves) else None
        if points is not None:
            TrialCurve.objects.create(task=task, points=[list(point) for point in points])
            Attempt.objects.create(
                task=task, attempt_no=1, ray_submission_id=f"{task.task_id}--a01", last_step=points[-1][0]
            )
        trials.append(task)
    return sweep, trials
