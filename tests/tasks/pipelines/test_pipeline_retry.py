"""A pipeline's retry is a submission of its retried steps (issue 25, item 4), with a fake Ray: the
same checks and status codes as a submission, as things stand at the retry, nothing created when
one fails; one set of new tasks however many retries arrive at once (two threads, on SQLite and
on PostgreSQL); and a step that failed after a checkpoint starts its new task from it (the real
resume, on Ray: tests/scheduler/test_pipelines_on_ray.py)."""

from __future__ import annotations

import os
import threading
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import pytest
import yaml
from django.contrib.auth.models import User
from django.db import connection, connections
from django.utils import timezone

from accounts.diskusage.models import DiskUsage
from accounts.limits import set_limits
from accounts.models import Secret, UserLimits
from devkit.wait import wait_for
from tasks.choices import EventKind, PipelineState, TaskState
from tasks.jobfiles import checkpoint_dir
from tasks.models import Task
from tasks.pipelines import retry as pipeline_retry
from tasks.pipelines.models import Pipeline
from tasks.pipelines.retry import PipelineConflict, retry_pipeline
from tasks.scheduler.tick import tick
from tests.accounts.helpers import assert_error
from tests.conftest import EXPORT, PIPELINE, SFT, grant_high_priority

S = TaskState
TRACKER = "latest_checkpointed_iteration.txt"


def post(client, body: dict[str, Any]):
    return client.post("/api/v2/pipelines", yaml.safe_dump(body), content_type="application/yaml")


def steps_of(pipeline_id: str) -> dict[str, Task]:
    pipeline = Pipeline.objects.get(pipeline_id=pipeline_id)
    return {step.name: step.task for step in pipeline.steps.select_related("task")}


def save(task: Task, step: int) -> Path:
    """What verl's SFT trainer leaves: global_step_N with its shards, then the tracker."""
    folder = checkpoint_dir(task.user.username, task.task_id)
    shards = folder / f"global_step_{step}"
    shards.mkdir(parents=True, exist_ok=True)
    (shards / "model_world_size_1_rank_0.pt").write_text(f"weights of step {step}\n")
    (shards / "data_0.pt").write_text("dataloader\n")
    (folder / TRACKER).write_text(str(step))
    return shards


def fail(ray, task: Task) -> None:
    task.refresh_from_db()
    attempt = task.attempts.order_by("-attempt_no").first()
    assert attempt is not None
    ray.set_status(attempt.ray_submission_id, "FAILED", driver_exit_code=1, message="RuntimeError: CUDA error")


def failed_pipeline(client, ray, document: dict[str, Any] = PIPELINE) -> str:
    """The document submitted, its first step failed on Ray (max_retries 0): the pipeline FAILED."""
    pipeline_id = post(client, document).json()["pipeline_id"]
    tick()
    first = steps_of(pipeline_id)[document["steps"][0]["name"]]
    fail(ray, first)
    tick()
    tick()  # the steps after it: canceled, their dependency failed
    assert Pipeline.objects.get(pipeline_id=pipeline_id).state == PipelineState.FAILED
    return pipeline_id


def failed_after_a_checkpoint(client, ray) -> tuple[str, dict[str, Task], Path]:
    """PIPELINE, its SFT step failed on Ray after checkpoints of steps 2 and 3: the pipeline id,
    its steps' tasks then, and the SFT's last checkpoint folder."""
    pipeline_id = post(client, PIPELINE).json()["pipeline_id"]
    tick()
    steps = steps_of(pipeline_id)
    save(steps["sft"], 2)
    saved = save(steps["sft"], 3)
    fail(ray, steps["sft"])
    tick()
    tick()
    return pipeline_id, steps, saved


def nothing_created(pipeline_id: str, before: dict[str, Task], tasks: int) -> None:
    pipeline = Pipeline.objects.get(pipeline_id=pipeline_id)
    assert pipeline.state == PipelineState.FAILED
    assert steps_of(pipeline_id) == before
    assert Task.objects.count() == tasks
    assert not Task.objects.filter(events__kind=EventKind.PIPELINE_RETRY).exists()


# --- The checks a submission gets ----------------------------------------------------------------


def fewer_places(user: User, settings, make_task) -> None:
    set_limits(user, actor="test", max_queued_tasks=3)
    make_task(user)  # one waits already; the retry adds three (every step: the first failed)


