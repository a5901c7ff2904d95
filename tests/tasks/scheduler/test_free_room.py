"""Free room has one owner: what admission counts (Ray's free room less Argus's promises to
attempts Ray has not placed yet) is what the cluster page, the API and /metrics show."""

from __future__ import annotations

import pytest

from tasks.models import ClusterState
from tasks.scheduler.tick import tick

pytestmark = pytest.mark.django_db


def test_a_promised_attempts_gpus_are_not_shown_free(alice, make_task, fake_ray, client_for, admin):
    ray = fake_ray([4, 4])  # Ray says every GPU is free: it has not placed the job yet
    make_task(alice)
    tick()  # admitted: 4 GPUs promised on one node
    tick()
    nodes = {node["node_id"]: node for node in ClusterState.objects.get().nodes}
    assert sorted(node["gpus_free"] for node in nodes.values()) == [0.0, 4.0]
    cluster = client_for(alice).get("/api/v2/cluster").json()
    assert cluster["gpus_free"] == 4.0
    metrics = client_for(admin).get("/metrics").content.decode()
    assert "argus_gpus_free 4.0" in metrics
    assert ray.nodes[0].ray_gpus_free == 4.0  # Ray's own count was left as it was


def test_an_attempt_without_gpus_never_keeps_placed_ones_holding_their_promise_too(alice, make_task):
    """Until every live attempt with GPUs is placed, a placed one holds its promise and its real
    room (launch.held_nodes); an export (no GPU) has nothing to place and must not keep that on."""
    from tasks.attempts import Attempt
    from tasks.choices import TaskState
    from tasks.scheduler.launch import live_holdings

    def running(task, placement, nodes, gpus):
        task.__class__.objects.filter(pk=task.pk).update(state=TaskState.RUNNING)
        return Attempt.objects.create(
            task=task,
            attempt_no=1,
            ray_submission_id=f"{task.task_id}--a01",
            gpus=gpus,
            placement=placement,
            nodes=nodes,
        )

    trainer = running(make_task(alice), {"n1": 4}, {"n2": 4}, 4)  # promised n1, Ray put it on n2
    export = running(make_task(alice), {"n1": 0}, {}, 0)
    assert not trainer.awaits_placement and not export.awaits_placement
    assert dict((a.pk, held) for a, held in live_holdings())[trainer.pk] == {"n2": 4}

    waiting = running(make_task(alice), {"n3": 4}, {"n3": 2}, 4)  # half placed: Ray may still move
    assert waiting.awaits_placement
    assert dict((a.pk, held) for a, held in live_holdings())[trainer.pk] == {"n1": 4, "n2": 4}
    assert export.pk in dict((a.pk, held) for a, held in live_holdings())
