"""What users read of Ray's side: the queue and the cluster. Neither waits on Ray: the
scheduler records what it sees (ClusterState) and these views read the database."""

from __future__ import annotations

from dataclasses import asdict
from datetime import datetime
from typing import Any, TypedDict

from django.conf import settings
from drf_spectacular.utils import extend_schema
from rest_framework.generics import GenericAPIView
from rest_framework.pagination import PageNumberPagination
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from common.api import Pagination, error_responses
from raypool.discovery import head_file_from_settings, read_head
from raypool.raytoken import TokenError, read_token, token_file_from_settings
from tasks.api.serializers import ClusterSerializer, QueueEntrySerializer, ShareSerializer
from tasks.models import ClusterState, Task
from tasks.queue.group_use import group_use, visible_group_use
from tasks.queue.read import current_queue, queue_entries, share_rows

# The numbers of a group's row in the queue's ``groups``, as tasks.queue.group_use.GroupUse has them.
GROUP_USE_FIELDS = {
    "nominal_gpus": "The group's own GPUs (the group \"\": what no group's quota covers of the cluster's).",
    "gpus_in_use": "GPUs of the live attempts admitted in its quota, borrowed ones included.",
    "gpus_borrowed": "Of those, the GPUs of attempts running on other groups' idle quota (quota: borrowed).",
}


class QueuePagination(Pagination):
    """The queue's pages: beside each page's tasks, ``groups``: each group's quota and what it
    holds now (tasks.queue.group_use), as the caller may see them."""

    def get_paginated_response_schema(self, schema: dict[str, Any]) -> dict[str, Any]:
        paged = super().get_paginated_response_schema(schema)
        paged["properties"]["groups"] = {
            "type": "array",
            "description": "Each group's quota and the GPUs its live attempts hold: every group for admins, the "
            'caller\'s own for others; the group "" (users without a group) while it holds GPUs.',
            "items": {
                "type": "object",
                "required": ["group", *GROUP_USE_FIELDS],
                "properties": {
                    "group": {"type": "string", "description": 'Its name; "": users without a group.'},
                    **{name: {"type": "integer", "description": words} for name, words in GROUP_USE_FIELDS.items()},
                },
            },
        }
        paged["required"] = [*paged["required"], "groups"]
        return paged


class QueueView(GenericAPIView[Task]):
    """Waiting and running tasks in scheduling order (tasks on Ray first, then the queue): pages of
    tasks, each shown as the caller may see it (QueueEntrySerializer), and the groups' use of their
    quotas."""

    filter_backends: list[type] = []  # no filters: the queue is the queue
    pagination_class = QueuePagination

    @extend_schema(
        summary="The queue: each task's position and why it waits",
        description="Tasks on Ray first, then the waiting ones in the order the scheduler starts them: "
        "priority, then fair share (a lighter user's task may pass a heavier user's submitted up to "
        "ARGUS_FAIR_SHARE_WINDOW_S earlier), then submission time.",
        responses=QueueEntrySerializer(many=True),
    )
    def get(self, request: Request) -> Response:
        queue = current_queue()
        page = self.paginate_queryset(queue.tasks)
        paginator = self.paginator
        offset = 0
        if page is not None and isinstance(paginator, PageNumberPagination) and paginator.page is not None:
            offset = paginator.page.start_index() - 1
        rows = queue_entries(queue, page or [], request.user, offset=offset)
        # DRF's stub: many=True takes a list of instances, the stub one instance only.
        response = self.get_paginated_response(QueueEntrySerializer(rows, many=True).data)  # type: ignore[arg-type]
        state = ClusterState.objects.filter(name="default").first()
        uses = visible_group_use(group_use(worker_totals(state)["gpus_total"]), request.user)
        response.data["groups"] = [asdict(use) for use in uses]
        return response


class SharesView(APIView):
    """Each user's fair share: who goes first among waiting tasks of the same priority."""

    @extend_schema(
        summary="The fair-share table: each user's usage, weight and share",
        description="Every user with usage (GPU-hours, decayed with ARGUS_FAIR_SHARE_HALF_LIFE_S) or a task "
        "in the queue, the lightest first.",
        responses={200: ShareSerializer(many=True), **error_responses()},
    )
    def get(self, request: Request) -> Response:
        rows = share_rows(current_queue(), request.user)
        return Response(ShareSerializer(rows, many=True).data)  # type: ignore[arg-type]  # as in QueueView