def disk_full(user: User, settings, make_task) -> None:
    set_limits(user, actor="test", disk_quota_bytes=100)
    DiskUsage.objects.create(user=user, used_bytes=100, measured_at=timezone.now())


def high_revoked(user: User, settings, make_task) -> None:
    set_limits(user, actor="test", can_use_high_priority=False)


def fewer_gpus(user: User, settings, make_task) -> None:
    settings.ARGUS_MAX_TASK_GPUS = 2


def secret_deleted(user: User, settings, make_task) -> None:
    Secret.objects.filter(user=user, name="HF_TOKEN").delete()


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("document", "since", "status", "code", "words", "fields"),
    [
        (PIPELINE, fewer_places, 429, "quota_exceeded", "this adds 3; max_queued_tasks is 3", {}),
        (PIPELINE, disk_full, 429, "disk_quota_exceeded", "alice uses 100 bytes of disk, at or over their", {}),
        (
            {"steps": [{**SFT, "priority": "high"}, EXPORT]},
            high_revoked,
            403,
            "priority_not_allowed",
            "priority: high is not allowed for alice",
            {},
        ),
        (
            PIPELINE,
            fewer_gpus,
            400,
            "invalid",
            "",
            {
                "steps.sft.nnodes": "asks for 4 GPUs in all; the limit is 2 (ARGUS_MAX_TASK_GPUS)",
                "steps.grpo.nnodes": "asks for 4 GPUs in all; the limit is 2 (ARGUS_MAX_TASK_GPUS)",
            },
        ),
        (
            {"steps": [{**SFT, "secrets": ["HF_TOKEN"]}, EXPORT]},
            secret_deleted,
            400,
            "invalid",
            "",
            {"steps.sft.secrets": "HF_TOKEN"},
        ),
    ],
    ids=["max_queued_tasks", "disk_quota_bytes", "high-priority", "ARGUS_MAX_TASK_GPUS", "secrets"],
)
def test_a_retry_passes_a_submissions_checks_as_things_stand_now(
    alice, client_for, datasets, fake_ray, make_task, settings, document, since, status, code, words, fields
):
    """Each as a submission would be refused now, with its status and code, and nothing made."""
    ray = fake_ray([4])
    grant_high_priority(alice)
    Secret.put(alice, "HF_TOKEN", "hf-value-1234")
    api = client_for(alice)
    pipeline_id = failed_pipeline(api, ray, document)
    since(alice, settings, make_task)
    before, tasks = steps_of(pipeline_id), Task.objects.count()
    error = assert_error(api.post(f"/api/v2/pipelines/{pipeline_id}/retry"), status, words, tuple(fields))
    assert error["code"] == code
    for field, problem in fields.items():
        assert problem in error["fields"][field][0]
    nothing_created(pipeline_id, before, tasks)


@pytest.mark.django_db
def test_the_pages_retry_says_why_it_was_refused(alice, client_for, datasets, fake_ray, make_task):
    ray = fake_ray([4])
    pipeline_id = failed_pipeline(client_for(alice), ray)
    before, tasks = steps_of(pipeline_id), Task.objects.count()
    UserLimits.objects.create(user=alice, max_queued_tasks=1)
    make_task(alice)
    web = client_for(None)
    web.force_login(alice)
    page = web.post(f"/pipelines/{pipeline_id}/retry/", follow=True).content.decode()
    assert f"Pipeline {pipeline_id} was not retried: alice has 1 task waiting; max_queued_tasks is 1." in page
    nothing_created(pipeline_id, before, tasks + 1)


@pytest.mark.django_db
@pytest.mark.parametrize("state", list(PipelineState))
def test_the_page_offers_retry_exactly_where_a_retry_is_made(alice, client_for, datasets, fake_ray, state):
    """One rule (Pipeline.can_retry) for the page's button and the retry itself: a pipeline whose
    steps did not all succeed, in each state, is retried only where the page offers it."""
    ray = fake_ray([4])
    pipeline_id = failed_pipeline(client_for(alice), ray)
    Pipeline.objects.filter(pipeline_id=pipeline_id).update(state=state)
    pipeline = Pipeline.objects.get(pipeline_id=pipeline_id)
    web = client_for(None)
    web.force_login(alice)
    offered = "Retry pipeline" in web.get(f"/pipelines/{pipeline_id}/").content.decode()
    allowed = pipeline.can_retry
    try:
        retry_pipeline(pipeline, actor="alice")
    except PipelineConflict:
        retried = False
    else:
        retried = True
    assert offered == retried == allowed == (state in (PipelineState.FAILED, PipelineState.CANCELED))


