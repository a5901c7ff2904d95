"""Checkpoints kept within bounds on a real Ray cluster (issue 28 item 2, Definition of done),
through the scheduler's tick, with the stand-in trainer saving as verl 0.9.1 does (its
max_*_ckpt_to_keep rotation included)."""

from __future__ import annotations

from pathlib import Path

import pytest

from devkit.standin import standin_spec
from devkit.wait import wait_for
from tasks.choices import EventKind, FailureKind, TaskState
from tasks.jobfiles import checkpoint_dir
from tasks.models import Event
from tasks.scheduler.tick import tick
from tests.scheduler.conftest import state_of, tick_until
from tests.scheduler.test_durable import steps_in

pytestmark = [pytest.mark.ray, pytest.mark.django_db]
S = TaskState
SAVES = "trainer.default_local_dir=$ARGUS_CHECKPOINT_DIR trainer.save_freq=1"


def steps_on_disk(task) -> list[int]:
    folder = checkpoint_dir(task.user.username, task.task_id)
    return sorted(int(path.name.removeprefix("global_step_")) for path in folder.glob("global_step_*"))


def deleted(task) -> dict[int, Event]:
    """step -> its CHECKPOINT_DELETED event."""
    events = task.events.filter(kind=EventKind.CHECKPOINT_DELETED)
    return {event.data["step"]: event for event in events}


def test_a_run_keeps_its_two_latest_checkpoints_and_its_best(alice, submit, on_ray, settings):
    """An advanced command (verl is told nothing: Argus alone bounds it) saving every step; the
    metric's best (min) is step 1's, which stays beside the two latest."""
    settings.ARGUS_CHECKPOINT_PRUNE_S = 0  # every tick
    spec = standin_spec(gpus=4, steps=5, step_s=0.2, extra=SAVES)
    spec += "keep_checkpoints: 2\nkeep_best: {metric: critic/score/mean, mode: min}\n"
    task = submit(alice, spec)
    tick_until(lambda: state_of(task) == S.SUCCEEDED, timeout=90)
    tick()  # the scheduler ticks on: its pass after the run's end
    assert steps_on_disk(task) == [1, 4, 5]
    gone = deleted(task)
    assert sorted(gone) == [2, 3]
    assert all(event.data["bytes"] > 0 and event.actor == "scheduler" for event in gone.values())


def test_a_crashed_run_resumes_from_a_checkpoint_kept_for_it(alice, submit, on_ray, settings):
    """keep_checkpoints 1, verl told too (max_actor_ckpt_to_keep=1): the TaskRunner dies after
    saving step 3; attempt 2 resumes from it. verl's rotation never deletes what an earlier run
    saved, and Argus keeps step 3 while the attempt that resumed from it runs, though newer steps
    are complete; once it ended, step 3 goes too."""
    settings.ARGUS_CHECKPOINT_PRUNE_S = 0
    settings.ARGUS_NODE_DEATH_WAIT_S = 0  # no node dies here: the crash is the verdict at once
    extra = f"{SAVES} trainer.max_actor_ckpt_to_keep=1 +standin.exit_after=3"
    spec = standin_spec(gpus=4, steps=12, step_s=0.5, extra=extra) + "keep_checkpoints: 1\nmax_retries: 1\n"
    task = submit(alice, spec)
    tick_until(lambda: task.attempts.filter(attempt_no=2).exists(), timeout=90)
    second = task.attempts.get(attempt_no=2)
    wait_for(lambda: 5 in steps_in(Path(second.log_path)), "step 5 in attempt 2's log", timeout=60, interval=0.05)
    tick()  # a pass while attempt 2 runs (steps 6 to 12 left: 3.5 s), steps 4 and 5 complete
    second.refresh_from_db()
    assert second.resumed_from_step == 3 and second.end_time is None
    folder = checkpoint_dir(alice.username, task.task_id)
    assert int((folder / "latest_checkpointed_iteration.txt").read_text()) >= 5
    assert (folder / "global_step_3" / "actor" / "model_world_size_1_rank_0.pt").is_file()
    assert 3 not in deleted(task)

    tick_until(lambda: state_of(task) == S.SUCCEEDED, timeout=90)
    tick()
    second.refresh_from_db()
    assert task.attempts.get(attempt_no=1).failure_kind == FailureKind.RUNTIME_ERROR
    assert steps_in(Path(second.log_path)) == list(range(4, 13))
    assert steps_on_disk(task) == [12]
    gone = deleted(task)
    assert sorted(gone) == list(range(1, 12))
    assert second.end_time is not None and gone[3].created_at >= second.end_time
