"""The sweep API: submit a document, list, detail, cancel (tasks.sweeps.actions does the work;
tasks.sweeps.summary reads the trials, from the database alone)."""

from __future__ import annotations

from typing import Any

from django.db.models import Prefetch, QuerySet
from drf_spectacular.utils import OpenApiExample, extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from accounts.users import request_user
from common.api import Conflict, actor_of, error_responses
from common.parsers import JSONParser
from tasks.api.refusals import submission_refusals
from tasks.api.spec_parsers import PlainTextParser, TextYamlParser, YamlTextParser, document_bodies
from tasks.api.views import spec_source
from tasks.models import Task
from tasks.sweeps.actions import cancel_sweep, submit_sweep
from tasks.sweeps.api.serializers import SWEEP_JSON, SweepDocumentSerializer, SweepSerializer
from tasks.sweeps.models import Sweep
from tasks.sweeps.summary import summarize, with_curves

EXAMPLE = {
    "name": "lr-sweep",
    "base": {
        "workload": "grpo",
        "nnodes": 1,
        "n_gpus_per_node": 4,
        "model_id": "Qwen/Qwen2.5-0.5B-Instruct",
        "train_file": "$HOME/common/datasets/gsm8k/train.parquet",
        "val_file": "$HOME/common/datasets/gsm8k/test.parquet",
        "test_freq": 5,
    },
    "grid": {"actor_rollout_ref.actor.optim.lr": [1.0e-6, 3.0e-6, 1.0e-5], "data.train_batch_size": [256, 512]},
    "max_concurrent": 2,
    "early_stop": {"metric": "val-core/openai/gsm8k/acc/mean@1", "mode": "max", "min_steps": 10, "eta": 2},
}


class SweepViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet[Sweep]):
    lookup_field = "sweep_id"
    lookup_value_regex = "[^/]+"
    parser_classes = [YamlTextParser, TextYamlParser, PlainTextParser, JSONParser]
    filterset_class = None
    # For the schema: what every answer is, a sweep's summary (tasks.sweeps.summary), not the model.
    serializer_class = SweepSerializer  # type: ignore[assignment]

    def get_queryset(self) -> QuerySet[Sweep]:
        if getattr(self, "swagger_fake_view", False):  # schema generation has no user
            return Sweep.objects.none()
        # Every sweep's trials, curves and last steps in one query, whatever the page holds.
        trials = Prefetch("trials", queryset=with_curves(Task.objects.all()))
        return Sweep.objects.visible_to(request_user(self.request)).select_related("user").prefetch_related(trials)

    def _answer(self, sweep: Sweep, code: int = status.HTTP_200_OK, **headers: str) -> Response:
        fresh = self.get_queryset().get(pk=sweep.pk)
        return Response(SweepSerializer(summarize(fresh, fresh.trials.all())).data, status=code, headers=headers)

    @extend_schema(
        summary="Submit a sweep",
        description="A sweep document as YAML (application/yaml, text/yaml, text/plain) or JSON (the document "
        'itself, or `{"spec": "<yaml>"}`): a base task spec and a grid (every combination is a trial) or random '
        "samples of keys, a spec key or a Hydra override of verl's command each. The whole document and every "
        "trial's spec are checked before anything is created; a 400 names each field at fault (`grid.<key>`, "
        "`random.space.<key>`, `base.<key>`; a trial's own spec errors with its params). Every trial is a task: "
        "the first max_concurrent QUEUED, the others WAITING for a place; each counts toward max_queued_tasks (429).",
        request=document_bodies(SweepDocumentSerializer, SWEEP_JSON),
        responses={201: SweepSerializer, **error_responses(400, 403, 413, 415, 429)},
        examples=[OpenApiExample("Learning rate x batch size", media_type="application/yaml", value=EXAMPLE)],
    )
    def create(self, request: Request) -> Response:
        with submission_refusals():
            sweep = submit_sweep(request_user(request), spec_source(request.data), actor=actor_of(request))
        return self._answer(sweep, status.HTTP_201_CREATED, Location=f"/api/v2/sweeps/{sweep.sweep_id}")

    @extend_schema(summary="List sweeps (yours; an admin sees everyone's), newest first, each with its trials")
    def list(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        page = self.paginate_queryset(self.filter_queryset(self.get_queryset()))
        summaries = [summarize(sweep, sweep.trials.all()) for sweep in page or ()]
        # DRF's stub: many=True takes a list of instances, the stub one instance only.
        return self.get_paginated_response(SweepSerializer(summaries, many=True).data)  # type: ignore[arg-type]

    @extend_schema(
        summary="A sweep with its trials (params, state, last step, best and last value of its metric) and best trial",
        responses={200: SweepSerializer, **error_responses(404)},
    )
    def retrieve(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        sweep = self.get_object()
        return Response(SweepSerializer(summarize(sweep, sweep.trials.all())).data)

    @extend_schema(
        summary="Cancel a sweep",
        description="Every trial not ended is canceled: a waiting or queued one at once, one on Ray once Ray stops "
        "it. The sweep ends CANCELED, or SUCCEEDED if a trial had succeeded. 200 when it has ended now, 202 when "
        "trials on Ray are still stopping (or the last values of trials that ran are still being read: the "
        "scheduler's next pass ends it); 409 when it had ended already.",
        request=None,
        responses={200: SweepSerializer, 202: SweepSerializer, **error_responses(404, 409)},
    )
    @action(detail=True, methods=["post"])
    def cancel(self, request: Request, sweep_id: str) -> Response:
        sweep = self.get_object()
        if sweep.is_finished:
            raise Conflict(f"Sweep {sweep.sweep_id} is already {sweep.state}.")
        cancel_sweep(sweep, actor=actor_of(request))
        sweep.refresh_from_db()
        return self._answer(sweep, status.HTTP_200_OK if sweep.is_finished else status.HTTP_202_ACCEPTED)
