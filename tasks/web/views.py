"""The task pages: the list, the new-task form, a task (with cancel), the queue and the cluster.

Live parts: htmx polls the page's own URL and gets back only the part that changes (the
``_*_live.html`` templates; static/js/live.js skips a swap that would change nothing). The log
and the curves are read from the task API by static/js/task.js. Nothing here waits on Ray: the
queue and the cluster are what the scheduler last recorded (tasks.api.cluster).
"""

from __future__ import annotations

import shlex
from datetime import timedelta
from typing import TypedDict

import yaml
from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.db.models import Count
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.template.defaultfilters import filesizeformat
from django.utils import timezone
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_POST

from accounts.homes import home_dir, shared_root
from accounts.users import request_user
from common.durations import format_seconds
from common.pages import page_or_part, web_actor
from tasks.api.cluster import ClusterSummary, cluster_summary
from tasks.api.filters import TaskFilter
from tasks.attempts import Attempt
from tasks.checkpoints.deletion import CheckpointNeeded, NoSuchCheckpoint, delete_step
from tasks.checkpoints.listing import listing
from tasks.choices import ACTIVE_STATES, BEFORE_RAY_STATES, QUEUE_STATES, TRAINING_WORKLOADS, TaskKind, TaskState
from tasks.jobfiles import resolved_spec
from tasks.models import ClusterState, IllegalTransition, StaleState, Task
from tasks.pipelines.actions import submit_pipeline
from tasks.pipelines.document import is_pipeline_document
from tasks.pipelines.models import Pipeline
from tasks.queue.group_use import group_use, visible_group_use
from tasks.queue.read import current_queue, queue_entries, share_rows, waiting_reason
from tasks.specs.errors import SpecError
from tasks.specs.keys import SPEC_KEYS
from tasks.submit import PriorityNotAllowed, QuotaError, submit_spec
from tasks.sweeps.actions import submit_sweep
from tasks.sweeps.document import is_sweep_document
from tasks.sweeps.models import Sweep

TASKS_PER_PAGE = 25
QUEUE_PER_PAGE = 50
EVENTS_SHOWN = 100
# Idle, the scheduler still looks at Ray once a minute (its safety-net schedule): a last look
# older than this means it is not running at all.
SCHEDULER_SILENT_AFTER = timedelta(minutes=3)
# Under this many seconds left, the time left stands out: time to look at the checkpoints.
TIME_LEFT_LOW = 15 * 60
# The buttons of the new-task form, each filling templates/tasks/specs/<key>.yaml.
SPEC_TEMPLATES = [("ppo", "PPO"), ("grpo", "GRPO"), ("sft", "SFT"), ("advanced", "Advanced")]
# The pipeline documents it offers too (a document with steps: is submitted as a pipeline).
PIPELINE_TEMPLATES = [("pipeline", "SFT → export → GRPO → export")]
# And the sweep documents (a document with base:, grid: or random: is submitted as a sweep).
SWEEP_TEMPLATES = [("sweep", "GRPO: learning rate × batch size")]


class RayOnPage(ClusterSummary):
    silent: bool  # the scheduler's last look is too old to trust


def _ray(request: HttpRequest) -> RayOnPage:
    """What the pages say about Ray: the cluster API's summary (the dashboard's address and
    Ray's errors for admins only), and whether the scheduler's last look is too old to trust
    (it is not running)."""
    summary = cluster_summary(admin=request.user.is_staff)
    checked = summary["checked_at"]
    return {**summary, "silent": checked is None or timezone.now() - checked > SCHEDULER_SILENT_AFTER}


def _own_task(request: HttpRequest, task_id: str) -> Task:
    """The task, when the user may see it; another user's task is a 404, as in the API."""
    queryset = Task.objects.visible_to(request_user(request)).select_related("user", "pipeline", "sweep")
    return get_object_or_404(queryset, task_id=task_id)


