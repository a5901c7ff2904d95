"""A sweep's best trial handed to a pipeline: ``${sweeps.SWEEP_ID.OUTPUT}`` resolved when the
pipeline is submitted, and a 400 naming the macro when it cannot be."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
import yaml
from django.utils import timezone

from accounts.homes import home_dir
from tasks.choices import SweepState, TaskState
from tasks.models import Task
from tasks.pipelines.actions import submit_pipeline
from tasks.sweeps.lifecycle import finish_if_done
from tasks.sweeps.models import Sweep, TrialCurve
from tests.accounts.helpers import assert_error
from tests.conftest import EVAL
from tests.tasks.pipelines.test_pipelines import checkpoint, post, problems
from tests.tasks.sweeps.trials import LR, make_sweep

pytestmark = pytest.mark.django_db


def ended_sweep(user, make_task, curves, mode: str = "max") -> tuple[Sweep, list[Task]]:
    params = [{LR: value} for value in (1e-6, 3e-6, 1e-5)][: len(curves)]
    sweep, trials = make_sweep(user, make_task, params, curves=curves, mode=mode)
    Sweep.objects.filter(pk=sweep.pk).update(state=SweepState.SUCCEEDED)
    Task.objects.filter(sweep=sweep).update(state=TaskState.SUCCEEDED)
    sweep.refresh_from_db()
    return sweep, trials


def export_of(macro: str) -> dict[str, Any]:
    return {"name": "export", "workload": "export", "checkpoint": macro}


def evaluation() -> dict[str, Any]:
    return {**EVAL, "model_id": "${steps.export.hf_model}"}


def test_the_best_trials_checkpoint_is_exported_and_evaluated(alice, make_task):
    # max: the best value of each curve; trial 1 and 2 tie at 0.7, the first of them wins.
    sweep, trials = ended_sweep(alice, make_task, [[(10, 0.5), (20, 0.4)], [(10, 0.7)], [(10, 0.6), (20, 0.7)]])
    folder = checkpoint(trials[1], 20, actor=True)
    checkpoint(trials[2], 20, actor=True)
    macro = f"${{sweeps.{sweep.sweep_id}.checkpoint}}"
    pipeline = submit_pipeline(alice, {"steps": [export_of(macro), evaluation()]}, actor="api:alice")
    steps = {step.name: step.task for step in pipeline.steps.select_related("task")}
    assert steps["export"].spec["checkpoint"] == str(folder / "actor")  # verl's merger reads the actor's shards
    assert yaml.safe_load(steps["export"].spec_raw)["checkpoint"] == str(folder)  # its task keeps the value
    assert macro in pipeline.document  # the document, as written
    assert steps["eval"].state == TaskState.WAITING


def test_min_mode_and_the_other_outputs(alice, make_task, datasets):
    sweep, trials = ended_sweep(alice, make_task, [[(10, 0.5), (20, 0.2)], [(10, 0.3)]], mode="min")
    step = {**EVAL, "name": "eval", "model_id": f"${{sweeps.{sweep.sweep_id}.output_dir}}/hf_model"}
    (home_dir("alice") / "jobs" / trials[0].task_id / "hf_model").mkdir(parents=True)
    step["project"] = f"${{sweeps.{sweep.sweep_id}.task_id}}"  # the run named after the trial
    pipeline = submit_pipeline(alice, {"steps": [step]}, actor="api:alice")
    task = pipeline.steps.get().task
    assert task.spec["model_id"] == str(home_dir("alice") / "jobs" / trials[0].task_id / "hf_model")
    assert task.spec["project"] == trials[0].task_id


def macro_problems(step: dict[str, Any]) -> dict[str, list[str]]:
    return problems({"steps": [step]})


def test_each_sweep_that_cannot_hand_on_its_best_trial_is_a_400_naming_the_macro(alice, bob, make_task, datasets):
    running, _ = make_sweep(alice, make_task, [{LR: 1e-6}], curves=[[(10, 0.5)]])
    blank, _ = ended_sweep(alice, make_task, [None])
    theirs, _ = ended_sweep(bob, make_task, [[(10, 0.5)]])
    ended, _ = ended_sweep(alice, make_task, [[(10, 0.5)]])
    cases = {
        "alice-sweep-20260101-000000-0000.checkpoint": "you have no sweep 'alice-sweep-20260101-000000-0000'",
        f"{theirs.sweep_id}.checkpoint": f"you have no sweep {theirs.sweep_id!r}",
        f"{running.sweep_id}.checkpoint": f"sweep {running.sweep_id} has not ended: its best trial is known once "
        "every trial has",
        f"{blank.sweep_id}.checkpoint": f"sweep {blank.sweep_id} has no best trial: no trial logged its metric "
        "val-core/openai/gsm8k/acc/mean@1",
        f"{ended.sweep_id}.hf_model": "a sweep's outputs are task_id, output_dir, checkpoint",
    }
    for tail, why in cases.items():
        macro = f"${{sweeps.{tail}}}"
        assert macro_problems(export_of(macro)) == {"steps.export.checkpoint": [f"{macro}: {why}"]}, tail
    # The best trial saved no checkpoint: said with the trial's id.
    macro = f"${{sweeps.{ended.sweep_id}.checkpoint}}"
    (message,) = macro_problems(export_of(macro))["steps.export.checkpoint"]
    trial = ended.trials.get()
    assert message.startswith(f"{macro}: the best trial of sweep {ended.sweep_id}, {trial.task_id}: ")


def test_the_api_answers_400_naming_the_macro(alice, client_for, make_task, datasets):
    running, _ = make_sweep(alice, make_task, [{LR: 1e-6}], curves=[[(10, 0.5)]])
    macro = f"${{sweeps.{running.sweep_id}.checkpoint}}"
    response = post(client_for(alice), {"steps": [export_of(macro), evaluation()]})
    error = assert_error(response, 400, fields=("steps.export.checkpoint",))
    assert error["fields"]["steps.export.checkpoint"][0].startswith(f"{macro}: sweep {running.sweep_id} has not ended")
    assert not Task.objects.filter(pipeline__isnull=False).exists()


def test_a_sweep_of_a_user_whose_name_has_a_dot(make_user, make_task):
    # A username may hold '.' (accounts.users.USERNAME_PATTERN), and a sweep id starts with it.
    user = make_user("j.doe")
    sweep, trials = ended_sweep(user, make_task, [[(10, 0.5)], [(10, 0.7)]])
    folder = checkpoint(trials[1], 10, actor=True)
    assert "." in sweep.sweep_id
    pipeline = submit_pipeline(user, {"steps": [export_of(f"${{sweeps.{sweep.sweep_id}.checkpoint}}")]}, actor="api")
    assert pipeline.steps.get().task.spec["checkpoint"] == str(folder / "actor")


def test_the_best_trial_waits_for_the_last_reads_of_the_trials_that_just_ended(alice, make_task):
    # The tick reads an ended trial's curve once more after its end (tasks.sweeps.curves), in a
    # pass after the one that ended it: its last validation, often its best, is not in its
    # TrialCurve until then, and the sweep does not end before (tasks.sweeps.lifecycle). A
    # pipeline naming it meanwhile is refused, never handed the best trial of stale curves.
    sweep, trials = make_sweep(alice, make_task, [{LR: 1e-6}, {LR: 3e-6}], curves=[[(10, 0.7)], [(10, 0.6)]])
    folders = [checkpoint(trial, 20, actor=True) for trial in trials]
    ended = timezone.now()
    Task.objects.filter(sweep=sweep).update(state=TaskState.SUCCEEDED, finished_at=ended)
    TrialCurve.objects.filter(task=trials[0]).update(read_at=ended)  # read since it ended
    TrialCurve.objects.filter(task=trials[1]).update(read_at=ended - timedelta(seconds=5))  # not yet
    assert not finish_if_done(sweep, "scheduler")
    macro = f"${{sweeps.{sweep.sweep_id}.checkpoint}}"
    (message,) = macro_problems(export_of(macro))["steps.export.checkpoint"]
    assert message.startswith(f"{macro}: sweep {sweep.sweep_id} has not ended")
    # Its last record read: trial 1's last validation made it the best.
    TrialCurve.objects.filter(task=trials[1]).update(points=[[10, 0.6], [20, 0.9]], read_at=ended)
    assert finish_if_done(sweep, "scheduler")
    pipeline = submit_pipeline(alice, {"steps": [export_of(macro)]}, actor="api:alice")
    assert pipeline.steps.get().task.spec["checkpoint"] == str(folders[1] / "actor")
