"""`argus checkpoints ls|rm` against a live server."""

from __future__ import annotations

import json

from tasks.checkpoints import folders
from tasks.choices import EventKind, TaskState
from tasks.jobfiles import checkpoint_dir
from tests.cli.conftest import no_traceback
from tests.tasks.checkpoints.trees import saved, steps_in


def test_ls_shows_the_sizes_and_rm_deletes_a_finished_tasks_checkpoint(alice, make_task, argus_as):
    task = make_task(alice, state=TaskState.SUCCEEDED)
    folder = checkpoint_dir("alice", task.task_id)
    saved(folder, 1, 2)
    argus = argus_as(alice)

    listed = argus.run("checkpoints", "ls", task.task_id)
    assert listed.returncode == 0, listed.stderr
    assert f"{task.task_id} keeps the newest 3" in listed.stderr
    rows = [line.split() for line in listed.stdout.splitlines()]
    assert rows[0] == ["STEP", "SIZE", "LATEST", "NEEDED", "BY"]
    assert [row[0] for row in rows[1:]] == ["1", "2"] and "yes" in rows[2] and "yes" not in rows[1]
    body = json.loads(argus.run("checkpoints", "ls", task.task_id, "--json").stdout)
    assert [c["bytes"] for c in body["checkpoints"]] == [c.bytes for c in folders.scan(folder).checkpoints]

    removed = argus.run("checkpoints", "rm", task.task_id, "1")
    assert removed.returncode == 0, removed.stderr
    assert f"Deleted global_step_1 of {task.task_id}" in removed.stderr
    assert steps_in(folder) == [2]
    assert task.events.filter(kind=EventKind.CHECKPOINT_DELETED).count() == 1


def test_rm_of_a_needed_checkpoint_says_who_needs_it(alice, make_task, argus_as):
    task = make_task(alice, state=TaskState.RUNNING)
    saved(checkpoint_dir("alice", task.task_id), 1)
    refused = argus_as(alice).run("checkpoints", "rm", task.task_id, "1")
    assert refused.returncode == 3
    assert f"task {task.task_id} is RUNNING" in refused.stderr
    no_traceback(refused)
