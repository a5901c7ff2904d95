"""/api/v2/me/ssh-keys: a user's SSH keys for SFTP (add, list, delete)."""

from __future__ import annotations

import logging

from django.db.models import QuerySet
from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.reverse import reverse

from accounts import users
from accounts.sshkeys.keys import MAX_KEY_CHARS
from accounts.sshkeys.models import KeyRefused, SshKey
from common.api import JSONStringField
from common.api import error_responses as errors

logger = logging.getLogger(__name__)


class SshKeySerializer(serializers.ModelSerializer[SshKey]):
    class Meta:
        model = SshKey
        fields = ["id", "name", "public_key", "fingerprint", "created_at", "last_used_at"]
        read_only_fields = fields


class SshKeyAddSerializer(serializers.Serializer[None]):
    name = JSONStringField(max_length=100, help_text="Your name for the key (e.g. laptop).")
    public_key = JSONStringField(
        max_length=MAX_KEY_CHARS,
        trim_whitespace=False,
        help_text="An OpenSSH public key: the one line of ~/.ssh/id_ed25519.pub, say.",
    )


@extend_schema_view(
    list=extend_schema(summary="Your SSH keys for SFTP", responses={200: SshKeySerializer(many=True), **errors()}),
    destroy=extend_schema(
        summary="Delete an SSH key",
        description="It signs no one in from then on.",
        responses={204: None, **errors(404)},
    ),
)
class MySshKeyViewSet(mixins.ListModelMixin, mixins.DestroyModelMixin, viewsets.GenericViewSet[SshKey]):
    """The SSH keys the user signs in to SFTP with; a deleted key signs no one in again."""

    serializer_class = SshKeySerializer
    pagination_class = None  # a few keys per user

    def get_queryset(self) -> QuerySet[SshKey]:
        if getattr(self, "swagger_fake_view", False):  # drf-spectacular, building the schema
            return SshKey.objects.none()
        return SshKey.objects.filter(user=users.request_user(self.request))

    @extend_schema(
        summary="Add an SSH key for SFTP",
        request=SshKeyAddSerializer,
        responses={201: SshKeySerializer, **errors(400)},
    )
    def create(self, request: Request) -> Response:
        form = SshKeyAddSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        try:
            key = SshKey.register(users.request_user(request), **form.validated_data)
        except KeyRefused as exc:
            raise ValidationError({exc.field: [exc.message]}) from None
        return Response(
            SshKeySerializer(key).data,
            status=status.HTTP_201_CREATED,
            headers={"Location": reverse("accounts-api:my-ssh-key-detail", kwargs={"pk": key.pk})},
        )

    def perform_destroy(self, instance: SshKey) -> None:
        logger.info("Deleted SSH key %s (%s) of %s", instance.fingerprint, instance.name, instance.user)
        instance.delete()
