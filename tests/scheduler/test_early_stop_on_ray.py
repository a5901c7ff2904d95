"""Early stopping on a real Ray cluster: a sweep over the learning rate run one trial at a time
(max_concurrent: 1), the best first, through the stand-in trainer validating at every step as
verl does (trainer.test_freq); each later trial is stopped at the first rung, against the value
the best one recorded there, ends CANCELED with early_stopped, and keeps its checkpoints."""

from __future__ import annotations

import pytest
import yaml
from django.contrib.auth.models import User

from devkit.standin import standin_spec
from tasks.choices import ACTIVE_STATES, TERMINAL_STATES, EventKind, SweepState, TaskState
from tasks.jobfiles import checkpoint_dir
from tasks.models import Task
from tasks.sweeps.actions import submit_sweep
from tasks.sweeps.models import RungValue, Sweep, TrialCurve
from tests.scheduler.conftest import tick_until

pytestmark = [pytest.mark.ray, pytest.mark.django_db]

LR = "actor_rollout_ref.actor.optim.lr"
METRIC = "val-core/openai/gsm8k/reward/mean@1"
STEPS = 40


def lr_sweep(user: User, rates: list[float]) -> tuple[Sweep, list[Task]]:
    """A sweep document as a person submits one: the stand-in on one GPU, 40 steps of 0.1 s,
    validating at every step and saving every 2nd, over these learning rates, one trial at a time."""
    extra = "trainer.test_freq=1 trainer.save_freq=2 trainer.default_local_dir=$ARGUS_CHECKPOINT_DIR"
    document = {
        "name": "lr-sweep",
        "base": yaml.safe_load(standin_spec(gpus=1, steps=STEPS, step_s=0.1, extra=extra)),
        "grid": {LR: rates},
        "max_concurrent": 1,
        "early_stop": {"metric": METRIC, "mode": "max", "min_steps": 4, "eta": 2},
    }
    sweep = submit_sweep(user, yaml.safe_dump(document, sort_keys=False), actor=f"api:{user.username}")
    return sweep, list(sweep.trials.order_by("trial_index"))


def test_a_sweep_run_one_trial_at_a_time_the_best_first_stops_the_others_at_the_first_rung(alice, on_ray) -> None:
    sweep, (best, *others) = lr_sweep(alice, [1.0e-6, 1.0e-5, 1.0e-7])  # verl's default rate learns fastest
    assert [trial.state for trial in (best, *others)] == [TaskState.QUEUED, TaskState.WAITING, TaskState.WAITING]
    on_ray_at_once: list[int] = []

    def count() -> None:
        on_ray_at_once.append(Task.objects.filter(sweep=sweep, state__in=ACTIVE_STATES).count())

    def ended() -> bool:
        return not Task.objects.filter(sweep=sweep).exclude(state__in=TERMINAL_STATES).exists()

    tick_until(ended, on_tick=count)
    assert max(on_ray_at_once) == 1
    sweep.refresh_from_db()
    assert sweep.state == SweepState.SUCCEEDED

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
