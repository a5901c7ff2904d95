from __future__ import annotations

from collections.abc import Callable
from functools import cached_property
from typing import Any

from django.contrib.auth.models import User
from django.db.models import QuerySet
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import generics, mixins, permissions, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.reverse import reverse
from rest_framework.serializers import BaseSerializer

from accounts import limits, users
from accounts import secrets as secrets_crypto
from accounts.api.serializers import (
    IssuedTokenSerializer,
    SecretSerializer,
    SecretSetSerializer,
    TokenCreateSerializer,
    TokenSerializer,
    UserCreateSerializer,
    UserLimitsUpdateSerializer,
    UserSerializer,
)
from accounts.groups import rules as groups
from accounts.models import ApiToken, Secret
from common.api import Conflict, ServiceUnavailable, actor_of
from common.api import error_responses as errors


@extend_schema_view(
    list=extend_schema(responses={200: UserSerializer(many=True), **errors(403)}),
    retrieve=extend_schema(responses={200: UserSerializer, **errors(403, 404)}),
)
class UserViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet[User]):
    """Users, for admins: list, show, create, set limits and permissions (PATCH), disable, enable."""

    # select_related: each user's limits come in the same query, not one query per user.
    queryset = User.objects.select_related("limits", "group_membership__group", "disk_usage").order_by("username")
    serializer_class = UserSerializer
    permission_classes = [permissions.IsAdminUser]
    lookup_field = "username"
    lookup_value_regex = users.USERNAME_PATTERN

    @extend_schema(request=UserCreateSerializer, responses={201: UserSerializer, **errors(400, 403)})
    def create(self, request: Request) -> Response:
        serializer = UserCreateSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        user = serializer.save()
        return Response(
            UserSerializer(user).data,
            status=status.HTTP_201_CREATED,
            headers={"Location": reverse("accounts-api:user-detail", kwargs={"username": user.username})},
        )

    @extend_schema(
        summary="Set a user's limits, fair-share weight, high-priority permission, group and disk quota",
        description="Only the fields sent change. A limit is a whole number (0: no limit) or null: "
        "the site default (ARGUS_USER_MAX_RUNNING_GPUS, _RUNNING_TASKS, _QUEUED_TASKS) applies. "
        "`can_use_high_priority` grants (or withdraws) the right to submit `priority: high`; an "
        "admin always has it. `group` puts the user in that group (null: in none). `disk_quota_bytes`: "
        "past it the user's submissions and uploads are refused (null: no quota). The answer is the "
        "user, with each limit as set and as in effect.",
        request=UserLimitsUpdateSerializer,
        responses={200: UserSerializer, **errors(400, 403, 404)},
    )
    def partial_update(self, request: Request, username: str) -> Response:
        user = self.get_object()
        serializer = UserLimitsUpdateSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        changes = dict(serializer.validated_data)
        if "group" in changes:
            try:
                groups.set_group(users.request_user(request), user, changes.pop("group"))
            except groups.GroupGone as gone:
                raise ValidationError({"group": [str(gone)]}) from None
        limits.set_limits(user, actor=actor_of(request), **changes)
        return Response(UserSerializer(user).data)

    @extend_schema(request=None, responses={200: UserSerializer, **errors(403, 404, 409)})
    @action(detail=True, methods=["post"])
    def disable(self, request: Request, username: str) -> Response:
        user = self.get_object()
        # An admin who disables themselves locks out the one person who could undo it.
        if user == request.user:
            raise Conflict("You cannot disable yourself.")
        users.set_active(user, False)
        return Response(UserSerializer(user).data)

    @extend_schema(request=None, responses={200: UserSerializer, **errors(403, 404)})
    @action(detail=True, methods=["post"])
    def enable(self, request: Request, username: str) -> Response:
        user = self.get_object()
        users.set_active(user, True)
        return Response(UserSerializer(user).data)


@extend_schema(responses={200: UserSerializer, **errors()})
class MeView(generics.RetrieveAPIView[User]):
    """The user the request is authenticated as."""

    serializer_class = UserSerializer

    def get_object(self) -> User:
        return users.request_user(self.request)  # IsAuthenticated: never anonymous


