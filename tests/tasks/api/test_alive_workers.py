"""The live workers, one filter (ClusterState.workers): the cluster API, its page and /metrics count
the same nodes (a dead worker and the head are not among them)."""

from __future__ import annotations

import pytest
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from tasks.models import ClusterState

pytestmark = pytest.mark.django_db

NODES = [
    {"node_id": "w1", "ip": "10.0.0.1", "alive": True, "is_head": False, "is_worker": True},
    {"node_id": "w2", "ip": "10.0.0.2", "alive": True, "is_head": False, "is_worker": True},
    {"node_id": "dead", "ip": "10.0.0.3", "alive": False, "is_head": False, "is_worker": True},
    {"node_id": "head", "ip": "10.0.0.9", "alive": True, "is_head": True, "is_worker": False},
]
ROOM = {
    "w1": (4, 1.5, 32, 10),
    "w2": (8, 8, 64, 64),
    "dead": (4, 0, 32, 0),
    "head": (2, 2, 16, 16),
}


def test_the_api_the_page_and_metrics_count_the_same_live_workers(alice, client, client_for) -> None:
    nodes = [
        {
            **node,
            **dict(
                zip(("gpus_total", "gpus_free", "cpus_total", "cpus_free"), ROOM[str(node["node_id"])], strict=True)
            ),
        }
        for node in NODES
    ]
    state = ClusterState.objects.create(name="default", reachable=True, checked_at=timezone.now(), nodes=nodes)
    assert [node["node_id"] for node in state.workers] == ["w1", "w2"]
    summary = client_for(alice).get("/api/v2/cluster").json()
    assert (summary["gpus_total"], summary["gpus_free"], summary["cpus_total"], summary["cpus_free"]) == (
        12,
        9.5,
        96,
        74,
    )
    scraped = {
        sample.name: sample.value
        for family in text_string_to_metric_families(client.get("/metrics").content.decode())
        for sample in family.samples
    }
    assert scraped["argus_gpus_total"] == summary["gpus_total"]
    assert scraped["argus_gpus_free"] == summary["gpus_free"]
    assert scraped["argus_worker_nodes"] == 2
    client.force_login(alice)
    assert "on 2 live worker nodes" in client.get("/cluster/").content.decode()
