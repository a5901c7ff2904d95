"""The pruning pass (tasks.checkpoints.prune): every rule on fake verl trees, time frozen (the
pass's clock is passed in)."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest
import yaml
from django.utils import timezone

from tasks.checkpoints import folders
from tasks.checkpoints.needs import needs
from tasks.checkpoints.prune import prune, prune_due
from tasks.choices import EventKind, TaskState
from tasks.jobfiles import checkpoint_dir, metrics_log
from tasks.models import Task
from tasks.scheduler.turns import Budget
from tests.conftest import EXPORT, PPO_SPEC, SFT
from tests.tasks.attempt_data import attempt_of
from tests.tasks.checkpoints.trees import saved, steps_in, write_step

pytestmark = pytest.mark.django_db


def folder_of(task) -> Path:
    return checkpoint_dir(task.user.username, task.task_id)


def deletions(task) -> list[dict]:
    return list(task.events.filter(kind=EventKind.CHECKPOINT_DELETED).order_by("pk").values_list("data", flat=True))


def test_it_keeps_the_newest_and_records_each_deletion_with_the_bytes_freed(alice, make_task) -> None:
    task = make_task(alice, PPO_SPEC + "keep_checkpoints: 2\n", state=TaskState.RUNNING)
    folder = folder_of(task)
    saved(folder, 1, 2, 3, 4)
    sizes = {checkpoint.step: checkpoint.bytes for checkpoint in folders.scan(folder).checkpoints}
    assert prune(task) == [1, 2]
    assert steps_in(folder) == [3, 4]
    assert deletions(task) == [{"step": 1, "bytes": sizes[1]}, {"step": 2, "bytes": sizes[2]}]
    assert not list(folder.glob(f"{folders.DELETING}*"))  # removed, not only set aside
    assert prune(task) == []  # within bounds: nothing more


def test_the_default_is_argus_keep_checkpoints_and_0_keeps_all(alice, make_task, settings) -> None:
    settings.ARGUS_KEEP_CHECKPOINTS = 1
    task = make_task(alice, state=TaskState.RUNNING)
    all_kept = make_task(alice, PPO_SPEC + "keep_checkpoints: 0\n", state=TaskState.RUNNING)
    for each in (task, all_kept):
        saved(folder_of(each), 1, 2, 3)
    assert prune(task) == [1, 2]
    assert prune(all_kept) == []
    assert steps_in(folder_of(all_kept)) == [1, 2, 3]


def test_a_newer_step_not_complete_yet_deletes_nothing(alice, make_task) -> None:
    """verl writes global_step_2 while the tracker still names 1: step 1 is the only whole one."""
    task = make_task(alice, PPO_SPEC + "keep_checkpoints: 1\n", state=TaskState.RUNNING)
    folder = folder_of(task)
    saved(folder, 1)
    write_step(folder, 2)
    assert prune(task) == []
    assert steps_in(folder) == [1, 2]
    assert deletions(task) == []


def test_the_step_a_running_attempt_resumed_from_is_kept_until_it_ends(alice, make_task) -> None:
    task = make_task(alice, PPO_SPEC + "keep_checkpoints: 1\n", state=TaskState.RUNNING)
    folder = folder_of(task)
    attempt_of(task, 4, end_time=timezone.now())
    running = attempt_of(task, 4, resumed_from_step=2)
    saved(folder, 2, 3, 4)
    assert prune(task) == [3]
    assert steps_in(folder) == [2, 4]
    assert task.events.get(kind=EventKind.CHECKPOINT_DELETED).attempt_id == running.pk
    [need] = needs(task, 4)
    assert need.step == 2 and "attempt 2" in need.who
    running.end_time = timezone.now()
    running.save(update_fields=["end_time"])
    assert prune(task) == [2]
    assert steps_in(folder) == [4]


def test_a_step_another_task_names_is_kept_until_it_ends(alice, make_task) -> None:
    task = make_task(alice, PPO_SPEC + "keep_checkpoints: 1\n", state=TaskState.SUCCEEDED)
    folder = folder_of(task)
    saved(folder, 1, 2, 3)
    export = make_task(alice, f"workload: export\ncheckpoint: {folder}/global_step_2/actor\n")
    assert export.state == TaskState.QUEUED
    assert prune(task) == [1]
    assert steps_in(folder) == [2, 3]
    [need] = needs(task, 3)
    assert need.step == 2 and export.task_id in need.who
    export.state = TaskState.SUCCEEDED
    export.save(update_fields=["state"])
    assert prune(task) == [2]


def write_metrics(task, attempt, points: dict[int, float], metric: str) -> None:
    path = metrics_log(task, attempt)
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps({"step": step, "data": {metric: value}}) for step, value in points.items()]
    path.write_text("\n".join(lines) + "\n")


@pytest.mark.parametrize(("mode", "best"), [("max", 2), ("min", 1)])
def test_keep_best_keeps_the_best_steps_checkpoint(alice, make_task, mode: str, best: int) -> None:
    metric = "val-core/openai/gsm8k/reward/mean@1"
    spec = PPO_SPEC + f"keep_checkpoints: 1\nkeep_best: {{metric: {metric}, mode: {mode}}}\n"
    task = make_task(alice, spec, state=TaskState.RUNNING)
    attempt = attempt_of(task, 4)
    write_metrics(task, attempt, {1: 0.3, 2: 0.8, 3: 0.5, 4: 0.6}, metric)
    saved(folder_of(task), 1, 2, 3, 4)
    gone = prune(task)
    assert steps_in(folder_of(task)) == sorted({best, 4})
    assert sorted(gone) == sorted({1, 2, 3} - {best})


def test_the_pass_prunes_running_and_lately_ended_tasks_once_a_period(alice, make_task, settings) -> None:
    settings.ARGUS_CHECKPOINT_PRUNE_S = 30
    spec = PPO_SPEC + "keep_checkpoints: 1\n"
    running = make_task(alice, spec, state=TaskState.RUNNING)
    ended = make_task(alice, spec, state=TaskState.SUCCEEDED, finished_at=timezone.now() - timedelta(minutes=1))
    old = make_task(alice, spec, state=TaskState.SUCCEEDED, finished_at=timezone.now() - timedelta(days=1))
    for each in (running, ended, old):
        saved(folder_of(each), 1, 2)
    assert prune_due(Budget(60), clock=1000.0) == 2
    assert [steps_in(folder_of(each)) for each in (running, ended, old)] == [[2], [2], [1, 2]]
    saved(folder_of(running), 3)
    assert prune_due(Budget(60), clock=1029.0) == 0  # within its period
    assert steps_in(folder_of(running)) == [2, 3]
    assert prune_due(Budget(60), clock=1030.0) == 1
    assert steps_in(folder_of(running)) == [3]


def test_a_spent_budget_prunes_nothing(alice, make_task) -> None:
    task = make_task(alice, PPO_SPEC + "keep_checkpoints: 1\n", state=TaskState.RUNNING)
    saved(folder_of(task), 1, 2)
    assert prune_due(Budget(0), clock=5000.0) == 0
    assert steps_in(folder_of(task)) == [1, 2]


def test_the_checkpoint_a_waiting_steps_macro_names_is_kept(alice, client_for, datasets) -> None:
    """A WAITING export names ${steps.sft.checkpoint}: resolved to sft's newest when it is queued,
    so that step is needed (it is also among the kept ones: a need that the rule repeats, named
    for a person's delete)."""
    body = yaml.safe_dump({"steps": [{**SFT, "keep_checkpoints": 1}, EXPORT]})
    response = client_for(alice).post("/api/v2/pipelines", body, content_type="application/yaml")
    assert response.status_code == 201, response.content
    sft, export = (Task.objects.get(task_id=step["task_id"]) for step in response.json()["steps"])
    assert export.state == TaskState.WAITING
    saved(folder_of(sft), 1, 2)
    [need] = needs(sft, 2)
    assert need.step == 2 and export.task_id in need.who and "'sft-export'" in need.who
    assert prune(sft) == [1]
    assert steps_in(folder_of(sft)) == [2]


def test_the_step_a_tasks_own_command_resumes_from_is_kept_until_it_ends(alice, make_task) -> None:
    """verl's resume_mode=resume_path pins every attempt to that step; the task's own spec names
    it through $ARGUS_CHECKPOINT_DIR (written in at build time), so a pass between two attempts
    deleted it and the retry could not resume (found in review)."""
    command = (
        "python3 -m verl.trainer.sft_trainer_ray trainer.nnodes=1 trainer.n_gpus_per_node=1 "
        "trainer.resume_mode=resume_path trainer.resume_from_path=$ARGUS_CHECKPOINT_DIR/global_step_1"
    )
    spec = f"kind: advanced\nworkload: sft\nnnodes: 1\nn_gpus_per_node: 1\nkeep_checkpoints: 1\ncommand: {command}\n"
    task = make_task(alice, spec, state=TaskState.RUNNING)
    folder = folder_of(task)
    saved(folder, 1, 2, 3, files={"model_world_size_1_rank_0.pt": 100})
    assert prune(task) == [2]
    assert steps_in(folder) == [1, 3]
    Task.objects.filter(pk=task.pk).update(state=TaskState.SUCCEEDED)
    task.refresh_from_db()
    assert prune(task) == [1]
