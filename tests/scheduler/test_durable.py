"""Durable training on a real Ray cluster, through the scheduler's tick: a retry resumes from
the task's last checkpoint, a node short of CPUs is passed over, and a run that overstays its
time limit, falls silent or waits for a placement Ray cannot give is stopped."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from ray.job_submission import JobStatus, JobSubmissionClient

from devkit.ray_cluster import LocalRayCluster, infeasible_request
from devkit.standin import standin_spec
from devkit.wait import wait_for
from tasks.choices import EventKind, FailureKind, TaskState
from tasks.jobfiles import checkpoint_dir
from tasks.logs.lines import clean_lines
from tasks.scheduler.rayjobs import RayJobs
from tests.conftest import PPO_SPEC
from tests.scheduler.conftest import ray_status, state_of, tick_until

pytestmark = [pytest.mark.ray, pytest.mark.django_db]
S = TaskState
# A training step's metrics line: not verl's validation before training ("step:0 - val-core/…", or
# at the step it resumed from), which the stand-in logs as verl does.
STEP = re.compile(r"^step:(\d+) - (?!val-)")

# A basic spec: Argus passes verl the task's checkpoint folder and resume_mode=auto itself, and
# save_freq defaults to 20. The stand-in answers to verl.trainer.main_ppo, a step every 0.2 s.
DURABLE_DEMO = Path(__file__).resolve().parents[2] / "examples" / "durable.yaml"
RESUMABLE = PPO_SPEC + "total_training_steps: 40\nmax_retries: {retries}\n"


def steps_in(log: Path) -> list[int]:
    """The training steps a driver.log shows, in order, each once (on one host with several
    nodes Ray prints every actor line twice)."""
    seen: list[int] = []
    for line in clean_lines(log.read_text() if log.exists() else ""):
        if (match := STEP.match(line)) and int(match[1]) not in seen:
            seen.append(int(match[1]))
    return seen


@pytest.fixture
def cpu_poor_cluster(settings) -> Iterator[LocalRayCluster]:
    """A cluster of the test's own: a head and one worker with 4 GPUs but only 4 CPUs (verl's
    bundles ask 3 per GPU). Started before the session's cluster, so that one runs at a time."""
    cluster = LocalRayCluster()
    try:
        cluster.start_head()
        cluster.add_worker(gpus=4, cpus=4)
        cluster.wait_for_gpus(4, timeout=120)
        cluster.warm_up()
        settings.ARGUS_RAY_JOB_SERVER_URL = cluster.job_server_url
        settings.ARGUS_RAY_GCS_ADDRESS = cluster.gcs_address
        yield cluster
    finally:
        cluster.stop()


def test_a_node_with_the_gpus_but_too_few_cpus_is_passed_over(alice, submit, cpu_poor_cluster):
    task = submit(alice, standin_spec(gpus=4, steps=3, step_s=0.1))
    tick_until(lambda: state_of(task) == S.PENDING_RESOURCES, timeout=30)
    assert task.pending_reason == (
        "needs 1 node with 4 free GPUs and 12 CPUs each (ARGUS_CPUS_PER_GPU, as verl's bundles ask); "
        "the worker nodes with the GPUs have at most 4 CPUs: it can start only when larger nodes join"
    )
    assert not task.attempts.exists()  # never sent to Ray, where verl would wait for ever

    cluster = cpu_poor_cluster
    cluster.add_worker(gpus=4)  # 14 CPUs
    cluster.wait_for_gpus(8, timeout=120)
    tick_until(lambda: state_of(task) == S.SUCCEEDED, timeout=120)
    workers = {node.node_id: node.cpus_total for node in RayJobs.connect().cluster().workers}
    assert sorted(workers.values()) == [4.0, 14.0]
    (big,) = [node for node, cpus in workers.items() if cpus == 14.0]
    attempt = task.attempts.get()
    assert attempt.placement == {big: 4}


