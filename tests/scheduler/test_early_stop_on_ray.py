"""Early stopping on a real Ray cluster: a sweep over the learning rate run one trial at a time
(max_concurrent: 1), the best first, through the stand-in trainer validating at every step as
verl does (trainer.test_freq); each later trial is stopped at the first rung, against the value
the best one recorded there, ends CANCELED with early_stopped, and keeps its checkpoints."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User

from devkit.standin import standin_spec
from tasks.choices import ACTIVE_STATES, TERMINAL_STATES, EventKind, TaskState
from tasks.jobfiles import checkpoint_dir
from tasks.models import Task, new_task_id
from tasks.specs.parse import parse_spec
from tasks.sweeps.models import RungValue, Sweep, TrialCurve
from tests.scheduler.conftest import tick_until

pytestmark = [pytest.mark.ray, pytest.mark.django_db]

LR = "actor_rollout_ref.actor.optim.lr"
METRIC = "val-core/openai/gsm8k/reward/mean@1"
STEPS = 40


def lr_sweep(user: User, rates: list[str]) -> tuple[Sweep, list[Task]]:
    """A sweep as a submission makes one: its trials in order, the first QUEUED, the others
    WAITING for a place under max_concurrent 1; each the stand-in on one GPU, 40 steps of 0.1 s,
    validating at every step, saving every 2nd, with its learning rate."""
    sweep = Sweep.objects.create(
        sweep_id=new_task_id(user.username, "sweep"),
        user=user,
        name="lr-sweep",
        document="name: lr-sweep\n",
        max_concurrent=1,
        metric=METRIC,
        mode="max",
        early_stop={"min_steps": 4, "eta": 2},
    )
    trials = []
    for index, rate in enumerate(rates):
        extra = (
            f"trainer.test_freq=1 trainer.save_freq=2 trainer.default_local_dir=$ARGUS_CHECKPOINT_DIR "
            f"trainer.logger=['console'] {LR}={rate}"
        )
        parsed = parse_spec(standin_spec(gpus=1, steps=STEPS, step_s=0.1, extra=extra), username=user.username)
        state = TaskState.QUEUED if index == 0 else TaskState.WAITING
        fields = {**parsed.model_fields(), "state": state}
        trials.append(
            Task.create(user=user, actor="api:alice", sweep=sweep, trial_index=index, params={LR: rate}, **fields)
        )
    return sweep, trials


def test_a_sweep_run_one_trial_at_a_time_the_best_first_stops_the_others_at_the_first_rung(alice, on_ray) -> None:
    sweep, (best, *others) = lr_sweep(alice, ["1e-6", "1e-5", "1e-7"])  # verl's default rate learns fastest
    on_ray_at_once: list[int] = []

    def count() -> None:
        on_ray_at_once.append(Task.objects.filter(sweep=sweep, state__in=ACTIVE_STATES).count())

    def ended() -> bool:
        return not Task.objects.filter(sweep=sweep).exclude(state__in=TERMINAL_STATES).exists()

    tick_until(ended, on_tick=count)
    assert max(on_ray_at_once) == 1

    best.refresh_from_db()
    assert best.state == TaskState.SUCCEEDED and not best.early_stopped
    # Alone at every rung it reached: 4, 8, 16, 32 (recorded once it ended, for the others).
    assert list(RungValue.objects.filter(task=best).values_list("rung", flat=True)) == [4, 8, 16, 32]
    at_first_rung = RungValue.objects.get(task=best, rung=4).value
    curve = TrialCurve.objects.get(task=best)
    assert [step for step, _ in curve.points] == list(range(STEPS + 1))  # whole: read once more after its end
    assert curve.read_step == STEPS

    for trial in others:
        trial.refresh_from_db()
        assert trial.state == TaskState.CANCELED and trial.early_stopped, trial.error_summary
        [event] = trial.events.filter(kind=EventKind.EARLY_STOPPED)
        data = event.data
        assert (data["rung"], data["metric"], data["mode"], data["cutoff"]) == (4, METRIC, "max", at_first_rung)
        assert data["step"] == 4 and data["value"] < at_first_rung
        # Only the rung it lost at: what it logged until Ray stopped it counts at no rung.
        assert list(RungValue.objects.filter(task=trial).values_list("rung", flat=True)) == [4]
        attempt = trial.attempts.get()
        assert attempt.last_step is not None and attempt.last_step < STEPS  # stopped well before its end
        # Its checkpoints stay (what keep_checkpoints keeps): the last one it saved is whole.
        folder = checkpoint_dir(alice.username, trial.task_id)
        saved = int((folder / "latest_checkpointed_iteration.txt").read_text())
        assert saved >= 4 and (folder / f"global_step_{saved}" / "actor").is_dir()
