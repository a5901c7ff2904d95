"""The pipeline API: submit a document, list, detail, cancel, retry (tasks.pipelines.actions and
.retry do the work)."""

from __future__ import annotations

from typing import Any

from django.db.models import Prefetch, QuerySet
from drf_spectacular.utils import OpenApiExample, extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from accounts.users import request_user
from common.api import Conflict, ServiceUnavailable, actor_of, error_responses
from common.parsers import JSONParser
from tasks.api.refusals import submission_refusals
from tasks.api.spec_parsers import PlainTextParser, TextYamlParser, YamlTextParser, document_bodies
from tasks.api.views import spec_source
from tasks.pipelines.actions import cancel_pipeline, submit_pipeline
from tasks.pipelines.api.serializers import (
    PIPELINE_JSON,
    PipelineDetailSerializer,
    PipelineDocumentSerializer,
    PipelineSerializer,
)
from tasks.pipelines.models import Pipeline, PipelineStep
from tasks.pipelines.retry import CheckpointUnavailable, PipelineConflict, retry_pipeline

EXAMPLE = {
    "name": "qwen-sft-grpo",
    "steps": [
        {
            "name": "sft",
            "workload": "sft",
            "nnodes": 1,
            "n_gpus_per_node": 4,
            "model_id": "Qwen/Qwen2.5-0.5B-Instruct",
            "train_file": "$HOME/common/datasets/gsm8k/train.parquet",
            "val_file": "$HOME/common/datasets/gsm8k/test.parquet",
        },
        {"name": "sft-export", "workload": "export", "checkpoint": "${steps.sft.checkpoint}"},
        {
            "name": "grpo",
            "workload": "grpo",
            "nnodes": 1,
            "n_gpus_per_node": 4,
            "model_id": "${steps.sft-export.hf_model}",
            "train_file": "$HOME/common/datasets/gsm8k/train.parquet",
            "val_file": "$HOME/common/datasets/gsm8k/test.parquet",
        },
    ],
}


class PipelineViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet[Pipeline]):
    lookup_field = "pipeline_id"
    lookup_value_regex = "[^/]+"
    parser_classes = [YamlTextParser, TextYamlParser, PlainTextParser, JSONParser]
    filterset_class = None

    def get_queryset(self) -> QuerySet[Pipeline]:
        if getattr(self, "swagger_fake_view", False):  # schema generation has no user
            return Pipeline.objects.none()
        # Each step's task with its pending reason (a row of its own: tasks.queue.reasons).
        steps = PipelineStep.objects.select_related("task__pending").order_by("position")
        return (
            Pipeline.objects.visible_to(request_user(self.request))
            .select_related("user")
            .prefetch_related(Prefetch("steps", queryset=steps))
        )

    def get_serializer_class(self) -> type[PipelineSerializer]:
        return PipelineSerializer if self.action == "list" else PipelineDetailSerializer

    def _detail(self, pipeline: Pipeline, code: int = status.HTTP_200_OK) -> Response:
        fresh = self.get_queryset().get(pk=pipeline.pk)
        return Response(PipelineDetailSerializer(fresh).data, status=code)

    @extend_schema(
        summary="Submit a pipeline",
        description="A pipeline document as YAML (application/yaml, text/yaml, text/plain) or JSON (the "
        'document itself, or `{"spec": "<yaml>"}`). The whole document is checked before anything is '
        "created; a 400 names each step and field at fault (a cycle, an unknown or duplicate step, a "
        "macro naming a step it does not run after, a step's own spec errors). Every step's task is "
        "created at once: those that wait for none QUEUED, the others WAITING; each counts toward "
        "max_queued_tasks (429).",
        request=document_bodies(PipelineDocumentSerializer, PIPELINE_JSON),
        responses={201: PipelineSerializer, **error_responses(400, 403, 413, 415, 429)},
        examples=[OpenApiExample("SFT, export, GRPO", media_type="application/yaml", value=EXAMPLE)],
    )
    def create(self, request: Request) -> Response:
        with submission_refusals():
            pipeline = submit_pipeline(request_user(request), spec_source(request.data), actor=actor_of(request))
        fresh = self.get_queryset().get(pk=pipeline.pk)
        return Response(
            PipelineSerializer(fresh).data,
            status=status.HTTP_201_CREATED,
            headers={"Location": f"/api/v2/pipelines/{pipeline.pipeline_id}"},
        )

    @extend_schema(summary="List pipelines (yours; an admin sees everyone's), newest first")
    def list(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return super().list(request, *args, **kwargs)

    @extend_schema(
        summary="A pipeline with its steps: state, task id, reason, times",
        responses={200: PipelineDetailSerializer, **error_responses(404)},
    )
    def retrieve(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return super().retrieve(request, *args, **kwargs)

    @extend_schema(
        summary="Cancel a pipeline",
        description="Every unfinished step is canceled: a waiting one at once, one on Ray once Ray stops it. "
        "200 when the pipeline has ended now, 202 when steps on Ray are still stopping; 409 when it had "
        "ended already.",
        request=None,
        responses={200: PipelineDetailSerializer, 202: PipelineDetailSerializer, **error_responses(404, 409)},
    )
    @action(detail=True, methods=["post"])
    def cancel(self, request: Request, pipeline_id: str) -> Response:
        pipeline = self.get_object()
        if pipeline.is_finished:
            raise Conflict(f"Pipeline {pipeline.pipeline_id} is already {pipeline.state}.")
        cancel_pipeline(pipeline, actor=actor_of(request))
        pipeline.refresh_from_db()
        return self._detail(pipeline, status.HTTP_200_OK if pipeline.is_finished else status.HTTP_202_ACCEPTED)

    @extend_schema(
        summary="Retry a pipeline that ended",
        description="New tasks for the steps that did not succeed and every step after them; the steps "
        "that succeeded are reused, their outputs handed on as before. A step that failed after a checkpoint "
        "resumes from it (its new task's PIPELINE_RETRY event says from which step). The new tasks pass every "
        "check a submission does, as things stand now, or nothing is created: 400 naming each step and field at "
        "fault (a file or secret gone, ARGUS_MAX_TASK_GPUS), 403 priority_not_allowed (`priority: high` no "
        "longer granted), 429 quota_exceeded (they count toward max_queued_tasks). 409 while it runs (also for "
        "a second retry at once), or when every step succeeded; 503 when a checkpoint could not be carried.",
        request=None,
        responses={200: PipelineDetailSerializer, **error_responses(400, 403, 404, 409, 429, 503)},
    )
    @action(detail=True, methods=["post"])
    def retry(self, request: Request, pipeline_id: str) -> Response:
        pipeline = self.get_object()
        try:
            with submission_refusals():
                retry_pipeline(pipeline, actor=actor_of(request))
        except PipelineConflict as error:
            raise Conflict(str(error)) from error
        except CheckpointUnavailable as error:
            raise ServiceUnavailable(str(error)) from error
        return self._detail(pipeline)
