"""The task API: submit, list, detail, spec, events, cancel, checkpoints."""

from __future__ import annotations

from typing import Any

from django.db.models import Prefetch, QuerySet
from django.http import HttpResponse, StreamingHttpResponse
from django.http.response import HttpResponseBase
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, extend_schema
from rest_framework import exceptions, mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.permissions import IsAdminUser
from rest_framework.request import Request
from rest_framework.response import Response

from accounts.users import request_user
from common.api import (
    Conflict,
    ServiceUnavailable,
    actor_of,
    error_responses,
    parse_query,
)
from common.parsers import JSONParser
from tasks.api.checkpoints import CheckpointsSerializer, DeletedSerializer, listing_body
from tasks.api.filters import TaskFilter
from tasks.api.refusals import submission_refusals
from tasks.api.serializers import (
    SPEC_JSON,
    EventSerializer,
    LogQuery,
    MetricsQuery,
    MetricsSerializer,
    SpecDocument,
    TaskDetailSerializer,
    TaskSerializer,
    TaskSpecSerializer,
)
from tasks.api.spec_parsers import PlainTextParser, TextYamlParser, YamlTextParser, document_bodies
from tasks.attempts import Attempt
from tasks.checkpoints.deletion import CheckpointNeeded, NoSuchCheckpoint, delete_step
from tasks.checkpoints.listing import listing
from tasks.choices import TERMINAL_STATES
from tasks.jobfiles import attempt_log, resolved_spec, task_curves
from tasks.logs.logfile import follow, read_from, tail_start
from tasks.logs.task_redaction import metric_names, served
from tasks.models import REQUEUED_FROM, IllegalTransition, StaleState, Task
from tasks.submit import submit_spec

TEXT = "text/plain; charset=utf-8"
ERRORS = error_responses(400, 404)


def spec_source(data: object) -> bytes | str | dict[str, Any]:
    """What the client sent: YAML bytes, ``{"spec": "<yaml>"}``, or the spec as a JSON object."""
    if isinstance(data, bytes):
        return data
    if isinstance(data, dict):
        if set(data) == {"spec"} and isinstance(data["spec"], str):
            return data["spec"]
        return data
    raise exceptions.ValidationError({"spec": ["Send the spec as YAML text or as a JSON object."]})


def _just_made(task: Task) -> None:
    """A task submitted now has no attempt and no pending reason yet: said on this copy, which
    only the answer reads, its serializer asks the database for neither (two of a submission's
    ten statements)."""
    Task._meta.get_field("pending").set_cached_value(task, None)
    attempts = task.attempts.none()
    attempts._result_cache = []  # read, and empty: as a prefetch leaves it
    task._prefetched_objects_cache = {"attempts": attempts}  # type: ignore[attr-defined]  # Django's
    task.quota = None  # type: ignore[attr-defined]  # Task.objects.with_quota's: it never ran


class TaskViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet[Task]):
    lookup_field = "task_id"
    lookup_value_regex = "[^/]+"
    filterset_class = TaskFilter
    parser_classes = [YamlTextParser, TextYamlParser, PlainTextParser, JSONParser]

    def get_queryset(self) -> QuerySet[Task]:
        if getattr(self, "swagger_fake_view", False):  # schema generation has no user
            return Task.objects.none()
        queryset = (
            Task.objects.visible_to(request_user(self.request))
            .with_quota()
            .select_related("user", "pipeline", "sweep", "pending")
        )
        if self.action == "retrieve":
            queryset = queryset.prefetch_related(Prefetch("attempts", Attempt.objects.select_related("group")))
        return queryset

    def get_serializer_class(self) -> type[TaskSerializer]:
        return TaskDetailSerializer if self.action in ("retrieve", "create", "cancel") else TaskSerializer

    @extend_schema(
        summary="Submit a task",
        description="The spec as a YAML document (application/yaml, text/yaml: a mapping), as YAML text "
        '(text/plain), or as JSON: `{"spec": "<yaml>"}` or the mapping itself. What types cannot say '
        "(files that exist and may be read, an advanced command's checks) is a 400 naming each field. "
        "`priority: high` from a user not granted it (can_use_high_priority; admins always may) is a 403 "
        "(`priority_not_allowed`). A user who already has their max_queued_tasks tasks waiting gets a 429 "
        "(`quota_exceeded`); one at or over a disk quota, theirs or their group's, a 429 "
        "(`disk_quota_exceeded`, naming the usage and the quota).",
        request=document_bodies(SpecDocument, SPEC_JSON),
        responses={201: TaskDetailSerializer, **error_responses(400, 403, 413, 415, 429)},
        examples=[
            OpenApiExample(
                "PPO",
                media_type="application/yaml",
                value={
                    "workload": "ppo",
                    "nnodes": 1,
                    "n_gpus_per_node": 4,
                    "model_id": "Qwen/Qwen2.5-0.5B-Instruct",
                    "train_file": "$HOME/common/datasets/gsm8k/train.parquet",
                    "val_file": "$HOME/common/datasets/gsm8k/test.parquet",
                },
            )
        ],
    )
    def create(self, request: Request) -> Response:
        with submission_refusals():
            task = submit_spec(request_user(request), spec_source(request.data), actor=actor_of(request))
        _just_made(task)
        body = TaskDetailSerializer(task, context=self.get_serializer_context()).data
        location = f"/api/v2/tasks/{task.task_id}"
        return Response(body, status=status.HTTP_201_CREATED, headers={"Location": location})

    @extend_schema(
        summary="List tasks (yours; an admin sees everyone's), newest first",
        # A username never holds NUL, and Django's form field refuses it (400): the schema says so.
        parameters=[OpenApiParameter("user", str, description="Only this user's tasks.", pattern=r"^[^\x00]*$")],
    )
    def list(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return super().list(request, *args, **kwargs)

    @extend_schema(summary="A task with its attempts", responses={200: TaskDetailSerializer, **ERRORS})
    def retrieve(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return super().retrieve(request, *args, **kwargs)

    @extend_schema(summary="The spec as sent and as resolved", responses={200: TaskSpecSerializer, **ERRORS})
    @action(detail=True, methods=["get"])
    def spec(self, request: Request, task_id: str) -> Response:
        task = self.get_object()
        return Response({"raw": task.spec_raw, "resolved": resolved_spec(task)})

    @extend_schema(
        summary="The task's event trail, oldest first", responses={200: EventSerializer(many=True), **ERRORS}
    )
    @action(detail=True, methods=["get"], filterset_class=None, pagination_class=None)
    def events(self, request: Request, task_id: str) -> Response:
        task = self.get_object()
        events = task.events.select_related("attempt").order_by("created_at", "id")
        return Response(EventSerializer(events, many=True).data)

    @extend_schema(
        summary="Cancel a task",
        description="A waiting task is CANCELED at once (200); a task on Ray gets a stop request and "
        "becomes CANCELED when Ray reports it stopped (202). A finished task answers 409.",
        request=None,
        responses={200: TaskDetailSerializer, 202: TaskDetailSerializer, **error_responses(403, 404, 409)},
    )
    @action(detail=True, methods=["post"])
    def cancel(self, request: Request, task_id: str) -> Response:
        task = self.get_object()
        try:
            done = task.cancel(actor=actor_of(request))
        except (IllegalTransition, StaleState) as error:
            task.refresh_from_db()
            if task.is_terminal:
                raise Conflict(f"Task {task.task_id} is already {task.state}.") from error
            raise Conflict(f"Task {task.task_id} changed state; try again.") from error
        code = status.HTTP_200_OK if done else status.HTTP_202_ACCEPTED
        return Response(TaskDetailSerializer(task).data, status=code)

    @extend_schema(
        operation_id="tasks_checkpoints",
        summary="The task's checkpoints with their sizes",
        description="Its global_step_N folders, oldest first, each with its size, whether it is the newest "
        "complete one and who needs it; and the spec's bound (keep_checkpoints, keep_best).",
        responses={200: CheckpointsSerializer, **ERRORS},
    )
    @action(detail=True, methods=["get"], filterset_class=None, pagination_class=None)
    def checkpoints(self, request: Request, task_id: str) -> Response:
        return Response(listing_body(listing(self.get_object())))

    @extend_schema(
        operation_id="tasks_checkpoints_delete",
        summary="Delete a finished task's checkpoint",
        description="A 409 names who needs it: the task itself until it ends, a task or a waiting pipeline "
        "step that names it. The deletion is an event (CHECKPOINT_DELETED) with the bytes freed.",
        request=None,
        responses={200: DeletedSerializer, **error_responses(404, 409, 503)},
    )
    @action(detail=True, methods=["delete"], url_path=r"checkpoints/(?P<step>[0-9]{1,12})")
    def delete_checkpoint(self, request: Request, task_id: str, step: str) -> Response:
        task = self.get_object()
        try:
            freed = delete_step(task, int(step), actor_of(request))
        except NoSuchCheckpoint as error:
            raise exceptions.NotFound(str(error)) from error
        except CheckpointNeeded as error:
            raise Conflict(str(error)) from error
        except OSError as error:  # shared storage refused (permission) or too slow
            raise ServiceUnavailable(
                f"Checkpoint {step} of {task.task_id} could not be deleted now: {error}"
            ) from error
        return Response({"step": int(step), "bytes": freed})

    def _attempt(self, task: Task, number: int | None) -> Attempt | None:
        attempts = task.attempts.order_by("-attempt_no")
        if number is None:
            return attempts.first()
        attempt = attempts.filter(attempt_no=number).first()
        if attempt is None:
            raise exceptions.NotFound(f"Task {task.task_id} has no attempt {number}.")
        return attempt

    @extend_schema(
        summary="The driver log of an attempt (text/plain)",
        description="From driver.log on shared storage, so it works after Ray forgot the job. "
        "`tail=N` gives the last N lines; `follow=1` streams new lines until the attempt ends. The values of "
        "the secrets the task uses, and credential shapes (hf_…, sk-…, a W&B key after WANDB_API_KEY), read "
        "[redacted]. A line over 1 MiB is cut where no value runs across, marked "
        "`[argus: line cut, N bytes not shown]`.",
        parameters=[LogQuery],
        responses={(200, "text/plain"): OpenApiTypes.STR, **ERRORS},
    )
    @action(detail=True, methods=["get"], filterset_class=None)
    def logs(self, request: Request, task_id: str) -> HttpResponseBase:
        query = parse_query(LogQuery, request)
        task = self.get_object()
        attempt = self._attempt(task, query.get("attempt"))
        if attempt is None:
            return HttpResponse(b"", content_type=TEXT)
        path = attempt_log(task, attempt)
        tail = query.get("tail")
        # Every mode read from a line's start and redacted a whole line at a time (tasks.logs.task_redaction
        # .served), whatever the driver wrote (it redacts too).
        redactor = task.redactor()
        if not query["follow"]:
            if tail is None:
                return StreamingHttpResponse(served(redactor, read_from(path)), content_type=TEXT)
            lines = served(redactor, read_from(path, tail_start(path, tail))) if tail else ()
            return HttpResponse(b"".join(lines), content_type=TEXT)
        start = tail_start(path, tail if tail is not None else 100)

        def ended() -> bool:
            return Attempt.objects.filter(pk=attempt.pk).exclude(end_time=None).exists() or (
                Task.objects.filter(pk=task.pk, state__in=TERMINAL_STATES).exists()
            )

        response = StreamingHttpResponse(served(redactor, follow(path, start=start, finished=ended)), content_type=TEXT)
        response["X-Accel-Buffering"] = "no"  # nginx: pass lines through as they come
        response["Cache-Control"] = "no-cache"
        return response

    @extend_schema(
        summary="Training curves of the task, across its attempts, or of one attempt",
        description="Read from each attempt's verl file logger (`metrics.jsonl`, which Argus has verl "
        "write), or, where there is none, from verl's `step:N - key:value` console lines in its driver "
        "log. By default the curves run across all attempts (`attempt` is null): a step trained by "
        "several attempts counts once, the latest attempt's values win, and `attempts` says where each "
        "attempt ran and the checkpoint step it resumed from. `attempt=N` gives that attempt's own curves.",
        parameters=[MetricsQuery],
        responses={200: MetricsSerializer, **ERRORS},
    )
    @action(detail=True, methods=["get"], filterset_class=None)
    def metrics(self, request: Request, task_id: str) -> Response:
        query = parse_query(MetricsQuery, request)
        task = self.get_object()
        number = query.get("attempt")
        chosen = self._attempt(task, number) if number is not None else None
        attempts = [chosen] if chosen else list(task.attempts.order_by("attempt_no"))
        merged = task_curves(task, attempts)
        merged.curves.series = metric_names(task.redactor(), merged.curves.series)  # read from the log, served
        body = {"attempt": number, **merged.to_json()}
        body["total_steps"] = task.total_steps(merged.curves.total_steps)
        return Response(body)

    @extend_schema(
        summary="Requeue a failed or canceled task (admins)",
        request=None,
        responses={200: TaskDetailSerializer, **error_responses(403, 404, 409)},
    )
    @action(detail=True, methods=["post"], permission_classes=[IsAdminUser])
    def requeue(self, request: Request, task_id: str) -> Response:
        task = self.get_object()
        try:
            task.requeue(actor=actor_of(request))
        except (IllegalTransition, StaleState) as error:
            allowed = " or ".join(REQUEUED_FROM)
            raise Conflict(f"Task {task.task_id} is {task.state}; only {allowed} can be requeued.") from error
        return Response(TaskDetailSerializer(task).data)
