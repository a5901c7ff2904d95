"""What users read of Ray's side: the queue and the cluster. Neither waits on Ray: the
scheduler records what it sees (ClusterState) and these views read the database."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.conf import settings
from django.db.models import Case, IntegerField, QuerySet, Value, When
from drf_spectacular.utils import extend_schema
from rest_framework.generics import GenericAPIView
from rest_framework.pagination import PageNumberPagination
from rest_framework.request import Request
from rest_framework.response import Response

from raypool.discovery import head_file_from_settings, read_head
from tasks.models import ACTIVE_STATES, WAITING_STATES, ClusterState, Task
from tasks.serializers import ClusterSerializer, QueueEntrySerializer


def waiting_reason(task: Task) -> str:
    """Why a waiting or running task is where it is, in words."""
    if task.state in ACTIVE_STATES:
        return "stop requested" if task.cancel_requested_at else f"{task.state.lower()} on Ray"
    return task.pending_reason or "waiting for the scheduler"


def queue_tasks() -> QuerySet[Task]:
    """Tasks on Ray first, then the waiting ones in scheduling order."""
    on_ray = Case(When(state__in=ACTIVE_STATES, then=Value(0)), default=Value(1), output_field=IntegerField())
    return (
        Task.objects.filter(state__in=[*ACTIVE_STATES, *WAITING_STATES])
        .select_related("user")
        .annotate(on_ray=on_ray)
        .order_by("on_ray", "-priority_rank", "created_at", "id")
    )


def queue_entries(tasks: Iterable[Task], viewer: Any, *, offset: int = 0) -> list[dict[str, Any]]:
    """Queue rows as ``viewer`` may see them: another user's task keeps its place and size but
    not its id nor its owner. ``tasks`` is a slice of queue_tasks() starting at ``offset``."""
    on_ray = Task.objects.filter(state__in=ACTIVE_STATES).count()
    rows = []
    for index, task in enumerate(tasks):
        mine = viewer.is_staff or task.user_id == viewer.pk
        position = offset + index + 1 - on_ray
        rows.append(
            {
                "position": position if task.state in WAITING_STATES else None,
                "task_id": task.task_id if mine else None,
                "user": task.user.username if mine else None,
                "state": task.state,
                "priority": task.priority,
                "nnodes": task.nnodes,
                "n_gpus_per_node": task.n_gpus_per_node,
                "gpus": task.total_gpus,
                "reason": waiting_reason(task),
                "created_at": task.created_at,
                "next_run_at": task.next_run_at,
            }
        )
    return rows


class QueueView(GenericAPIView):
    """Waiting and running tasks in scheduling order (tasks on Ray first, then the queue)."""

    serializer_class = QueueEntrySerializer

    def get_queryset(self) -> QuerySet[Task]:
        return queue_tasks()

    @extend_schema(
        summary="The queue: each task's position and why it waits", responses=QueueEntrySerializer(many=True)
    )
    def get(self, request: Request) -> Response:
        page = self.paginate_queryset(self.get_queryset())
        paginator = self.paginator
        offset = 0
        if page is not None and isinstance(paginator, PageNumberPagination) and paginator.page is not None:
            offset = paginator.page.start_index() - 1
        rows = queue_entries(page or [], request.user, offset=offset)
        return self.get_paginated_response(QueueEntrySerializer(rows, many=True).data)


def cluster_summary() -> dict[str, Any]:
    state = ClusterState.objects.filter(name="default").first()
    nodes = state.nodes if state else []
    alive_workers = [node for node in nodes if node.get("alive") and node.get("is_worker")]
    record = read_head(head_file_from_settings())
    head: dict[str, Any]
    if settings.ARGUS_RAY_JOB_SERVER_URL:
        head = {"job_server_url": settings.ARGUS_RAY_JOB_SERVER_URL, "updated_at": None, "fresh": True}
    elif record is not None:
        head = {"job_server_url": record.job_server_url, "updated_at": record.updated_at, "fresh": record.is_fresh()}
    else:
        head = {"job_server_url": None, "updated_at": None, "fresh": False}
    return {
        "reachable": bool(state and state.reachable),
        "checked_at": state.checked_at if state else None,
        "error": (state.error if state else "The scheduler has not looked at Ray yet."),
        "nodes": nodes,
        "gpus_total": sum(node.get("gpus_total", 0) for node in alive_workers),
        "gpus_free": sum(node.get("gpus_free", 0) for node in alive_workers),
        "cpus_total": sum(node.get("cpus_total", 0) for node in alive_workers),
        "cpus_free": sum(node.get("cpus_free", 0) for node in alive_workers),
        "cpus_per_gpu": settings.ARGUS_CPUS_PER_GPU,
        "head": head,
        "foreign_jobs": state.foreign_jobs if state else [],
    }


class ClusterView(GenericAPIView):
    serializer_class = ClusterSerializer
    pagination_class = None

    @extend_schema(summary="The Ray cluster as the scheduler last saw it")
    def get(self, request: Request) -> Response:
        return Response(ClusterSerializer(cluster_summary()).data)
