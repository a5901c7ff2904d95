"""verl's CPU actors on a real Ray cluster (head without CPUs + 2 workers x 4 declared GPUs, 14
CPUs each): the stand-in's experimental trainers start them as verl 0.9.1 does. A one-step-off
task (its runner's 10 CPUs beside trainer 1x1 + rollout 1x1) is admitted and succeeds; a
fully-async task whose actors (23 CPUs) cannot sit beside its pools on these workers waits, the
actor named, where the very same run sent to Ray hangs for ever, RUNNING, without a word."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
from ray.job_submission import JobStatus, JobSubmissionClient

from devkit.ray_cluster import LocalRayCluster
from devkit.wait import wait_for
from raypool.config import WORKER_RESOURCE
from tasks.choices import TaskState
from tests.scheduler.conftest import state_of, tick_until

pytestmark = [pytest.mark.ray, pytest.mark.django_db]
S = TaskState
ONE_STEP_OFF = "verl.experimental.one_step_off_policy.main_ppo"
FULLY_ASYNC = "verl.experimental.fully_async_policy.fully_async_main"


def command(module: str, gpus: int, steps: int) -> str:
    """The stand-in's experimental trainer: trainer 1 x ``gpus``, rollout 1 x ``gpus`` (tensor
    parallel 1: one replica per GPU)."""
    return (
        f"python3 -m {module} trainer.nnodes=1 trainer.n_gpus_per_node={gpus} rollout.nnodes=1 "
        f"rollout.n_gpus_per_node={gpus} actor_rollout_ref.rollout.tensor_model_parallel_size=1 "
        f"+standin.steps={steps} +standin.step_s=0.2"
    )


def spec(module: str, gpus: int, steps: int = 3) -> str:
    head = f"kind: advanced\nworkload: ppo\nnnodes: 1\nn_gpus_per_node: {gpus}\n"
    return f"{head}command: {command(module, gpus, steps)}\n"


def pending_actors(cluster: LocalRayCluster, class_name: str) -> list:
    from ray.util.state import list_actors

    filters: list[tuple[str, str, str | bool | int | float]] = [
        ("class_name", "=", class_name),
        ("state", "=", "PENDING_CREATION"),
    ]
    return list_actors(address=cluster.job_server_url, filters=filters, timeout=10, raise_on_missing_output=False)


def test_a_one_step_off_task_gets_its_runners_cpus_and_succeeds(alice, submit, on_ray):
    task = submit(alice, spec(ONE_STEP_OFF, 1))
    assert (task.total_gpus, task.cpu_actors) == (2, [{"name": "OneStepTaskRunner", "cpus": 10.0}])
    tick_until(lambda: state_of(task) == S.SUCCEEDED, timeout=120)
    attempt = task.attempts.get()
    assert list(attempt.actor_cpus.values()) == [10.0]
    assert attempt.failure_kind == "" and "step:3 - " in Path(attempt.log_path).read_text()


def test_a_fully_async_task_waits_where_its_actors_would_hang(alice, submit, on_ray, client_for, tmp_path):
    # Bundles of 6 + 6 CPUs and actors of 1 + 10 + 10 + 2: 35 of the workers' 28 (Ray's rollout
    # replicas ask 2 CPUs a GPU, not 3: 33 in fact).
    task = submit(alice, spec(FULLY_ASYNC, 2))
    reason = (
        "its FullyAsyncRollouter actor needs 10 CPUs on one worker node beside its pools (trainer 1x2 + rollout "
        "1x2) and its other actors; the worker nodes would have at most 4 CPUs left on one: it can start only when "
        "larger nodes join (verl's actors outside its GPU bundles: FullyAsyncTaskRunner 1 + FullyAsyncTrainer 10 + "
        "FullyAsyncRollouter 10 + MessageQueue 2 CPUs)"
    )
    tick_until(lambda: state_of(task) == S.PENDING_RESOURCES, timeout=10)
    for _ in range(2):
        tick_until(lambda: True)
        task.refresh_from_db()
        assert (task.state, task.pending_reason, task.attempts.count()) == (S.PENDING_RESOURCES, reason, 0)
    assert client_for(alice).post(f"/api/v2/tasks/{task.task_id}/cancel").status_code == 200  # never on Ray
    assert state_of(task) == S.CANCELED

    # The same run sent to Ray as Argus sends it, unchecked: the runner, the trainer's actor and
    # the trainer's groups take 17 CPUs, and no worker has 10 left for the rollouter's actor.
    log = tmp_path / "driver.log"
    argv = shlex.split(command(FULLY_ASYNC, 2, steps=3))
    entrypoint = shlex.join(["python3", "-m", "raypool.driver", "--log", str(log), "--", *argv])
    client = JobSubmissionClient(on_ray.job_server_url)
    job = client.submit_job(entrypoint=entrypoint, entrypoint_resources={WORKER_RESOURCE: 1})
    try:
        wait_for(lambda: pending_actors(on_ray, "FullyAsyncRollouter"), "the rollouter's actor pending", timeout=90)
        # Its runner's lines reach the driver's log through Ray's log monitor, a moment later.
        wait_for(
            lambda: "[ASYNC MAIN] Starting create rollouter..." in log.read_text(), "the runner's line", timeout=30
        )
        assert client.get_job_status(job) == JobStatus.RUNNING
        text = log.read_text()
        assert "Traceback" not in text and "Error executing job" not in text  # no word of it
    finally:
        client.stop_job(job)
    wait_for(lambda: client.get_job_status(job).is_terminal(), "the hung run stopped", timeout=30)
