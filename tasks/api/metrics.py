"""``/metrics`` in Prometheus's text format, read from the database at scrape time.

The web service and the scheduler are separate processes (several of each, maybe), so these
figures are not counted in memory: each scrape asks the database, in a handful of queries.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from statistics import median

from django.db.models import Count, F, Min
from django.http import HttpRequest, HttpResponse
from django.utils import timezone
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from prometheus_client.utils import floatToGoString

from accounts.diskusage.models import DiskUsage
from tasks.api.cluster import worker_totals
from tasks.attempts import Attempt
from tasks.choices import QUEUE_STATES, FailureKind, TaskState
from tasks.models import ClusterState, Task
from tasks.queue.group_use import group_use
from tasks.queue.shares import shares
from tasks.usage.report import WAIT_BUCKETS_S, first_waits

RECENT_DISPATCHES = 200
# A label per task: the soonest only, so that a long queue does not blow up the series count.
ESTIMATES_SHOWN = 50


class ArgusCollector:
    def collect(self) -> Iterator[Metric]:
        by_state = dict(Task.objects.values_list("state").annotate(n=Count("id")).order_by())
        tasks = GaugeMetricFamily("argus_tasks", "Tasks by state.", labels=["state"])
        for task_state in TaskState.values:
            tasks.add_metric([task_state], by_state.get(task_state, 0))
        yield tasks

        yield GaugeMetricFamily(
            "argus_queue_length", "Tasks waiting (QUEUED or PENDING_RESOURCES).", value=_waiting(by_state)
        )
        oldest = Task.objects.filter(state__in=QUEUE_STATES).aggregate(t=Min("queued_at"))["t"]
        age = (timezone.now() - oldest).total_seconds() if oldest else 0.0
        yield GaugeMetricFamily("argus_queue_oldest_wait_seconds", "Age of the oldest waiting task.", value=age)

        kinds = dict(
            Attempt.objects.exclude(failure_kind="").values_list("failure_kind").annotate(n=Count("id")).order_by()
        )
        failures = GaugeMetricFamily("argus_attempt_failures", "Failed attempts by kind.", labels=["kind"])
        for kind in FailureKind.values:
            failures.add_metric([kind], kinds.get(kind, 0))
        yield failures

        latencies = [
            delta.total_seconds()
            for delta in Attempt.objects.filter(attempt_no=1, submitted_at__isnull=False)
            .annotate(wait=F("submitted_at") - F("task__queued_at"))
            .order_by("-submitted_at")
            .values_list("wait", flat=True)[:RECENT_DISPATCHES]
            if delta is not None
        ]
        yield GaugeMetricFamily(
            "argus_dispatch_latency_seconds",
            f"Median time from submission to Ray over the last {RECENT_DISPATCHES} tasks that got a "
            "first attempt (includes waiting for GPUs).",
            value=median(latencies) if latencies else 0.0,
        )

        state = ClusterState.objects.filter(name="default").first()
        workers = worker_totals(state)
        yield GaugeMetricFamily(
            "argus_ray_reachable",
            "1 when the scheduler reached Ray at its last tick.",
            value=int(bool(state and state.reachable)),
        )
        yield GaugeMetricFamily(
            "argus_tick_duration_seconds",
            "How long the last scheduler tick took.",
            value=state.tick_seconds if state else 0.0,
        )
        last = (timezone.now() - state.checked_at).total_seconds() if state and state.checked_at else float("nan")
        yield GaugeMetricFamily("argus_tick_age_seconds", "Time since the scheduler last looked at Ray.", value=last)
        yield GaugeMetricFamily("argus_gpus_total", "GPUs on live worker nodes.", value=workers["gpus_total"])
        yield GaugeMetricFamily(
            "argus_gpus_free",
            "Free GPUs on live worker nodes, as admission counts them (less what Argus promised).",
            value=workers["gpus_free"],
        )
        yield GaugeMetricFamily("argus_worker_nodes", "Live worker nodes.", value=workers["workers"])
        yield from _sharing(kinds)
        yield from _groups(workers["gpus_total"])
        yield _first_waits()
        yield _disk_used()


def _sharing(failures: Mapping[str, int]) -> Iterator[Metric]:
    """Preemptions, estimated starts and fair share (issue 11); ``failures``: the attempts by
    failure kind, as argus_attempt_failures counts them."""
    # Counted on the attempts that were stopped (their failure kind, set once at their end), not on
    # the ones chosen: a choice is withdrawn when the task it served would not start, and a
    # counter must never go down.
    preemptions = CounterMetricFamily(
        "argus_preemptions",
        "Running tasks stopped to make room for another, by reason (preempted: for a task of higher "
        "priority, their attempts PREEMPTED; reclaimed: borrowed quota taken back by its group, their "
        "attempts RECLAIMED).",
        labels=["reason"],
    )
    preemptions.add_metric(["preempted"], failures.get(FailureKind.PREEMPTED, 0))
    preemptions.add_metric(["reclaimed"], failures.get(FailureKind.RECLAIMED, 0))
    yield preemptions
    starts = GaugeMetricFamily(
        "argus_task_estimated_start_timestamp_seconds",
        f"When the scheduler's plan starts a waiting task (the {ESTIMATES_SHOWN} soonest), by the task's "
        "database id: /metrics needs no login, and task ids carry their owner's name.",
        labels=["task"],
    )
    planned = (
        Task.objects.filter(state__in=QUEUE_STATES, estimated_start_at__isnull=False)
        .order_by("estimated_start_at", "id")
        .values_list("pk", "estimated_start_at")[:ESTIMATES_SHOWN]
    )
    for pk, at in planned:
        if at is not None:  # filtered out above; mypy cannot know
            starts.add_metric([str(pk)], at.timestamp())
    yield starts

    # The users the queue's order weighs (those waiting, and everyone with usage), as in_order
    # does: the factors depend on who is counted.
    waiting = dict(Task.objects.filter(state__in=QUEUE_STATES).values_list("user_id", "user__username").distinct())
    by_user = shares(timezone.now(), waiting).values()
    factor = GaugeMetricFamily(
        "argus_user_fair_share", "Each user's fair-share factor: 1 has used nothing, near 0 heavy.", labels=["user"]
    )
    usage = GaugeMetricFamily(
        "argus_user_usage_gpu_hours",
        "Each user's GPU-hours, decayed with ARGUS_FAIR_SHARE_HALF_LIFE_S.",
        labels=["user"],
    )
    for share in sorted(by_user, key=lambda share: share.user):
        factor.add_metric([share.user], share.factor)
        usage.add_metric([share.user], share.gpu_hours)
    yield factor
    yield usage


def _groups(total_gpus: float) -> Iterator[Metric]:
    """Each group's quota and the GPUs its live attempts hold, borrowed ones apart
    (tasks.queue.group_use: the group "" of users without one while it holds GPUs)."""
    nominal = GaugeMetricFamily("argus_group_nominal_gpus", "Each group's own share of GPUs.", labels=["group"])
    using = GaugeMetricFamily(
        "argus_group_gpus_in_use",
        "GPUs the live attempts admitted in the group's quota hold on Ray, borrowed ones included.",
        labels=["group"],
    )
    lent = GaugeMetricFamily(
        "argus_group_gpus_borrowed", "GPUs the group's tasks hold of other groups' idle quota.", labels=["group"]
    )
    for use in group_use(total_gpus):
        nominal.add_metric([use.group], use.nominal_gpus)
        using.add_metric([use.group], use.gpus_in_use)
        lent.add_metric([use.group], use.gpus_borrowed)
    yield nominal
    yield using
    yield lent


def _disk_used() -> Metric:
    """Each measured user's bytes on the shared storage at their last scan (accounts.diskusage)."""
    family = GaugeMetricFamily(
        "argus_disk_used_bytes",
        "Bytes of each user's files on the shared storage (home, jobs included) at the last scan.",
        labels=["user"],
    )
    for username, used in DiskUsage.objects.values_list("user__username", "used_bytes").order_by("user__username"):
        family.add_metric([username], used)
    return family


def _waiting(by_state: dict[str, int]) -> int:
    return sum(by_state.get(state, 0) for state in QUEUE_STATES)


def metrics_view(request: HttpRequest) -> HttpResponse:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(ArgusCollector())
    return HttpResponse(generate_latest(registry), content_type=CONTENT_TYPE_LATEST)


def _first_waits() -> Metric:
    """The wait before each task's first start, by group (group="": users in no group), read
    from the usage ledger (tasks.usage.report.first_waits): one query."""
    family = HistogramMetricFamily(
        "argus_task_first_wait_seconds",
        "The wait before a task's first start (from its entry into the queue), by the group of its owner.",
        labels=["group"],
    )
    for group, waits in first_waits().items():
        buckets = [(floatToGoString(bound), float(n)) for bound, n in zip(WAIT_BUCKETS_S, waits.within, strict=True)]
        family.add_metric([group or ""], [*buckets, ("+Inf", float(waits.count))], waits.sum_s)
    return family