# What a user who is not an admin reads instead of the scheduler's error: Ray's errors name the
# dashboard's address, which only admins are shown.
ERROR_FOR_USERS = "Ray did not answer the scheduler; admins see why on the cluster page."


class Head(TypedDict):
    job_server_url: str | None
    updated_at: datetime | None
    fresh: bool
    known: bool


class RayAuth(TypedDict):
    mode: str
    token_file: str
    has_token: bool
    problem: str


class WorkerTotals(TypedDict):
    workers: int
    gpus_total: float
    gpus_free: float
    cpus_total: float
    cpus_free: float


class ClusterSummary(WorkerTotals):
    """What the cluster API (ClusterSerializer) and the pages show of Ray."""

    reachable: bool
    checked_at: datetime | None
    error: str
    nodes: list[dict[str, object]]  # ClusterState.nodes: rayjobs.NodeRecord, as JSON stores it
    cpus_per_gpu: float
    head: Head
    auth: RayAuth | None
    foreign_jobs: list[dict[str, object]]  # ClusterState.foreign_jobs, likewise


def cluster_summary(admin: bool) -> ClusterSummary:
    """The cluster as the scheduler last saw it. The dashboard's address, Ray's errors and its
    authentication only for ``admin``: the dashboard answers whoever has the cluster's token,
    and a user has no business there (Argus's pages and API are their way to Ray)."""
    state = ClusterState.objects.filter(name="default").first()
    record = read_head(head_file_from_settings())
    url: str | None
    if settings.ARGUS_RAY_JOB_SERVER_URL:
        url, updated_at, fresh = settings.ARGUS_RAY_JOB_SERVER_URL, None, True
    elif record is not None:
        url, updated_at, fresh = record.job_server_url, record.updated_at, record.is_fresh()
    else:
        url, updated_at, fresh = None, None, False
    head: Head = {"job_server_url": url, "updated_at": updated_at, "fresh": fresh, "known": url is not None}
    error = state.error if state else "The scheduler has not looked at Ray yet."
    if not admin:
        head["job_server_url"] = None
        error = ERROR_FOR_USERS if state and state.error else error
    return {
        "reachable": bool(state and state.reachable),
        "checked_at": state.checked_at if state else None,
        "error": error,
        "nodes": state.nodes if state else [],
        **worker_totals(state),
        "cpus_per_gpu": settings.ARGUS_CPUS_PER_GPU,
        "head": head,
        "auth": ray_auth(state) if admin else None,
        "foreign_jobs": state.foreign_jobs if state else [],
    }


def worker_totals(state: ClusterState | None) -> WorkerTotals:
    """The live workers' GPUs and CPUs, total and free (free as admission counts it: the tick
    records it), and how many they are: what the cluster API, its pages and /metrics show."""
    workers = state.workers if state else []

    def total(key: str) -> float:
        value: float = sum(node.get(key, 0) for node in workers)
        return value

    return {
        "workers": len(workers),
        "gpus_total": total("gpus_total"),
        "gpus_free": total("gpus_free"),
        "cpus_total": total("cpus_total"),
        "cpus_free": total("cpus_free"),
    }


def ray_auth(state: ClusterState | None) -> RayAuth:
    """Whether Ray demands its token, and the token Argus sends (raypool.raytoken)."""
    path = token_file_from_settings()
    try:
        has_token, problem = read_token(path) is not None, ""
    except TokenError as error:
        has_token, problem = False, str(error)
    mode = state.ray_auth if state else ""
    return {"mode": mode, "token_file": str(path), "has_token": has_token, "problem": problem}


class ClusterView(APIView):
    @extend_schema(
        summary="The Ray cluster as the scheduler last saw it",
        description="Ray's dashboard address, the scheduler's error in full and Ray's token authentication "
        "are shown to admins only.",
        responses=ClusterSerializer,
    )
    def get(self, request: Request) -> Response:
        return Response(ClusterSerializer(cluster_summary(admin=request.user.is_staff)).data)
