"""A worker node dies under a running task (killed whole, as a power cut takes it:
devkit.ray_cluster.LocalRayCluster.kill_node), on a real Ray cluster, through the scheduler's
tick: the task goes back to the queue in its place, resumes from its last checkpoint on the nodes
left, and the death is not charged to max_retries (NODE_FAILURE).

The cluster is this module's own (a head and three 1-GPU workers, 5 CPUs each: the smallest on
which a 2-node task has a node left to move to); a killed node is replaced after each test."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from ray.job_submission import JobSubmissionClient

from devkit.ray_cluster import LocalRayCluster
from devkit.standin import standin_spec
from devkit.wait import wait_for
from tasks.choices import FailureKind, TaskState
from tasks.jobfiles import checkpoint_dir
from tasks.models import Task
from tests.scheduler.conftest import state_of, tick_until
from tests.scheduler.test_durable import steps_in

pytestmark = [pytest.mark.ray, pytest.mark.django_db]
S = TaskState
WORKERS = 3

# A checkpoint every 5 steps of 0.4 s, and max_retries 0, so that only a death not counted as
# the task's failure lets it finish. The node dies at step 7 (kill_under): the 23 steps left
# (9 s) are the margin for the test's own look at the attempt's actors before it kills, and
# the second attempt runs what is left after the checkpoint it resumes from (~8 s).
STEPS = 30
DURABLE = "trainer.default_local_dir=$ARGUS_CHECKPOINT_DIR trainer.save_freq=5"


def spec(nnodes: int) -> str:
    return standin_spec(nnodes=nnodes, gpus=1, steps=STEPS, step_s=0.4, extra=DURABLE) + "max_retries: 0\n"


@pytest.fixture(scope="module")
def one_gpu_workers() -> Iterator[LocalRayCluster]:
    cluster = LocalRayCluster()
    try:
        cluster.start_head()
        for joined in range(1, WORKERS + 1):  # one at a time: two raylets starting at once time out
            cluster.add_worker(gpus=1)
            cluster.wait_for_gpus(joined, timeout=120)
        cluster.warm_up()
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def cluster(one_gpu_workers: LocalRayCluster, settings) -> Iterator[LocalRayCluster]:
    cluster = one_gpu_workers
    settings.ARGUS_RAY_JOB_SERVER_URL = cluster.job_server_url
    settings.ARGUS_RAY_GCS_ADDRESS = cluster.gcs_address
    settings.ARGUS_RETRY_INTERVAL_S = 1
    settings.ARGUS_RETRY_MAX_INTERVAL_S = 2
    yield cluster
    client = JobSubmissionClient(cluster.job_server_url)
    for job in client.list_jobs():
        if not job.status.is_terminal() and job.submission_id:
            client.stop_job(job.submission_id)
    while len(cluster.workers) < WORKERS:  # the next test gets three workers again
        cluster.rejoin(cluster.killed[-1])
    cluster.wait_for_gpus(WORKERS, timeout=60)


def job_actors(cluster: LocalRayCluster, ray_job_id: str) -> list:
    from ray.util.state import list_actors

    actors = list_actors(address=cluster.job_server_url, timeout=10, raise_on_missing_output=False, limit=10_000)
    return [actor for actor in actors if actor.job_id == ray_job_id]


def saved_step(task: Task) -> int:
    return int((checkpoint_dir(task.user.username, task.task_id) / "latest_checkpointed_iteration.txt").read_text())


def kill_under(task: Task, cluster: LocalRayCluster, pick) -> tuple[str, int]:
    """Run ``task`` to step 7 (a checkpoint at 5), kill the worker ``pick(attempt, actors)``
    names, tick until the attempt has ended, and return the node and the step its last
    checkpoint holds once none of the attempt's actors is left alive (the next attempt must
    resume from exactly that one)."""
    tick_until(lambda: state_of(task) == S.RUNNING, timeout=60)
    first = task.attempts.get()
    tick_until(lambda: 7 in steps_in(Path(first.log_path)), timeout=60)
    first.refresh_from_db()
    victim = pick(first, job_actors(cluster, first.ray_job_id))
    cluster.kill_node(cluster.worker(victim))
    cluster.wait_until_dead(victim, timeout=30)

    def ended() -> bool:
        first.refresh_from_db()
        return first.end_time is not None

    tick_until(ended, timeout=60)
    wait_for(
        lambda: all(actor.state == "DEAD" for actor in job_actors(cluster, first.ray_job_id)),
        "the first attempt's actors dead",
        timeout=20,
        interval=0.2,
    )
    return victim, saved_step(task)


def assert_resumed_elsewhere(task: Task, victim: str, saved: int) -> None:
    tick_until(lambda: state_of(task) in (S.SUCCEEDED, S.FAILED), timeout=120)
    assert task.state == S.SUCCEEDED, task.error_summary
    first, second = task.attempts.order_by("attempt_no")
    assert first.failure_kind == FailureKind.NODE_FAILURE, (first.failure_kind, first.stop_line, first.message)
    assert saved >= 5
    assert second.resumed_from_step == saved
    assert steps_in(Path(second.log_path)) == list(range(saved + 1, STEPS + 1))
    assert victim not in (second.node_id, *second.nodes)
    assert task.max_retries == 0 and second.failure_kind == ""
    requeued = task.events.get(attempt=first, to_state=S.QUEUED)
    assert requeued.data["failure_kind"] == FailureKind.NODE_FAILURE
    assert any(victim[:8] in name for name in requeued.data["dead_nodes"]), requeued.data


def test_the_drivers_node_dies_and_the_task_resumes_on_another(alice, submit, cluster):
    task = submit(alice, spec(nnodes=1))

    def drivers_node(attempt, actors) -> str:
        driver = JobSubmissionClient(cluster.job_server_url).get_job_info(attempt.ray_submission_id).driver_node_id
        assert driver and attempt.node_id == driver  # the scheduler's record of it
        return driver

    victim, saved = kill_under(task, cluster, drivers_node)
    first = task.attempts.get(attempt_no=1)
    job = JobSubmissionClient(cluster.job_server_url).get_job_info(first.ray_submission_id)
    assert job.error_type == "JOB_SUPERVISOR_ACTOR_DIED", (job.error_type, job.message)
    assert_resumed_elsewhere(task, victim, saved)


def test_a_node_with_only_training_actors_dies_and_the_task_resumes(alice, submit, cluster):
    task = submit(alice, spec(nnodes=2))

    def training_node(attempt, actors) -> str:
        driver = JobSubmissionClient(cluster.job_server_url).get_job_info(attempt.ray_submission_id).driver_node_id
        workers = {actor.node_id for actor in actors if actor.class_name == "WorkerDict"}
        runner = {actor.node_id for actor in actors if actor.class_name == "TaskRunner"}
        assert len(workers) == 2, actors  # one placement group a node, as verl's
        # The scheduler read where Ray placed it back from the placement groups.
        tick_until(lambda: attempt.refresh_from_db() or attempt.nodes, timeout=20)
        assert attempt.nodes == dict.fromkeys(workers, 1)
        # A node without the driver, and without the TaskRunner when there is one: the run then
        # fails as verl's does, its TaskRunner's call to a worker raising in the driver.
        return sorted(workers - {driver}, key=lambda node: node in runner)[0]

    victim, saved = kill_under(task, cluster, training_node)
    first = task.attempts.get(attempt_no=1)
    assert "ray.exceptions.RayTaskError(Actor" in Path(first.log_path).read_text()
    assert first.exit_code == 1  # the driver lived to say why
    assert_resumed_elsewhere(task, victim, saved)
