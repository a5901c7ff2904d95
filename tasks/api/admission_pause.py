"""The admission pause over the API: anyone signed in reads it, an admin changes it."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework.generics import GenericAPIView
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response

from common.api import ReadOrAdmin, actor_of, error_responses
from tasks.api.serializers import AdmissionChangeSerializer, AdmissionSerializer
from tasks.pause import AdmissionControl


class AdmissionView(GenericAPIView[AdmissionControl]):
    """Whether Argus starts waiting tasks: while an operator has it paused, tasks on Ray go on."""

    serializer_class = AdmissionSerializer
    pagination_class = None
    permission_classes = [IsAuthenticated, ReadOrAdmin]

    @extend_schema(
        summary="Whether admission is paused, and why", responses={200: AdmissionSerializer, **error_responses()}
    )
    def get(self, request: Request) -> Response:
        return Response(AdmissionSerializer(AdmissionControl.current()).data)

    @extend_schema(
        operation_id="admission_set",
        summary="Pause or resume admission (admins)",
        description="While paused, the scheduler starts no waiting task; tasks on Ray go on. Answers the new state.",
        request=AdmissionChangeSerializer,
        responses={200: AdmissionSerializer, **error_responses(400, 403)},
    )
    def post(self, request: Request) -> Response:
        change = AdmissionChangeSerializer(data=request.data)
        change.is_valid(raise_exception=True)
        state = AdmissionControl.set(
            change.validated_data["paused"], change.validated_data["reason"], actor=actor_of(request)
        )
        return Response(AdmissionSerializer(state).data)