def test_a_run_stopped_mid_way_resumes_from_its_last_checkpoint(alice, submit, client_for, on_ray, datasets):
    task = submit(alice, RESUMABLE.format(retries=1))
    tick_until(lambda: state_of(task) == S.RUNNING)
    first = task.attempts.get()
    first_log = Path(first.log_path)
    wait_for(lambda: 21 in steps_in(first_log), "step 21 in the first attempt's log", timeout=60, interval=0.05)
    # By hand, outside Argus: a failure, retried per max_retries. Ray's stop is not instant (SIGTERM,
    # which the driver heeds only when ray.get returns; SIGKILL after 3 s): the trainer goes on for
    # a second or two, so the next checkpoint (step 40, the last) is 3.8 s away.
    JobSubmissionClient(on_ray.job_server_url).stop_job(first.ray_submission_id)

    tick_until(lambda: state_of(task) == S.SUCCEEDED, timeout=120)
    first.refresh_from_db()
    second = task.attempts.get(attempt_no=2)
    assert ray_status(on_ray, first.ray_submission_id) == JobStatus.STOPPED
    reached = steps_in(first_log)
    assert reached[:21] == list(range(1, 22)) and reached[-1] < 40, reached
    assert first.resume_known and first.resumed_from_step is None  # from scratch
    assert second.resume_known and second.resumed_from_step == 20
    assert steps_in(Path(second.log_path)) == list(range(21, 41))  # attempt 2 starts at step 21
    folder = checkpoint_dir("alice", task.task_id)
    assert sorted(p.name for p in folder.glob("global_step_*")) == ["global_step_20", "global_step_40"]
    assert (folder / "latest_checkpointed_iteration.txt").read_text() == "40"

    client = client_for(alice)
    metrics = client.get(f"/api/v2/tasks/{task.task_id}/metrics").json()
    assert [step for step, _ in metrics["series"]["critic/score/mean"]] == list(range(1, 41))  # each once
    assert [(a["attempt_no"], a["first_step"], a["resumed_from_step"]) for a in metrics["attempts"]] == [
        (1, 1, None),
        (2, 21, 20),
    ]
    detail = client.get(f"/api/v2/tasks/{task.task_id}").json()
    assert [a["summary"] for a in detail["attempts"]] == [
        "attempt 1 started from scratch",
        "attempt 2 resumed from step 20",
    ]
    assert first.failure_kind == FailureKind.UNKNOWN
    assert task.events.filter(kind=EventKind.RETRY_SCHEDULED).count() == 1


def test_a_run_stopped_outside_argus_without_retries_left_fails(alice, submit, on_ray, datasets):
    task = submit(alice, RESUMABLE.format(retries=0))
    tick_until(lambda: state_of(task) == S.RUNNING)
    first = task.attempts.get()
    wait_for(lambda: 2 in steps_in(Path(first.log_path)), "step 2 in the log", timeout=60, interval=0.05)
    JobSubmissionClient(on_ray.job_server_url).stop_job(first.ray_submission_id)

    tick_until(lambda: state_of(task) in (S.FAILED, S.QUEUED, S.SUBMITTING, S.SUBMITTED), timeout=60)
    assert task.state == S.FAILED
    assert task.attempts.count() == 1
    first.refresh_from_db()
    assert first.failure_kind == FailureKind.UNKNOWN
    assert task.error_summary == "Attempt 1 failed (UNKNOWN): the Ray job was stopped outside Argus. See the log."


def test_a_time_limit_stops_the_run_for_good(alice, submit, on_ray):
    # max_retries would allow a retry: a time limit is final all the same.
    task = submit(alice, standin_spec(gpus=1, steps=1000, step_s=0.3) + "time_limit: 5\nmax_retries: 1\n")
    tick_until(lambda: state_of(task) == S.FAILED, timeout=60)
    attempt = task.attempts.get()
    assert attempt.failure_kind == FailureKind.TIME_LIMIT
    assert "the time limit of 5 s passed (time_limit: 5 s)" in task.error_summary
    assert ray_status(on_ray, attempt.ray_submission_id) == JobStatus.STOPPED
    assert attempt.start_time is not None and attempt.end_time is not None
    assert 5 <= (attempt.end_time - attempt.start_time).total_seconds() < 20
    assert len(steps_in(Path(attempt.log_path))) < 1000


