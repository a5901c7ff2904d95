"""A task of several verl resource pools through the tick (fake Ray) and the API: admitted only when
every pool fits at once, its whole demand promised, charged, limited and shown."""

from __future__ import annotations

import pytest

from accounts.limits import set_limits
from tasks.choices import EventKind, TaskState
from tasks.models import Task, Usage
from tasks.scheduler.tick import tick

pytestmark = pytest.mark.django_db
S = TaskState

SEPARATE_ASYNC = (
    "kind: advanced\nworkload: ppo\nnnodes: 1\nn_gpus_per_node: 4\n"
    "command: python3 -m verl.trainer.main_ppo trainer.nnodes=1 trainer.n_gpus_per_node=4"
    " trainer.v1.trainer_mode=separate_async"
    " actor_rollout_ref.rollout.nnodes=1 actor_rollout_ref.rollout.n_gpus_per_node={rollout}\n"
)


def separate_async(rollout: int = 2) -> str:
    return SEPARATE_ASYNC.format(rollout=rollout)


def test_it_waits_naming_the_pool_until_every_pool_fits_at_once(alice, make_task, fake_ray):
    ray = fake_ray([4, 2])
    busy = ray.nodes[1]
    busy.ray_gpus_free, busy.ray_cpus_free = 1.0, 5.0  # another job holds one of n1's GPUs: no room for the rollout's 2
    task = make_task(alice, spec=separate_async())
    assert task.extra_pools == [{"name": "rollout", "nnodes": 1, "n_gpus_per_node": 2}]
    tick()
    task.refresh_from_db()
    assert ray.submitted == []
    assert (task.state, task.pending_reason) == (
        S.PENDING_RESOURCES,
        "its rollout pool needs 1 node with 2 free GPUs; 0 nodes have them now beside its trainer pool",
    )

    busy.ray_gpus_free, busy.ray_cpus_free = 2.0, 8.0
    tick()
    task.refresh_from_db()
    assert task.state == S.SUBMITTED
    attempt = task.attempts.get()
    assert (attempt.gpus, attempt.placement) == (6, {"n0": 4, "n1": 2})
    admitted = task.events.get(kind=EventKind.STATE_TRANSITION, to_state=S.SUBMITTING)
    assert admitted.message == "Admitted: 6 GPUs on 2 node(s) (pools: trainer 1x4 + rollout 1x2)."
    assert admitted.data["pools"] == [
        {"name": "trainer", "nnodes": 1, "n_gpus_per_node": 4},
        {"name": "rollout", "nnodes": 1, "n_gpus_per_node": 2},
    ]


def test_its_whole_demand_is_promised_to_the_nodes_until_ray_allocates_it(alice, make_task, fake_ray):
    ray = fake_ray([6, 2])
    pair = make_task(alice, spec=separate_async())  # best fit: trainer and rollout share n0's 6
    tick()
    assert pair.attempts.get().placement == {"n0": 6}
    one = make_task(alice, spec=separate_async(rollout=1))
    tick()  # Ray still shows everything free: the promise of n0's 6 GPUs (and 18 CPUs) counts
    assert len(ray.submitted) == 1
    assert Task.objects.get(pk=one.pk).pending_reason.startswith("its trainer pool needs 1 node with 4 free GPUs")


def test_a_users_running_gpus_count_every_pool(alice, make_task, fake_ray):
    fake_ray([8])
    set_limits(alice, actor="admin:root", max_running_gpus=5)
    task = make_task(alice, spec=separate_async())
    tick()
    task.refresh_from_db()
    assert (
        task.pending_reason == "needs 6 GPUs, more than alice's max_running_gpus of 5: it cannot start under this limit"
    )


def test_usage_is_charged_for_every_pool(alice, make_task, fake_ray, clock):
    ray = fake_ray([8])
    task = make_task(alice, spec=separate_async(), stall_timeout_s=None)
    tick()
    attempt = task.attempts.get()
    ray.set_status(attempt.ray_submission_id, "RUNNING")
    tick()
    clock.advance(100)
    tick()
    assert Usage.objects.get(user=alice).gpu_seconds == pytest.approx(6 * 100)


def test_the_api_and_the_pages_show_every_pool_and_their_sum(alice, make_task, fake_ray, client_for, client):
    fake_ray([4])  # never room for 6 on one 4-GPU node: it waits in the queue
    task = make_task(alice, spec=separate_async())
    tick()
    client = client_for(alice)
    body = client.get(f"/api/v2/tasks/{task.task_id}").json()
    assert body["total_gpus"] == 6
    assert body["pools"] == [
        {"name": "trainer", "nnodes": 1, "n_gpus_per_node": 4},
        {"name": "rollout", "nnodes": 1, "n_gpus_per_node": 2},
    ]
    (row,) = client.get("/api/v2/queue").json()["results"]
    assert (row["gpus"], row["pools"]) == (6, body["pools"])
    assert row["reason"] == (
        "needs its pools at once (trainer 1x4 + rollout 1x2 GPUs, each pool on nodes of its own); the cluster "
        "cannot hold them all: it can start only when more nodes join"
    )
    client.force_login(alice)
    for url in ("/queue/", "/tasks/", f"/tasks/{task.task_id}/"):
        page = client.get(url).content.decode()
        assert "6" in page and "trainer 1×4 + rollout 1×2" in page.replace(" × ", "×"), url


def test_a_basic_task_shows_its_one_pool(alice, make_task, fake_ray, client_for):
    fake_ray([4])
    task = make_task(alice)
    body = client_for(alice).get(f"/api/v2/tasks/{task.task_id}").json()
    assert body["pools"] == [{"name": "trainer", "nnodes": 1, "n_gpus_per_node": 4}]
    assert body["total_gpus"] == 4


def test_an_export_holds_no_pool():
    export = Task(workload="export", nnodes=1, n_gpus_per_node=0)  # it runs on a worker's CPUs
    assert (export.pools, export.total_gpus) == ([], 0)
