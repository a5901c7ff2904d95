"""GET /api/v2/tasks/ID/checkpoints and DELETE /api/v2/tasks/ID/checkpoints/STEP."""

from __future__ import annotations

import os
import shutil

import pytest

from tasks.checkpoints import folders
from tasks.choices import EventKind, TaskState
from tasks.jobfiles import checkpoint_dir
from tests.conftest import PPO_SPEC
from tests.tasks.checkpoints.trees import saved, steps_in, write_step

pytestmark = pytest.mark.django_db


def test_it_lists_the_checkpoints_with_their_sizes_and_who_needs_them(alice, make_task, client_for) -> None:
    task = make_task(alice, PPO_SPEC + "keep_checkpoints: 2\n", state=TaskState.SUCCEEDED)
    folder = checkpoint_dir("alice", task.task_id)
    saved(folder, 1, 2)
    write_step(folder, 3)  # not complete: the tracker names 2
    export = make_task(alice, f"workload: export\ncheckpoint: {folder}/global_step_1/actor\n")
    body = client_for(alice).get(f"/api/v2/tasks/{task.task_id}/checkpoints").json()
    sizes = {checkpoint.step: checkpoint.bytes for checkpoint in folders.scan(folder).checkpoints}
    assert (body["keep_checkpoints"], body["keep_best"], body["latest"], body["unread"]) == (2, None, 2, "")
    assert [(c["step"], c["bytes"], c["latest"]) for c in body["checkpoints"]] == [
        (1, sizes[1], False),
        (2, sizes[2], True),
        (3, sizes[3], False),
    ]
    assert body["total_bytes"] == sum(sizes.values())
    assert export.task_id in body["checkpoints"][0]["needed_by"][0]
    assert body["checkpoints"][1]["path"] == str(folder / "global_step_2")


def test_a_finished_tasks_checkpoint_is_deleted_with_an_event(alice, make_task, client_for) -> None:
    task = make_task(alice, state=TaskState.FAILED)
    folder = checkpoint_dir("alice", task.task_id)
    saved(folder, 1, 2)
    size = folders.scan(folder).at(2).bytes
    response = client_for(alice).delete(f"/api/v2/tasks/{task.task_id}/checkpoints/2")
    assert response.status_code == 200, response.content
    assert response.json() == {"step": 2, "bytes": size}
    assert steps_in(folder) == [1]
    event = task.events.get(kind=EventKind.CHECKPOINT_DELETED)
    assert (event.data, event.actor) == ({"step": 2, "bytes": size}, "api:alice")


def test_a_needed_or_missing_checkpoint_is_refused_naming_why(alice, bob, make_task, client_for) -> None:
    running = make_task(alice, state=TaskState.RUNNING)
    saved(checkpoint_dir("alice", running.task_id), 1)
    ended = make_task(alice, state=TaskState.SUCCEEDED)
    folder = checkpoint_dir("alice", ended.task_id)
    saved(folder, 1, 2)
    export = make_task(alice, f"workload: export\ncheckpoint: {folder}/global_step_1/actor\n")
    client = client_for(alice)

    live = client.delete(f"/api/v2/tasks/{running.task_id}/checkpoints/1")
    assert live.status_code == 409
    assert f"task {running.task_id} is RUNNING" in live.json()["error"]["message"]
    needed = client.delete(f"/api/v2/tasks/{ended.task_id}/checkpoints/1")
    assert needed.status_code == 409
    assert f"task {export.task_id} (QUEUED)" in needed.json()["error"]["message"]
    assert client.delete(f"/api/v2/tasks/{ended.task_id}/checkpoints/7").status_code == 404
    assert client_for(bob).delete(f"/api/v2/tasks/{ended.task_id}/checkpoints/2").status_code == 404
    assert steps_in(folder) == [1, 2] and not ended.events.filter(kind=EventKind.CHECKPOINT_DELETED).exists()


def test_a_deletion_storage_refuses_is_a_503_naming_it_and_no_event(alice, make_task, client_for, monkeypatch) -> None:
    """The rename aside refused (permission): nothing was deleted, said as such, not a 500 (found in review)."""
    task = make_task(alice, state=TaskState.SUCCEEDED)
    folder = checkpoint_dir("alice", task.task_id)
    saved(folder, 1, 2)

    def refused(checkpoint: folders.Checkpoint) -> None:
        raise PermissionError(13, "Permission denied", str(checkpoint.path))

    monkeypatch.setattr(folders, "set_aside", refused)
    response = client_for(alice).delete(f"/api/v2/tasks/{task.task_id}/checkpoints/1")
    assert response.status_code == 503, response.content
    assert "Permission denied" in response.json()["error"]["message"]
    assert steps_in(folder) == [1, 2] and not task.events.filter(kind=EventKind.CHECKPOINT_DELETED).exists()


def test_a_removal_that_fails_mid_way_records_only_the_bytes_freed(alice, make_task, client_for, monkeypatch) -> None:
    """rmtree stopped by a permission error after one file: the event and the answer say the bytes
    really freed, not the whole step's (found in review); what is left goes at a later pass."""
    task = make_task(alice, state=TaskState.SUCCEEDED)
    folder = checkpoint_dir("alice", task.task_id)
    saved(folder, 1, 2)
    size = folders.scan(folder).at(1).bytes
    model = "actor/model_world_size_1_rank_0.pt"

    def stopped(path, ignore_errors: bool = False) -> None:  # as rmtree: an error ignored when told
        (path / model).unlink()
        if ignore_errors:
            return
        raise PermissionError(13, "Permission denied", str(path / "actor"))

    monkeypatch.setattr("tasks.checkpoints.folders.shutil.rmtree", stopped)
    response = client_for(alice).delete(f"/api/v2/tasks/{task.task_id}/checkpoints/1")
    assert response.status_code == 200, response.content
    assert response.json() == {"step": 1, "bytes": 4000}
    event = task.events.get(kind=EventKind.CHECKPOINT_DELETED)
    assert event.data == {"step": 1, "bytes": 4000} and f"{size - 4000}" in event.message
    assert steps_in(folder) == [2]  # out of verl's names all the same
    monkeypatch.undo()
    folders.leftovers(folder)
    assert not list(folder.glob(f"{folders.DELETING}*"))


def test_a_checkpoint_carried_by_hard_links_frees_only_what_it_alone_holds(alice, make_task, client_for) -> None:
    """A retried pipeline step starts from its old task's checkpoint hard-linked file by file
    (tasks.pipelines.retry._carry_checkpoint): deleting the new task's copy frees none of the
    files the old task still holds; the event said the whole step's size (found in review)."""
    old = make_task(alice, state=TaskState.FAILED)
    new = make_task(alice, state=TaskState.SUCCEEDED)
    source, target = checkpoint_dir("alice", old.task_id), checkpoint_dir("alice", new.task_id)
    saved(source, 3)
    target.mkdir(parents=True)
    shutil.copytree(source / "global_step_3", target / "global_step_3", copy_function=os.link)
    saved(target, 4)
    (target / "global_step_3" / "own.pt").write_bytes(b"x" * 500)  # written by the new task alone
    linked = sum(path.stat().st_size for path in (source / "global_step_3").rglob("*") if path.is_file())
    whole = folders.scan(target).at(3).bytes
    response = client_for(alice).delete(f"/api/v2/tasks/{new.task_id}/checkpoints/3")
    assert response.status_code == 200, response.content
    assert response.json()["bytes"] == whole - linked
    assert new.events.get(kind=EventKind.CHECKPOINT_DELETED).data == {"step": 3, "bytes": whole - linked}
    assert steps_in(source) == [3]  # the old task's files are whole