def test_a_silent_run_is_stopped_as_stalled(alice, submit, on_ray):
    spec = standin_spec(gpus=1, steps=50, step_s=0.1, extra="+standin.stall_after=2") + "stall_timeout: 5\n"
    task = submit(alice, spec)
    tick_until(lambda: state_of(task) == S.FAILED, timeout=60)
    attempt = task.attempts.get()
    assert attempt.failure_kind == FailureKind.STALLED
    assert "driver.log has not grown for" in task.error_summary and "(stall_timeout: 5 s)" in task.error_summary
    assert ray_status(on_ray, attempt.ray_submission_id) == JobStatus.STOPPED
    assert steps_in(Path(attempt.log_path)) == [1, 2]


def test_an_infeasible_placement_is_requeued_not_left_running(alice, submit, client_for, on_ray, settings):
    settings.ARGUS_CPUS_PER_GPU = 0  # admission lets it through; Ray cannot place it
    settings.ARGUS_PLACEMENT_GRACE_S = 5
    task = submit(alice, standin_spec(gpus=1, extra="+standin.cpus_per_gpu=20"))

    def requeued() -> bool:
        return state_of(task) == S.PENDING_RESOURCES and task.attempts.exclude(end_time=None).exists()

    tick_until(requeued, timeout=90)
    attempt = task.attempts.get()
    assert attempt.failure_kind == FailureKind.INSUFFICIENT_RESOURCES
    assert ray_status(on_ray, attempt.ray_submission_id) == JobStatus.STOPPED
    reason = re.fullmatch(
        r"the cluster had no room \(Ray cannot place verl's workers: (.*)\); retrying after \d\d:\d\d:\d\d UTC",
        task.pending_reason,
    )
    assert reason, task.pending_reason
    assert infeasible_request(reason[1]) == {"CPU": 20.0, "GPU": 1.0}

    response = client_for(alice).post(f"/api/v2/tasks/{task.task_id}/cancel")
    assert response.status_code == 200, response.content
    assert state_of(task) == S.CANCELED


def test_the_durable_demo_resumes_from_its_checkpoint(alice, submit, client_for, on_ray, settings):
    # docs/durable-training.md on `make run`: examples/durable.yaml, its Ray job stopped by hand.
    settings.ARGUS_ADVANCED_ALLOWED_MODULES = ["verl.trainer.", "examples."]
    # Every checkpoint kept: the one it resumed from (step 10 when the stop came early) is older
    # than the last 3 once the run ends (retention: tests/scheduler/test_checkpoint_retention.py).
    settings.ARGUS_KEEP_CHECKPOINTS = 0
    task = submit(alice, DURABLE_DEMO.read_text())
    tick_until(lambda: state_of(task) == S.RUNNING)
    first = task.attempts.get()
    wait_for(lambda: 12 in steps_in(Path(first.log_path)), "step 12", timeout=60, interval=0.05)
    JobSubmissionClient(on_ray.job_server_url).stop_job(first.ray_submission_id)

    tick_until(lambda: state_of(task) in (S.SUCCEEDED, S.FAILED), timeout=120)
    assert task.state == S.SUCCEEDED, task.error_summary
    second = task.attempts.get(attempt_no=2)
    # How far attempt 1 got before Ray's stop took depends on the machine: 10 or 20.
    resumed = second.resumed_from_step
    assert resumed in (10, 20), resumed
    assert steps_in(Path(second.log_path)) == list(range(resumed + 1, 41))
    assert (checkpoint_dir("alice", task.task_id) / f"global_step_{resumed}" / "weights.npy").is_file()
    client = client_for(alice)
    assert client.get(f"/api/v2/tasks/{task.task_id}").json()["attempts"][1]["summary"] == (
        f"attempt 2 resumed from step {resumed}"
    )
    metrics = client.get(f"/api/v2/tasks/{task.task_id}/metrics").json()
    assert [step for step, _ in metrics["series"]["val/loss"]] == list(range(1, 41))