@never_cache
@login_required
def task_list_view(request: HttpRequest) -> HttpResponse:
    visible = Task.objects.visible_to(request_user(request)).select_related("user", "pending")  # the reasons joined in
    tasks = TaskFilter(request.GET, queryset=visible).qs
    page = Paginator(tasks, TASKS_PER_PAGE).get_page(request.GET.get("page"))
    for task in page:
        task.reason = waiting_reason(task) if task.state in (*BEFORE_RAY_STATES, *ACTIVE_STATES) else ""
    counts = dict(visible.order_by().values_list("state").annotate(n=Count("id")))
    context = {
        "page": page,
        "selected": request.GET.getlist("state"),
        # Only the states there are tasks in, in the state machine's order.
        "state_counts": [(state, counts[state]) for state in TaskState.values if state in counts],
        "total": sum(counts.values()),
        "show_user": request.user.is_staff,
        "ray": _ray(request),
    }
    return page_or_part(request, "tasks/list.html", "tasks/_list_live.html", context)


@login_required
def task_new_view(request: HttpRequest) -> HttpResponse:
    """A task spec, a pipeline document (a mapping with steps:) or a sweep document (with base:,
    grid: or random:), submitted as such."""
    # What the text is, and what a refusal names: "task", "pipeline" or "sweep".
    text, errors, refusal, status, what = "", {}, "", 200, "task"
    if request.method == "POST":
        # Browsers send a textarea's line breaks as CRLF; an advanced command must not hold a \r.
        text = request.POST.get("spec", "").replace("\r\n", "\n")
        what = "pipeline" if is_pipeline_document(text) else "sweep" if is_sweep_document(text) else "task"
        try:
            if what == "pipeline":
                pipeline = submit_pipeline(request_user(request), text, actor=web_actor(request))
            elif what == "sweep":
                sweep = submit_sweep(request_user(request), text, actor=web_actor(request))
            else:
                task = submit_spec(request_user(request), text, actor=web_actor(request))
        except SpecError as error:
            errors = error.fields
            status = 413 if error.code == "too_large" else 400
        except QuotaError as error:
            # The spec is fine: it stays in the form, to submit once a task of theirs has started.
            refusal, status = str(error), 429
        except PriorityNotAllowed as error:
            # The spec stays in the form too: with priority: normal it can go as it is.
            refusal, status = str(error), 403
        else:
            if what == "pipeline":
                return _pipeline_submitted(request, pipeline)
            if what == "sweep":
                return _sweep_submitted(request, sweep)
            messages.success(request, f"Task {task.task_id} is queued.")
            for warning in task.warnings:
                messages.warning(request, warning)
            return redirect("web:task-detail", task_id=task.task_id)
    elif "from" in request.GET:
        # "Copy to a new task" on a task's page: its spec as it was sent, to edit and submit.
        source = Task.objects.visible_to(request_user(request)).filter(task_id=request.GET["from"]).first()
        text = source.spec_raw if source else ""
    elif "from_pipeline" in request.GET:
        # "Copy to a new pipeline" on a pipeline's page: its document as it was sent.
        visible = Pipeline.objects.visible_to(request_user(request))
        found = visible.filter(pipeline_id=request.GET["from_pipeline"]).first()
        text = found.document if found else ""
    elif "from_sweep" in request.GET:
        # "Copy to a new sweep" on a sweep's page: its document as it was sent.
        sweep_found = Sweep.objects.visible_to(request_user(request)).filter(sweep_id=request.GET["from_sweep"]).first()
        text = sweep_found.document if sweep_found else ""
    root = shared_root()
    context = {
        "spec": text,
        "errors": errors,
        "refusal": refusal,
        # What was refused: "the task", "the pipeline" or "the sweep", in the form's error box.
        "what": what,
        "templates": SPEC_TEMPLATES,
        "pipeline_templates": PIPELINE_TEMPLATES,
        "sweep_templates": SWEEP_TEMPLATES,
        "spec_keys": SPEC_KEYS,
        "home": home_dir(request.user.username),
        "datasets": root / "datasets",
        "hf": root / "hf",
        "ray": _ray(request),
    }
    return render(request, "tasks/new.html", context, status=status)


