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
    assert ray.nodes[0].gpus_free == 4.0  # Ray's own count was left as it was