# --- Resuming from the failed step's checkpoint --------------------------------------------------


@pytest.mark.django_db
def test_a_step_that_failed_after_a_checkpoint_starts_its_new_task_from_it(alice, client_for, datasets, fake_ray):
    api = client_for(alice)
    pipeline_id, old, saved = failed_after_a_checkpoint(api, fake_ray([4]))
    response = api.post(f"/api/v2/pipelines/{pipeline_id}/retry")
    assert response.status_code == 200, response.content
    new = steps_of(pipeline_id)
    folder = checkpoint_dir("alice", new["sft"].task_id)
    # verl's resume_mode=auto finds step 3 in the new task's own folder...
    assert (folder / TRACKER).read_text() == "3"
    assert sorted(path.name for path in folder.iterdir()) == ["global_step_3", TRACKER]
    # ...the very files of the failed task's checkpoint, linked, not copied.
    for name in ("model_world_size_1_rank_0.pt", "data_0.pt"):
        assert os.path.samefile(folder / "global_step_3" / name, saved / name)
    event = new["sft"].events.get(kind=EventKind.PIPELINE_RETRY)
    assert event.data == {
        "pipeline_id": pipeline_id,
        "replaces": old["sft"].task_id,
        "resumes_from_step": 3,
        "checkpoint": str(saved),
    }
    assert event.message == (
        f"A retry of pipeline {pipeline_id} made it in place of {old['sft'].task_id} (FAILED); it resumes from "
        f"that task's checkpoint of step 3 ({saved})."
    )
    # The steps after it never ran: they start afresh, on what the new SFT hands on.
    for name in ("sft-export", "grpo"):
        retried = new[name].events.get(kind=EventKind.PIPELINE_RETRY)
        assert retried.data == {"pipeline_id": pipeline_id, "replaces": old[name].task_id}
        assert retried.message.endswith("(CANCELED); it starts afresh.")
        assert not checkpoint_dir("alice", new[name].task_id).exists()
    # The failed task's own checkpoint is as it was.
    assert (saved / "model_world_size_1_rank_0.pt").read_text() == "weights of step 3\n"


@pytest.mark.django_db
def test_a_step_whose_inputs_run_again_does_not_resume(alice, client_for, datasets, fake_ray):
    """right runs after left however left ends (after_any), and saved a checkpoint before it failed
    too; left runs again, so right's inputs change: its old checkpoint is no start for it."""
    ray = fake_ray([4, 4])
    api = client_for(alice)
    left = {**SFT, "name": "left", "after": []}
    right = {**SFT, "name": "right", "after_any": ["left"]}
    pipeline_id = post(api, {"steps": [left, right]}).json()["pipeline_id"]
    tick()
    old = steps_of(pipeline_id)
    fail(ray, old["left"])
    tick()
    tick()  # right queued (after_any) and admitted
    save(old["right"], 2)
    fail(ray, old["right"])
    tick()
    assert Pipeline.objects.get(pipeline_id=pipeline_id).state == PipelineState.FAILED
    assert api.post(f"/api/v2/pipelines/{pipeline_id}/retry").status_code == 200
    new = steps_of(pipeline_id)
    event = new["right"].events.get(kind=EventKind.PIPELINE_RETRY)
    assert "resumes_from_step" not in event.data and event.message.endswith("(FAILED); it starts afresh.")
    assert not checkpoint_dir("alice", new["right"].task_id).exists()