def _pipeline_submitted(request: HttpRequest, pipeline: Pipeline) -> HttpResponse:
    steps = list(pipeline.steps.select_related("task").order_by("position"))
    first = [step.name for step in steps if step.task.state != TaskState.WAITING]
    messages.success(
        request,
        f"Pipeline {pipeline.pipeline_id} is submitted: {len(steps)} step{'s' if len(steps) != 1 else ''}; "
        f"queued now: {', '.join(first)}.",
    )
    for step in steps:
        for warning in step.task.warnings:
            messages.warning(request, f"{step.name}: {warning}")
    return redirect("web:pipeline-detail", pipeline_id=pipeline.pipeline_id)


def _sweep_submitted(request: HttpRequest, sweep: Sweep) -> HttpResponse:
    trials = list(sweep.trials.order_by("trial_index"))
    waiting = sum(1 for task in trials if task.state == TaskState.WAITING)
    messages.success(
        request,
        f"Sweep {sweep.sweep_id} is submitted: {len(trials)} trial{'s' if len(trials) != 1 else ''}, "
        f"{len(trials) - waiting} queued now, {waiting} waiting their turn.",
    )
    for task in trials:
        for warning in task.warnings:
            messages.warning(request, f"trial {task.trial_index}: {warning}")
    return redirect("web:sweep-detail", sweep_id=sweep.sweep_id)


def _shell_word(arg: str) -> str:
    """``arg`` quoted for a shell, readably: Hydra lists such as ``trainer.logger=['console']``
    in double quotes rather than shlex's ``'"'"'`` dance."""
    if "'" in arg and not any(char in arg for char in '"\\$`'):
        return f'"{arg}"'
    return shlex.quote(arg)


def _spec_as_run(task: Task) -> dict[str, str]:
    """The resolved spec as YAML, and the command Ray runs as one would type it."""
    resolved = resolved_spec(task)
    argv = resolved.pop("argv")
    if task.kind == TaskKind.ADVANCED:
        # Its command, shown once, as bash runs it (`env ARGUS_CHECKPOINT_DIR=… bash -c
        # <command>`): the checkpoint folder written in and verl's file logger added.
        resolved.pop("command")
        command = argv[-1]
    else:
        # `python3 -m <module>` on the first line, then one override a line.
        command = " \\\n    ".join([" ".join(argv[:3]), *map(_shell_word, argv[3:])])
    return {"command": command, "resolved": yaml.safe_dump(resolved, sort_keys=False, allow_unicode=True, width=120)}


class TimeLeft(TypedDict):
    words: str
    low: bool


def _time_left(task: Task, latest: Attempt | None) -> TimeLeft | None:
    """What the status says of the running attempt's time limit; None when nothing counts down."""
    left = task.time_left_s(latest, timezone.now())
    if left is None:
        return None
    # Minutes only: the status is polled every few seconds and should read the same until a
    # minute has passed (static/js/live.js then leaves it alone).
    words = "under a minute" if left < 60 else format_seconds(left - left % 60)
    return {"words": words, "low": left < TIME_LEFT_LOW}


