"""The pipeline pages: the list, a pipeline (its steps drawn as a graph, cancel, retry).

A pipeline's page polls itself through htmx while it runs (static/js/live.js), as a task's does;
tasks.pipelines.actions and .retry do the work, graph.py the drawing. Submitting one is the new-task
form's (tasks.web.views.task_new_view): it takes a pipeline document as well as a task spec.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.db.models import Prefetch, QuerySet
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_POST

from accounts.users import request_user
from common.pages import page_or_part, state_filter, web_actor
from tasks.attempts import Attempt
from tasks.choices import PipelineState
from tasks.models import Task
from tasks.pipelines.actions import cancel_pipeline
from tasks.pipelines.models import Pipeline, PipelineStep
from tasks.pipelines.retry import CheckpointUnavailable, PipelineConflict, retry_pipeline
from tasks.pipelines.web.graph import layout
from tasks.specs.errors import SpecError
from tasks.submit import PriorityNotAllowed, QuotaError

PIPELINES_PER_PAGE = 25


def _steps() -> Prefetch[str, QuerySet[PipelineStep], str]:
    """A pipeline's steps in the document's order, each with its task now."""
    return Prefetch("steps", queryset=PipelineStep.objects.select_related("task").order_by("position"))


def _visible(request: HttpRequest) -> QuerySet[Pipeline]:
    return Pipeline.objects.visible_to(request_user(request)).select_related("user")


def _own_pipeline(request: HttpRequest, pipeline_id: str) -> Pipeline:
    """The pipeline, when the user may see it; another user's is a 404, as in the API."""
    return get_object_or_404(_visible(request), pipeline_id=pipeline_id)


@never_cache
@login_required
def pipeline_list_view(request: HttpRequest) -> HttpResponse:
    chips = state_filter(request, _visible(request), PipelineState.values)
    page = Paginator(chips.shown.prefetch_related(_steps()), PIPELINES_PER_PAGE).get_page(request.GET.get("page"))
    context = {"page": page, **chips.context(), "show_user": request.user.is_staff}
    return page_or_part(request, "tasks/pipeline_list.html", "tasks/_pipeline_list_live.html", context)


@dataclass(frozen=True)
class StepRow:
    """A step as its page shows it: its task now, and when that task first started on Ray."""

    step: PipelineStep
    started: datetime | None

    @property
    def name(self) -> str:
        return self.step.name

    @property
    def task(self) -> Task:
        return self.step.task

    @property
    def after(self) -> list[str]:
        return list(self.step.after)

    @property
    def after_any(self) -> list[str]:
        return list(self.step.after_any)

    @property
    def depends_on(self) -> tuple[str, ...]:
        return self.step.depends_on

    @property
    def reason(self) -> str:
        """Why it waits ("waits for alice-sft-…, RUNNING"), or how it ended."""
        return self.task.pending_reason or self.task.error_summary


def _step_rows(pipeline: Pipeline) -> list[StepRow]:
    attempts = Attempt.objects.order_by("attempt_no")
    steps = (
        pipeline.steps.select_related("task__pending")  # StepRow.reason
        .prefetch_related(Prefetch("task__attempts", queryset=attempts))
        .order_by("position")
    )
    rows = []
    for step in steps:
        starts = [attempt.start_time for attempt in step.task.attempts.all() if attempt.start_time]
        rows.append(StepRow(step=step, started=starts[0] if starts else None))
    return rows


@never_cache
@login_required
def pipeline_detail_view(request: HttpRequest, pipeline_id: str) -> HttpResponse:
    pipeline = _own_pipeline(request, pipeline_id)
    steps = _step_rows(pipeline)
    current = {row.task.pk for row in steps}
    context: dict[str, object] = {
        "pipeline": pipeline,
        "steps": steps,
        "drawing": layout(steps),
        "can_cancel": not pipeline.is_finished and any(step.task.can_cancel for step in steps),
        "can_retry": pipeline.can_retry,
        # The tasks a retry replaced, still the record of what those steps did before.
        "earlier": list(Task.objects.filter(pipeline=pipeline).exclude(pk__in=current).order_by("created_at", "id")),
    }
    return page_or_part(request, "tasks/pipeline_detail.html", "tasks/_pipeline_live.html", context)


@login_required
@require_POST
def pipeline_cancel_view(request: HttpRequest, pipeline_id: str) -> HttpResponse:
    pipeline = _own_pipeline(request, pipeline_id)
    if pipeline.is_finished:
        ended = pipeline.state.lower()
        messages.info(request, f"Pipeline {pipeline_id} had already ended ({ended}): nothing to cancel.")
        return redirect("web:pipeline-detail", pipeline_id=pipeline_id)
    cancel_pipeline(pipeline, actor=web_actor(request))
    pipeline.refresh_from_db()
    if pipeline.is_finished:
        messages.success(request, f"Pipeline {pipeline_id} is canceled.")
    else:
        messages.success(
            request,
            f"Pipeline {pipeline_id}: every unfinished step is canceled; those on Ray become Canceled once "
            "Ray reports their jobs stopped.",
        )
    return redirect("web:pipeline-detail", pipeline_id=pipeline_id)


@login_required
@require_POST
def pipeline_retry_view(request: HttpRequest, pipeline_id: str) -> HttpResponse:
    pipeline = _own_pipeline(request, pipeline_id)
    try:
        retried = retry_pipeline(pipeline, actor=web_actor(request))
    except PipelineConflict as error:
        messages.error(request, str(error))
    except SpecError as error:
        # A step's spec is checked again, as a submission's (its files must still be there).
        problems = "; ".join(f"{field}: {' '.join(words)}" for field, words in error.fields.items())
        messages.error(request, f"Pipeline {pipeline_id} was not retried: {problems}")
    except (PriorityNotAllowed, QuotaError, CheckpointUnavailable) as error:
        messages.error(request, f"Pipeline {pipeline_id} was not retried: {error}")
    else:
        reused = [name for name in pipeline.steps.values_list("name", flat=True) if name not in retried]
        kept = f"; {', '.join(reused)} succeeded and {'is' if len(reused) == 1 else 'are'} reused" if reused else ""
        messages.success(request, f"Pipeline {pipeline_id} runs again: new tasks for {', '.join(retried)}{kept}.")
    return redirect("web:pipeline-detail", pipeline_id=pipeline_id)
