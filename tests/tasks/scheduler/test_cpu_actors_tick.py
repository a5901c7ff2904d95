"""verl's CPU actors through the tick (fake Ray) and the API: a fully-async task is admitted only
where its actors fit beside its pools, their CPUs are promised where admission planned them until
Ray has placed the task's GPUs, and the whole demand is shown."""

from __future__ import annotations

import pytest
from django.utils import timezone

from tasks.choices import EventKind, TaskState
from tasks.models import Task
from tasks.scheduler.launch import free_room, held_actor_cpus, live_holdings, running_now
from tasks.scheduler.rooms import Room
from tasks.scheduler.tick import tick

pytestmark = pytest.mark.django_db
S = TaskState

FULLY_ASYNC = (
    "kind: advanced\nworkload: ppo\nnnodes: 1\nn_gpus_per_node: 1\n"
    "command: python3 -m verl.experimental.fully_async_policy.fully_async_main trainer.nnodes=1"
    " trainer.n_gpus_per_node=1 rollout.nnodes=1 rollout.n_gpus_per_node=1\n"
)
ACTORS = "FullyAsyncTaskRunner 1 + FullyAsyncTrainer 10 + FullyAsyncRollouter 10 + MessageQueue 2 CPUs"


@pytest.fixture
def ray(fake_ray):
    """A 4-GPU worker (14 CPUs) and a worker of 24 CPUs without GPUs."""
    ray = fake_ray([4, 0])
    ray.nodes[1].cpus_total = ray.nodes[1].ray_cpus_free = 24.0
    return ray


def test_its_actors_are_admitted_promised_and_then_left_to_rays_count(alice, make_task, ray):
    first = make_task(alice, spec=FULLY_ASYNC, stall_timeout_s=None)
    assert first.cpu_actors == [
        {"name": "FullyAsyncTaskRunner", "cpus": 1.0},
        {"name": "FullyAsyncTrainer", "cpus": 10.0},
        {"name": "FullyAsyncRollouter", "cpus": 10.0},
        {"name": "MessageQueue", "cpus": 2.0},
    ]
    tick()
    attempt = first.attempts.get()
    # The pools' 2 GPUs and 6 CPUs on n0 (8 CPUs left there); the actors, 10 CPUs at least each
    # but for two, all on n1.
    assert (attempt.placement, attempt.actor_cpus) == ({"n0": 2}, {"n1": 23.0})
    admitted = first.events.get(kind=EventKind.STATE_TRANSITION, to_state=S.SUBMITTING)
    pools = "(pools: trainer 1x1 + rollout 1x1)"
    assert admitted.message == f"Admitted: 2 GPUs on 1 node(s) {pools}; CPU actors: {ACTORS}."
    assert admitted.data["actor_cpus"] == {"n1": 23.0}

    # Ray counts nothing yet (the fake shows every node free): the promise holds the actors' CPUs,
    # and planning gives them back where they were promised when the task ends.
    assert free_room(ray.cluster(), live_holdings())[1] == {"n0": Room(2.0, 8.0), "n1": Room(0.0, 1.0)}
    (running,) = running_now(timezone.now(), live_holdings())
    assert (running.placement, running.cpus_per_node) == ({"n1": 0, "n0": 2}, {"n1": 23.0, "n0": 6.0})
    second = make_task(alice, spec=FULLY_ASYNC)
    tick()
    second.refresh_from_db()
    waiting = (
        "its FullyAsyncTrainer actor needs 10 CPUs free on one worker node beside its pools; at most 2 CPUs free "
        f"on one now (verl's actors outside its GPU bundles: {ACTORS})"
    )
    assert (second.state, second.pending_reason, second.attempts.count()) == (S.PENDING_RESOURCES, waiting, 0)

    # Ray has placed both pools' groups, its actors made before them: Ray's count holds the
    # actors wherever Ray put them, and the promise gives them up.
    ray.set_status(attempt.ray_submission_id, "RUNNING", job_id="01000000")
    ray.placed = {"01000000": {"n0": 2}}
    ray.nodes[0].ray_gpus_free, ray.nodes[0].ray_cpus_free = 2.0, 8.0
    ray.nodes[1].ray_cpus_free = 1.0
    tick()
    attempt.refresh_from_db()
    assert attempt.nodes == {"n0": 2} and held_actor_cpus(attempt) == {}
    assert free_room(ray.cluster(), live_holdings())[1] == {"n0": Room(2.0, 8.0), "n1": Room(0.0, 1.0)}
    (running,) = running_now(timezone.now(), live_holdings())
    assert (running.placement, running.cpus_per_node) == ({"n0": 2}, {"n0": 6.0})
    assert Task.objects.get(pk=second.pk).pending_reason == waiting

    ray.set_status(attempt.ray_submission_id, "SUCCEEDED")
    for node in ray.nodes:
        node.ray_gpus_free, node.ray_cpus_free = node.gpus_total, node.cpus_total
    tick()
    tick()
    assert Task.objects.get(pk=second.pk).state == S.SUBMITTED


def test_the_api_and_the_page_show_the_actors_beside_the_pools(alice, make_task, fake_ray, client_for, client):
    fake_ray([4])  # 14 CPUs: never room for 6 + 23
    task = make_task(alice, spec=FULLY_ASYNC)
    tick()
    body = client_for(alice).get(f"/api/v2/tasks/{task.task_id}").json()
    assert body["cpu_actors"] == task.cpu_actors
    assert body["pending_reason"].startswith("its FullyAsyncTrainer actor needs 10 CPUs on one worker node")
    basic = make_task(alice)
    assert client_for(alice).get(f"/api/v2/tasks/{basic.task_id}").json()["cpu_actors"] == []
    client.force_login(alice)
    page = client.get(f"/tasks/{task.task_id}/").content.decode()
    assert (
        "and beside them the CPUs of verl's own actors, each on one node (FullyAsyncTaskRunner: 1 CPU; "
        "FullyAsyncTrainer: 10 CPUs; FullyAsyncRollouter: 10 CPUs; MessageQueue: 2 CPUs)."
    ) in page
