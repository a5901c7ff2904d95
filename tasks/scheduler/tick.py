"""One pass of the scheduler: see the cluster, follow what runs, stop what was canceled, admit
what fits, and now and then sweep Ray's job table.

``tick()`` is a plain function: tests call it directly, ``loop.run`` calls it for django-q2.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from functools import partial

from django.conf import settings
from django.utils import timezone

from tasks.checkpoints.prune import prune_due
from tasks.choices import ACTIVE_STATES, QUEUE_STATES, TaskState
from tasks.models import ClusterState, Task
from tasks.pipelines import waiting as dependencies
from tasks.queue import reasons
from tasks.queue.order import waiting
from tasks.scheduler.cancels import stop_canceled
from tasks.scheduler.launch import admit, free_room, live_holdings
from tasks.scheduler.rayjobs import ClusterView, RayJobs, RayUnavailable
from tasks.scheduler.rooms import Room
from tasks.scheduler.settle import ACTOR
from tasks.scheduler.storage import bounded
from tasks.scheduler.sweep import sweep, sweep_due
from tasks.scheduler.sync import sync
from tasks.scheduler.turns import Budget, guarded
from tasks.scheduler.usage import charge
from tasks.sweeps.cap import release_trials
from tasks.sweeps.curves import refresh_trials
from tasks.sweeps.lifecycle import finish_sweeps

logger = logging.getLogger(__name__)


@dataclass
class TickReport:
    reachable: bool = False
    error: str = ""
    submitted: list[str] = field(default_factory=list)
    ended: list[str] = field(default_factory=list)
    swept: bool = False
    idle: bool = True  # nothing on Ray and nothing waiting
    seconds: float = 0.0


def tick(budget: Budget | None = None, *, force_sweep: bool = False) -> TickReport:
    """One pass within ``budget`` (ARGUS_TICK_BUDGET_S by default); what the budget did not
    reach waits for the next tick."""
    budget = budget or Budget(settings.ARGUS_TICK_BUDGET_S)
    started = time.monotonic()
    report = TickReport()
    try:
        ray = RayJobs.connect()
        cluster = ray.cluster()
    except RayUnavailable as error:
        _ray_down(report, str(error))
    else:
        report.reachable = True
        url = ray.address.job_server_url
        recorded = False
        try:
            sync(ray, cluster, budget, report.ended)
            # Sweeps' trial curves, read as sync saw them move; early stopping cancels the losers,
            # whose stops go just below (their places under the sweep's cap free once they end).
            refresh_trials(budget)
            stop_canceled(ray, budget)
            charge(timezone.now())  # fair share: what ran since the last tick, before ordering the queue
            if report.ended:
                # Admission plans on the cluster as it is after sync: a job that just ended is
                # no longer counted (nor is a victim chosen to free room that is free).
                cluster = ray.cluster()
            # Live attempts and free room once a tick, as admission counts it: what it plans on
            # is what the pages, the API and /metrics show.
            holdings = live_holdings()
            room = free_room(cluster, holdings)
            _record_cluster(cluster, room, "", url)
            recorded = True
            release(budget)  # WAITING tasks a sweep's cap or their dependencies no longer hold: QUEUED or CANCELED
            # Each submission may wait on Ray: none is started once the budget is spent.
            if not budget.spent():
                admit(ray, room, holdings, budget, report.submitted)
            if (force_sweep or sweep_due()) and not budget.spent():
                sweep(ray, budget)
                report.swept = True
            if not budget.spent():  # after admission: pruning never delays a start
                prune_due(budget, time.monotonic())
        except RayUnavailable as error:
            # Ray went away mid-tick: stop asking it anything; the next tick starts over.
            report.error = str(error)
            logger.warning("tick stopped: %s", error)
            if not recorded:
                _record_cluster(cluster, free_room(cluster, live_holdings()), "", url)
    report.idle = not Task.objects.filter(state__in=[*ACTIVE_STATES, *QUEUE_STATES]).exists()
    report.seconds = time.monotonic() - started
    if report.reachable:
        ClusterState.objects.filter(name="default").update(tick_seconds=report.seconds)
    if report.submitted or report.ended:
        logger.info(
            "tick: submitted %d, ended %d in %.3f s",
            len(report.submitted),
            len(report.ended),
            report.seconds,
            extra={"submitted": report.submitted, "ended": report.ended},
        )
    return report


def release(budget: Budget) -> None:
    """Sweep trials a place under their sweep's cap freed (tasks.sweeps.cap) and WAITING tasks no
    dependency holds any more, each in its turn: QUEUED, or CANCELED when an `after` one broke;
    then the pipelines and sweeps whose last task ended. The dependencies' rules are the
    pipelines' (tasks.pipelines.waiting); the shared storage a step's outputs are read from is bounded."""
    release_trials(budget)
    for pk, verdict in dependencies.verdicts().items():
        if budget.spent():
            break
        if verdict.held:
            continue
        task = Task.objects.select_related("user").filter(pk=pk, state=TaskState.WAITING).first()
        if task is None:
            continue  # moved meanwhile (canceled by its owner)
        guarded(task, partial(dependencies.release, task, verdict, ACTOR, bounded))
    dependencies.finish_pipelines(ACTOR)
    finish_sweeps(ACTOR)


def _record_cluster(
    cluster: ClusterView | None, room: tuple[dict[str, Room], dict[str, Room]] | None, error: str, url: str | None
) -> None:
    """What web requests show of the cluster: each node, its free room as admission counts it."""
    nodes = []
    if cluster is not None and room is not None:
        _, free = room
        for node in cluster.to_json()["nodes"]:
            if node["node_id"] in free:
                node["gpus_free"], node["cpus_free"] = free[node["node_id"]].gpus, free[node["node_id"]].cpus
            nodes.append(node)
    seen = {
        "reachable": cluster is not None,
        "error": error[:2000],
        "nodes": nodes,
        "job_server_url": url or "",
        "checked_at": timezone.now(),
    }
    # One UPDATE a tick (update_or_create takes four statements: a transaction, a locking read);
    # the row is made once, on the first tick.
    if not ClusterState.objects.filter(name="default").update(**seen):
        ClusterState.objects.update_or_create(name="default", defaults=seen)


def _ray_down(report: TickReport, error: str) -> None:
    report.error = error
    _record_cluster(None, None, error, None)
    # Not Ray's words: they name its dashboard, which only admins are shown (on /cluster/).
    reason = "Ray is unreachable; the task waits until it is back"
    stale = waiting().exclude(pending__text=reason)
    pks = list(stale.values_list("pk", flat=True))
    # updated_at too: the scheduler's copy of the queue (tasks.queue.rows) reads what changed by it.
    stale.update(updated_at=timezone.now())
    reasons.write(dict.fromkeys(pks, reason))
