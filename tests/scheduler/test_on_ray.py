"""The scheduler against a real Ray cluster (head + 2 workers × 4 declared GPUs)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from ray.job_submission import JobStatus, JobSubmissionClient

from devkit.standin import standin_spec
from tasks.choices import ACTIVE_STATES, EventKind, FailureKind, TaskState
from tasks.models import Task
from tests.scheduler.conftest import ray_status, state_of, tick_until

pytestmark = [pytest.mark.ray, pytest.mark.django_db]
S = TaskState


def test_a_task_runs_to_success_with_logs_and_curves(alice, client_for, submit, on_ray, shared_root):
    task = submit(alice, standin_spec(steps=4))
    tick_until(lambda: state_of(task) == S.SUCCEEDED)

    attempt = task.attempts.get()
    assert attempt.ray_submission_id == f"{task.task_id}--a01"
    assert attempt.ray_status == "SUCCEEDED"
    assert attempt.start_time and attempt.end_time and attempt.exit_code == 0
    assert ray_status(on_ray, attempt.ray_submission_id) == JobStatus.SUCCEEDED

    job_root = shared_root / "users/alice/jobs" / attempt.ray_submission_id
    assert (job_root / "spec.yaml").read_text() == task.spec_raw
    payload = json.loads((job_root / "submission.json").read_text())
    assert payload["submission_id"] == attempt.ray_submission_id
    assert payload["entrypoint_resources"] == {"worker_node": 1}
    assert payload["metadata"] == {"argus_task_id": task.task_id, "argus_user": "alice", "argus_attempt": "1"}
    assert (shared_root / "users/alice/jobs" / task.task_id / "checkpoints").is_dir()  # the task's, for resumes
    log = (job_root / "driver.log").read_text()
    assert "step:4 - " in log
    assert "(TaskRunner pid=" in log

    client = client_for(alice)
    text = client.get(f"/api/v2/tasks/{task.task_id}/logs?tail=1").content.decode()
    assert text.strip() == "[argus-driver] command exited with code 0"
    metrics = client.get(f"/api/v2/tasks/{task.task_id}/metrics").json()
    assert metrics["attempt"] is None  # the whole task, across its attempts: here one
    assert [span["attempt_no"] for span in metrics["attempts"]] == [1]
    assert metrics["last_step"] == 4
    assert metrics["total_steps"] == 4
    assert [step for step, _ in metrics["series"]["critic/score/mean"]] == [1, 2, 3, 4]

    kinds = list(task.events.values_list("kind", "to_state"))
    assert (EventKind.SUBMIT, S.SUBMITTED) in kinds
    assert (EventKind.STATE_TRANSITION, S.RUNNING) in kinds
    assert kinds[-1] == (EventKind.STATE_TRANSITION, S.SUCCEEDED)


def test_a_busy_cluster_keeps_tasks_pending_until_gpus_free(alice, bob, submit, on_ray, client_for):
    big = submit(alice, standin_spec(nnodes=2, gpus=4, steps=6, step_s=0.5))
    tick_until(lambda: state_of(big) in (S.SUBMITTED, S.RUNNING))
    small = submit(bob, standin_spec(gpus=4))
    tick_until(lambda: state_of(small) == S.PENDING_RESOURCES, timeout=10)
    small.refresh_from_db()
    assert small.pending_reason == "needs 1 node with 4 free GPUs; 0 nodes have them now"
    queue = client_for(bob).get("/api/v2/queue").json()["results"]
    mine = [row for row in queue if row["task_id"] == small.task_id]
    assert mine and mine[0]["position"] == 1 and "needs 1 node" in mine[0]["reason"]
    assert any(row["task_id"] is None and row["position"] is None for row in queue)  # alice's, masked

    tick_until(lambda: state_of(small) == S.SUCCEEDED, timeout=120)
    assert state_of(big) == S.SUCCEEDED
    assert small.attempts.count() == 1  # it started when it could, with no failed attempt


def test_four_4_gpu_tasks_never_run_more_than_two_at_once(alice, submit, on_ray):
    tasks = [submit(alice, standin_spec(gpus=4, steps=3, step_s=0.3)) for _ in range(4)]
    seen = []

    def count() -> None:
        seen.append(Task.objects.filter(state__in=ACTIVE_STATES).count())

    tick_until(lambda: all(state_of(t) == S.SUCCEEDED for t in tasks), timeout=180, on_tick=count)
    assert max(seen) == 2
    assert all(t.attempts.count() == 1 for t in tasks)  # no fail-fast: admission kept them apart


def test_a_2x3_task_waits_while_no_two_nodes_have_3_free_gpus(alice, bob, submit, on_ray):
    small = submit(alice, standin_spec(gpus=2, steps=8, step_s=0.5))
    tick_until(lambda: state_of(small) == S.RUNNING)
    wide = submit(bob, standin_spec(nnodes=2, gpus=3))
    tick_until(lambda: state_of(wide) == S.PENDING_RESOURCES, timeout=10)
    wide.refresh_from_db()
    # 6 GPUs are free in all (verl's own check would pass), but only one node has 3.
    assert wide.pending_reason == "needs 2 nodes with 3 free GPUs; 1 node has them now"
    tick_until(lambda: state_of(wide) == S.SUCCEEDED, timeout=120)
    assert wide.attempts.count() == 1


def test_a_fail_fast_race_is_retried_as_a_new_attempt(alice, submit, on_ray):
    # The stand-in holds 4 s before verl's resource check; meanwhile something outside Argus
    # takes every GPU, so the check fails as verl's does in a real race.
    task = submit(alice, standin_spec(gpus=4, extra="+standin.hold_s=4"))
    tick_until(lambda: state_of(task) == S.RUNNING)
    client = JobSubmissionClient(on_ray.job_server_url)
    hog = client.submit_job(
        entrypoint="python3 -m verl.hog 8 6",
        submission_id=f"hog-{task.task_id}",
    )
    tick_until(lambda: state_of(task) == S.PENDING_RESOURCES, timeout=60)
    first = task.attempts.get(attempt_no=1)
    assert first.failure_kind == FailureKind.INSUFFICIENT_RESOURCES
    assert "Total available GPUs" in first.message + Path(first.log_path).read_text()
    assert task.events.filter(kind=EventKind.RETRY_SCHEDULED).exists()

    tick_until(lambda: state_of(task) == S.SUCCEEDED, timeout=120)
    assert client.get_job_status(hog) == JobStatus.SUCCEEDED
    assert list(task.attempts.values_list("attempt_no", "failure_kind")) == [
        (1, FailureKind.INSUFFICIENT_RESOURCES),
        (2, ""),
    ]


def test_a_real_failure_fails_the_task_with_a_summary(alice, submit, on_ray):
    task = submit(alice, standin_spec(gpus=1, extra="+standin.fail=runtime"))
    tick_until(lambda: state_of(task) == S.FAILED)
    task.refresh_from_db()
    assert "NCCL" in task.error_summary
    assert task.attempts.get().failure_kind == FailureKind.RUNTIME_ERROR


def test_max_retries_allows_another_attempt(alice, submit, on_ray):
    task = submit(alice, standin_spec(gpus=1, extra="+standin.fail=runtime") + "max_retries: 1\n")
    tick_until(lambda: state_of(task) == S.FAILED, timeout=120)
    assert task.attempts.count() == 2


def test_cancel_of_a_running_task_stops_it_on_ray(alice, client_for, submit, on_ray):
    task = submit(alice, standin_spec(gpus=4, steps=200, step_s=0.2))
    tick_until(lambda: state_of(task) == S.RUNNING)
    response = client_for(alice).post(f"/api/v2/tasks/{task.task_id}/cancel")
    assert response.status_code == 202
    tick_until(lambda: state_of(task) == S.CANCELED, timeout=60)
    attempt = task.attempts.get()
    assert ray_status(on_ray, attempt.ray_submission_id) == JobStatus.STOPPED
    assert task.events.filter(kind=EventKind.STOP_REQUESTED).count() == 1


def test_the_cluster_api_shows_what_the_scheduler_saw(alice, client_for, on_ray):
    from tasks.scheduler.tick import tick

    tick()
    body = client_for(alice).get("/api/v2/cluster").json()
    assert body["reachable"] is True
    assert body["gpus_total"] == 8
    workers = [node for node in body["nodes"] if node["is_worker"]]
    assert len(workers) == 2 and all(node["gpus_total"] == 4 for node in workers)
    assert [node["is_head"] for node in body["nodes"]].count(True) == 1
