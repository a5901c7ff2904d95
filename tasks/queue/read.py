"""The queue as users read it (GET /api/v2/queue, /api/v2/queue/shares and the queue page): tasks
on Ray, then the waiting ones in the scheduler's order (tasks.queue.order), each with its
estimated start, its owner's fair share and a note in words; and the fair-share table.

One read of the queue's tasks and one of the shares per request, whatever the page: the order is
the scheduler's, computed in Python over every waiting task, so it cannot be paged in SQL.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, TypedDict

from django.utils import timezone

from accounts.groups.rules import group_of
from tasks.choices import ACTIVE_STATES, QUEUE_STATES
from tasks.models import Task
from tasks.queue.notes import Placed, note
from tasks.queue.order import BY_PRIORITY_THEN_ARRIVAL, in_order
from tasks.queue.shares import Share
from tasks.specs.pools import Pool

if TYPE_CHECKING:
    from django.contrib.auth.models import AnonymousUser, User

# What the rows read of a task: not its spec, which may be large.
ROW_FIELDS = (
    "pk",
    "task_id",
    "user__username",
    "state",
    "nnodes",
    "n_gpus_per_node",
    "extra_pools",
    "priority",
    "priority_rank",
    "preemptible",
    "pending__text",
    "next_run_at",
    "estimated_start_at",
    "cancel_requested_at",
    "created_at",
    "queued_at",
)


def waiting_reason(task: Task) -> str:
    """Why a waiting or running task is where it is, in words."""
    if task.state in ACTIVE_STATES:
        return "stop requested" if task.cancel_requested_at else f"{task.state.lower()} on Ray"
    return task.pending_reason or "waiting for the scheduler"


@dataclass(frozen=True)
class Queue:
    """The queue now: ``tasks`` on Ray first (``on_ray`` of them), then the waiting in order."""

    tasks: list[Task]
    on_ray: int
    shares: dict[str, Share]  # every owner of a task here, and every user with usage
    now: datetime

    @property
    def waiting(self) -> list[Task]:
        return self.tasks[self.on_ray :]


def current_queue(now: datetime | None = None) -> Queue:
    now = now or timezone.now()
    tasks = list(
        Task.objects.filter(state__in=[*ACTIVE_STATES, *QUEUE_STATES])
        .select_related("user", "pending")
        .only(*ROW_FIELDS)
        .order_by(*BY_PRIORITY_THEN_ARRIVAL)
    )
    on_ray = [task for task in tasks if task.state in ACTIVE_STATES]
    # Owners of tasks on Ray only, shown but not counted: they have no usage yet (or they would
    # be counted), and counting them would change the others' factors from the scheduler's.
    shown = {task.user_id: task.user.username for task in on_ray}
    waiting, shares = in_order([task for task in tasks if task.state in QUEUE_STATES], now, shown)
    return Queue([*on_ray, *waiting], len(on_ray), shares, now)


class QueueEntry(TypedDict):
    """A row of the queue as a viewer may see it (the queue API and page)."""

    position: int | None
    task_id: str | None
    user: str | None
    state: str
    priority: str
    preemptible: bool
    nnodes: int
    n_gpus_per_node: int
    gpus: int
    pools: list[Pool]
    reason: str
    note: str
    estimated_start_at: datetime | None
    share: float
    created_at: datetime
    next_run_at: datetime | None


class ShareRow(TypedDict):
    """A user's row of the fair-share table; its group's part as for /api/v2/groups: admins see
    every user's, a user those of their own group's members (None for the others)."""

    user: str
    gpu_hours: float
    weight: float
    share: float
    running_gpus: int
    waiting_tasks: int
    group: str | None  # "": in no group (those users are a group of their own)
    group_gpu_hours: float | None
    group_weight: float | None
    group_share: float | None


def queue_entries(
    queue: Queue, page: Iterable[Task], viewer: User | AnonymousUser, *, offset: int = 0
) -> list[QueueEntry]:
    """Rows of ``page`` (``queue.tasks[offset:]`` onwards) as ``viewer`` may see them: another
    user's task keeps its place, size and note but not its id nor its owner."""
    placed = [_placed(task, queue.shares) for task in queue.waiting]
    rows: list[QueueEntry] = []
    for index, task in enumerate(page, start=offset):
        mine = viewer.is_staff or task.user_id == viewer.pk
        waiting = index >= queue.on_ray
        owner = task.user.username
        rows.append(
            {
                "position": index - queue.on_ray + 1 if waiting else None,
                "task_id": task.task_id if mine else None,
                "user": owner if mine else None,
                "state": task.state,
                "priority": task.priority,
                "preemptible": task.preemptible,
                "nnodes": task.nnodes,
                "n_gpus_per_node": task.n_gpus_per_node,
                "gpus": task.total_gpus,
                "pools": task.pools,
                "reason": waiting_reason(task),
                "note": note(placed, index - queue.on_ray, viewer.username, queue.now) if waiting else "",
                "estimated_start_at": task.estimated_start_at if waiting else None,
                "share": round(queue.shares[owner].factor, 3),
                "created_at": task.created_at,
                "next_run_at": task.next_run_at,
            }
        )
    return rows


def share_rows(queue: Queue, viewer: User | AnonymousUser) -> list[ShareRow]:
    """The fair-share table: every user with usage or a task in the queue, in the order fair
    share favours them (the lightest first; groups first, tasks.queue.fairshare.fair_tree)."""
    everyone = viewer.is_staff
    mine = None if everyone else _group_name(viewer)
    running: dict[str, int] = {}
    waiting: dict[str, int] = {}
    for task in queue.tasks[: queue.on_ray]:
        running[task.user.username] = running.get(task.user.username, 0) + task.total_gpus
    for task in queue.waiting:
        waiting[task.user.username] = waiting.get(task.user.username, 0) + 1
    rows: list[ShareRow] = [
        {
            "user": share.user,
            "gpu_hours": round(share.gpu_hours, 3),
            "weight": share.weight,
            "share": round(share.factor, 3),
            "running_gpus": running.get(share.user, 0),
            "waiting_tasks": waiting.get(share.user, 0),
            **_group_part(share, shown=everyone or share.group == mine),
        }
        for share in queue.shares.values()
    ]
    return sorted(rows, key=lambda row: (-row["share"], row["user"]))


class _GroupPart(TypedDict):
    group: str | None
    group_gpu_hours: float | None
    group_weight: float | None
    group_share: float | None


def _group_part(share: Share, *, shown: bool) -> _GroupPart:
    if not shown:
        return {"group": None, "group_gpu_hours": None, "group_weight": None, "group_share": None}
    return {
        "group": share.group,
        "group_gpu_hours": round(share.group_gpu_hours, 3),
        "group_weight": share.group_weight,
        "group_share": round(share.group_factor, 3),
    }


def _group_name(viewer: User | AnonymousUser) -> str | None:
    """The viewer's group's name ("": none); None for an anonymous viewer, who sees no group."""
    if not viewer.is_authenticated:
        return None
    group = group_of(viewer)
    return group.name if group else ""


def _placed(task: Task, shares: dict[str, Share]) -> Placed:
    return Placed(
        task.user.username,
        task.priority_rank,
        task.queued_at or task.created_at,
        task.estimated_start_at,
        shares[task.user.username].group,
    )
