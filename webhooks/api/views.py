"""/api/v2/me/webhooks: a user's webhooks and their deliveries."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from accounts.users import request_user
from common.api import error_responses
from webhooks.api.serializers import CreatedWebhookSerializer, DeliverySerializer, WebhookSerializer
from webhooks.models import Delivery, Webhook


@extend_schema_view(
    list=extend_schema(summary="Your webhooks", responses={200: WebhookSerializer(many=True), **error_responses()}),
    create=extend_schema(
        summary="Register a webhook (its secret is in this answer only)",
        request=WebhookSerializer,
        responses={201: CreatedWebhookSerializer, **error_responses(400)},
    ),
    retrieve=extend_schema(summary="One of your webhooks", responses={200: WebhookSerializer, **error_responses(404)}),
    destroy=extend_schema(summary="Delete a webhook", responses={204: None, **error_responses(404)}),
)
class WebhookViewSet(
    mixins.ListModelMixin,
    mixins.CreateModelMixin,
    mixins.RetrieveModelMixin,
    mixins.DestroyModelMixin,
    viewsets.GenericViewSet[Webhook],
):
    serializer_class = WebhookSerializer

    def get_queryset(self) -> QuerySet[Webhook]:
        if getattr(self, "swagger_fake_view", False):  # drf-spectacular, building the schema
            return Webhook.objects.none()
        return Webhook.objects.filter(user=request_user(self.request))  # IsAuthenticated: never anonymous

    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        serializer = WebhookSerializer(data=request.data, context={"user": request.user})
        serializer.is_valid(raise_exception=True)
        hook = Webhook.create(user=request_user(request), **serializer.validated_data)
        response = Response(CreatedWebhookSerializer(hook).data, status=status.HTTP_201_CREATED)
        response["Cache-Control"] = "no-store"  # the one answer that carries the secret
        return response

    @extend_schema(
        summary="A webhook's deliveries, newest first",
        responses={200: DeliverySerializer(many=True), **error_responses(404)},
    )
    @action(detail=True, methods=["get"])
    def deliveries(self, request: Request, pk: str) -> Response:
        hook = self.get_object()
        rows: QuerySet[Delivery] = hook.deliveries.select_related("task").order_by("-created_at", "-id")
        # DRF pages any queryset; its stub takes only the view's own model's (webhooks here).
        page: list[Delivery] | None = self.paginate_queryset(rows)  # type: ignore[arg-type]
        return self.get_paginated_response(DeliverySerializer(page, many=True).data)