@pytest.mark.django_db
def test_a_checkpoint_storage_refuses_to_carry_leaves_nothing_behind(
    alice, client_for, datasets, fake_ray, monkeypatch
):
    api = client_for(alice)
    pipeline_id, before, _ = failed_after_a_checkpoint(api, fake_ray([4]))
    tasks = Task.objects.count()
    jobs = sorted((checkpoint_dir("alice", "x").parent.parent).iterdir())

    def refused(source: str, target: str) -> None:
        raise OSError(28, "No space left on device", target)

    monkeypatch.setattr("tasks.pipelines.retry.os.link", refused)
    monkeypatch.setattr("tasks.pipelines.retry.shutil.copy2", refused)
    error = assert_error(api.post(f"/api/v2/pipelines/{pipeline_id}/retry"), 503, "No space left on device")
    assert error["message"].startswith(f"Step sft was not retried: the checkpoint of {before['sft'].task_id}")
    nothing_created(pipeline_id, before, tasks)
    assert sorted((checkpoint_dir("alice", "x").parent.parent).iterdir()) == jobs  # no folder left either


# --- One retry at a time -------------------------------------------------------------------------


@pytest.mark.django_db
def test_a_second_retry_after_the_first_is_a_409(alice, client_for, datasets, fake_ray):
    ray = fake_ray([4])
    api = client_for(alice)
    pipeline_id = failed_pipeline(api, ray)
    assert api.post(f"/api/v2/pipelines/{pipeline_id}/retry").status_code == 200
    assert_error(api.post(f"/api/v2/pipelines/{pipeline_id}/retry"), 409, "still running")
    assert Task.objects.filter(pipeline__pipeline_id=pipeline_id).count() == 6


def waiting_on_a_lock() -> bool:
    """PostgreSQL: some backend of this database waits for a lock (the second retry, on the
    pipeline's row). SQLite has no such view: its writers queue for the database's own lock."""
    if connection.vendor != "postgresql":
        return True
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'"
        )
        return cursor.fetchone()[0] > 0


@pytest.mark.django_db(transaction=True)
def test_two_retries_at_once_create_one_set_of_tasks(alice: User, client_for, datasets, fake_ray, monkeypatch):
    """A double click: the first retry holds the pipeline, claimed and not yet committed, while
    the second arrives at the lock (on PostgreSQL: waits on the pipeline's row; on SQLite: on the
    database's write lock); the first commits, and the second finds the pipeline RUNNING."""
    ray = fake_ray([4])
    pipeline_id = failed_pipeline(client_for(alice), ray)
    pipeline = Pipeline.objects.get(pipeline_id=pipeline_id)
    claimed, release, at_lock = threading.Event(), threading.Event(), threading.Event()
    claim = pipeline_retry._claim

    def claim_and_hold(target: Pipeline) -> None:
        claim(target)
        if threading.current_thread().name == "first":
            claimed.set()
            assert release.wait(30)

    def to_the_lock(execute, sql, params, many, context):
        if sql.startswith("BEGIN") or (sql.startswith("UPDATE") and "tasks_pipeline" in sql):
            at_lock.set()
        return execute(sql, params, many, context)

    outcomes: dict[str, str] = {}

    def retry(name: str) -> None:
        try:
            with connection.execute_wrapper(to_the_lock) if name == "second" else nullcontext():
                retried = retry_pipeline(Pipeline.objects.get(pk=pipeline.pk), actor=f"api:{name}")
            outcomes[name] = f"retried {','.join(retried)}"
        except PipelineConflict as error:
            outcomes[name] = str(error)
        finally:
            connections.close_all()

    monkeypatch.setattr(pipeline_retry, "_claim", claim_and_hold)
    first = threading.Thread(target=retry, args=("first",), name="first")
    second = threading.Thread(target=retry, args=("second",), name="second")
    first.start()
    wait_for(claimed.is_set, "the first retry's claim", timeout=20, interval=0.02)
    second.start()
    wait_for(at_lock.is_set, "the second retry at the lock", timeout=20, interval=0.02)
    wait_for(waiting_on_a_lock, "the second retry waiting on the pipeline's row", timeout=20, interval=0.02)
    release.set()
    first.join(30)
    second.join(30)
    assert outcomes == {
        "first": "retried sft,sft-export,grpo",
        "second": f"Pipeline {pipeline_id} is still running; cancel it or wait for it to end.",
    }
    assert Task.objects.filter(pipeline=pipeline).count() == 6  # three failed ones, three new
    assert Task.objects.filter(events__kind=EventKind.PIPELINE_RETRY).count() == 3
    assert {task.state for task in steps_of(pipeline_id).values()} == {S.QUEUED, S.WAITING}