class TokenViewSet(
    mixins.ListModelMixin, mixins.CreateModelMixin, mixins.DestroyModelMixin, viewsets.GenericViewSet[ApiToken]
):
    """One user's tokens: list, issue (the raw token is in that response only), revoke."""

    serializer_class = TokenSerializer

    @property
    def owner(self) -> User:
        raise NotImplementedError

    def get_queryset(self) -> QuerySet[ApiToken]:
        if getattr(self, "swagger_fake_view", False):  # drf-spectacular, building the schema
            return ApiToken.objects.none()
        return ApiToken.objects.filter(user=self.owner).order_by("-created_at", "-id")

    def get_serializer_class(self) -> type[BaseSerializer[ApiToken]]:
        return TokenCreateSerializer if self.action == "create" else TokenSerializer

    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        owner = self.owner  # first: an unknown user is a 404 whatever the body says
        serializer = self.get_serializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        token, raw = ApiToken.issue(owner, **serializer.validated_data)
        context = {**self.get_serializer_context(), "raw_token": raw}
        data = IssuedTokenSerializer(token, context=context).data
        response = Response(data, status=status.HTTP_201_CREATED)
        # The one response that carries a token: no cache may keep it.
        response["Cache-Control"] = "no-store"
        return response

    def perform_destroy(self, instance: ApiToken) -> None:
        # Revoked, not deleted: the list keeps showing when it was created, used and revoked.
        instance.revoke()


def token_schema(*codes: int) -> dict[str, Callable[[type[TokenViewSet]], type[TokenViewSet]]]:
    """The token routes' schema, with the errors ``codes`` that the owner's lookup adds."""
    return {
        "list": extend_schema(responses={200: TokenSerializer(many=True), **errors(*codes)}),
        "create": extend_schema(
            request=TokenCreateSerializer, responses={201: IssuedTokenSerializer, **errors(400, *codes)}
        ),
        "destroy": extend_schema(responses={204: None, **errors(404, *codes)}),
    }


@extend_schema_view(**token_schema())
class MyTokenViewSet(TokenViewSet):
    @property
    def owner(self) -> User:
        return users.request_user(self.request)  # IsAuthenticated: never anonymous


@extend_schema_view(**token_schema(403, 404))
class UserTokenViewSet(TokenViewSet):
    permission_classes = [permissions.IsAdminUser]

    @cached_property
    def owner(self) -> User:
        return get_object_or_404(User, username=self.kwargs["username"])


@extend_schema_view(
    list=extend_schema(
        summary="Your secrets: names and times, never values",
        responses={200: SecretSerializer(many=True), **errors()},
    ),
    destroy=extend_schema(
        summary="Delete a secret",
        description="Tasks that name it and have not started yet fail their next attempt (USER_ERROR, naming it).",
        responses={204: None, **errors(404)},
    ),
)
class MySecretViewSet(mixins.ListModelMixin, mixins.DestroyModelMixin, viewsets.GenericViewSet[Secret]):
    """The user's secrets, used by name in task specs (``secrets: [WANDB_API_KEY]``): set, list, delete.

    No route serves a value back, to anyone: an admin sees no one's values either."""

    serializer_class = SecretSerializer
    lookup_field = "name"
    lookup_value_regex = secrets_crypto.NAME_PATTERN
    pagination_class = None  # a few names per user

    def get_queryset(self) -> QuerySet[Secret]:
        if getattr(self, "swagger_fake_view", False):  # drf-spectacular, building the schema
            return Secret.objects.none()
        return Secret.objects.filter(user=users.request_user(self.request)).order_by("name")

    @extend_schema(
        summary="Set a secret (201 when new, 200 when it replaces one)",
        description="The value is encrypted at rest and never shown again: not in this answer, the list, "
        "a task's spec, events or logs (where Argus serves a log line holding it, it shows [redacted]).",
        request=SecretSetSerializer,
        responses={201: SecretSerializer, 200: SecretSerializer, **errors(400, 503)},
    )
    def create(self, request: Request) -> Response:
        serializer = SecretSetSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        try:
            secret, created = Secret.put(users.request_user(request), **serializer.validated_data)
        except secrets_crypto.SecretsUnavailable as error:
            raise ServiceUnavailable(str(error)) from error
        return Response(
            SecretSerializer(secret).data,
            status=status.HTTP_201_CREATED if created else status.HTTP_200_OK,
            headers={"Location": reverse("accounts-api:my-secret-detail", kwargs={"name": secret.name})},
        )