@never_cache
@login_required
def task_detail_view(request: HttpRequest, task_id: str) -> HttpResponse:
    task = _own_task(request, task_id)
    attempts = list(task.attempts.select_related("group").order_by("attempt_no"))
    # Node names only when some attempt has been placed: one query, not one per attempt.
    ips = ClusterState.ips() if any(a.nodes or a.node_id for a in attempts) else {}
    events = list(task.events.select_related("attempt").order_by("-created_at", "-id")[:EVENTS_SHOWN])[::-1]
    context: dict[str, object] = {
        "task": task,
        "attempts": attempts,
        # (attempt, how it started) for the attempts table.
        "attempt_rows": [(attempt, attempt.resume_words, attempt.where(ips)) for attempt in attempts],
        "time_limit": format_seconds(task.time_limit_s) if task.time_limit_s else "",
        "time_left": _time_left(task, attempts[-1] if attempts else None),
        "events": events,
        "event_count": task.events.count() if len(events) == EVENTS_SHOWN else len(events),
        "waiting": task.state in QUEUE_STATES,
        "held": task.is_waiting_for_dependencies,
        "on_ray": task.state in ACTIVE_STATES,
    }
    if not request.headers.get("HX-Request"):
        # What it runs after (after / after_any, a pipeline's earlier steps), linked.
        dependencies = task.dependencies.select_related("depends_on").order_by("id")
        context.update(_spec_as_run(task), ray=_ray(request), dependencies=list(dependencies))
        if task.workload in TRAINING_WORKLOADS:
            context["checkpoints"] = listing(task)  # sizes read once per page, not at each poll
    return page_or_part(request, "tasks/detail.html", "tasks/_detail_live.html", context)


@login_required
@require_POST
def task_cancel_view(request: HttpRequest, task_id: str) -> HttpResponse:
    task = _own_task(request, task_id)
    try:
        canceled_now = task.cancel(actor=web_actor(request))
    except (IllegalTransition, StaleState):
        task.refresh_from_db()
        if task.is_terminal:
            finished = TaskState(task.state).label.lower()
            messages.info(request, f"Task {task.task_id} had already finished ({finished}): nothing to cancel.")
        else:
            messages.error(request, f"Task {task.task_id} changed state just then; look again and retry.")
    else:
        if canceled_now:
            messages.success(request, f"Task {task.task_id} is canceled.")
        else:
            messages.success(
                request, f"Stop requested: task {task.task_id} becomes Canceled once Ray reports its job stopped."
            )
    return redirect("web:task-detail", task_id=task.task_id)


@login_required
@require_POST
def task_checkpoint_delete_view(request: HttpRequest, task_id: str, step: int) -> HttpResponse:
    task = _own_task(request, task_id)
    try:
        freed = delete_step(task, step, web_actor(request))
    except (NoSuchCheckpoint, CheckpointNeeded) as error:
        messages.error(request, f"Checkpoint not deleted: {error}.")
    except OSError as error:
        messages.error(request, f"Checkpoint not deleted: shared storage failed ({error}).")
    else:
        messages.success(request, f"Deleted checkpoint global_step_{step} of {task.task_id} ({filesizeformat(freed)}).")
    return redirect("web:task-detail", task_id=task.task_id)


@never_cache
@login_required
def queue_view(request: HttpRequest) -> HttpResponse:
    queue = current_queue()
    page = Paginator(queue.tasks, QUEUE_PER_PAGE).get_page(request.GET.get("page"))
    ray = _ray(request)
    context = {
        "page": page,
        "rows": queue_entries(queue, page.object_list, request.user, offset=max(page.start_index() - 1, 0)),
        "waiting": len(queue.waiting),
        "on_ray": queue.on_ray,
        "shares": share_rows(queue, request.user),
        "fair_share": {
            "window": format_seconds(settings.ARGUS_FAIR_SHARE_WINDOW_S) if settings.ARGUS_FAIR_SHARE_WINDOW_S else "",
            "half_life": format_seconds(settings.ARGUS_FAIR_SHARE_HALF_LIFE_S),
        },
        "groups": visible_group_use(group_use(ray["gpus_total"]), request.user),
        "ray": ray,
    }
    return page_or_part(request, "tasks/queue.html", "tasks/_queue_live.html", context)


@never_cache
@login_required
def cluster_view(request: HttpRequest) -> HttpResponse:
    ray = _ray(request)
    # The head first, then the workers by address; the dead last.
    nodes = sorted(
        ray["nodes"], key=lambda node: (not node.get("alive"), not node.get("is_head"), node.get("ip") or "")
    )
    context = {"ray": ray, "nodes": nodes, "workers": ray["workers"]}
    return page_or_part(request, "tasks/cluster.html", "tasks/_cluster_live.html", context)
