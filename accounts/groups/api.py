"""Groups over the API: admins create, list, show, change and delete them; anyone else sees the
group they are in, and nothing of another (a 404, as for a name that does not exist)."""

from __future__ import annotations

from django.db.models import QuerySet
from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.reverse import reverse

from accounts.api.serializers import WeightField, disk_quota_bytes_field
from accounts.bounds import LIMIT_MAX
from accounts.diskusage.usage import group_used_bytes
from accounts.groups import rules
from accounts.groups.fields import GroupNameField
from accounts.groups.models import NAME_PATTERN, QuotaGroup
from accounts.users import request_user
from common.api import Conflict, JSONIntegerField, ReadOrAdmin, RefuseUnknownFields
from common.api import error_responses as errors

NOMINAL_HELP = "The group's own share of the cluster's GPUs."
BORROW_HELP = "How many GPUs beyond its own it may use of other groups' idle quota; null: no limit."
LEND_HELP = "How many of its idle GPUs other groups may use; null: all of them."
WEIGHT_HELP = "Greater than 0 (default 1.0): fair share between groups orders them by decayed usage over it."


class GroupSerializer(serializers.ModelSerializer[QuotaGroup]):
    members = serializers.SerializerMethodField(help_text="Its members' usernames, in order.")
    disk_used_bytes = serializers.SerializerMethodField(
        help_text="The sum of its members' disk_used_bytes at their last scans (0 before any)."
    )

    class Meta:
        model = QuotaGroup
        fields = ["name", *rules.QUOTA_FIELDS, "members", "disk_used_bytes", "created_at"]
        read_only_fields = fields

    def get_members(self, group: QuotaGroup) -> list[str]:
        # From the prefetched memberships (GroupViewSet.queryset): no query per group.
        return sorted(membership.user.username for membership in group.memberships.all())

    def get_disk_used_bytes(self, group: QuotaGroup) -> int:
        return group_used_bytes(group)  # from the prefetched memberships: no query per group


def _gpus(help_text: str, *, required: bool = True, nullable: bool = False) -> JSONIntegerField:
    return JSONIntegerField(
        min_value=0, max_value=LIMIT_MAX, help_text=help_text, required=required, allow_null=nullable
    )


class GroupCreateSerializer(RefuseUnknownFields):
    name = GroupNameField()
    nominal_gpus = _gpus(NOMINAL_HELP)
    borrow_limit_gpus = _gpus(BORROW_HELP, required=False, nullable=True)
    lend_limit_gpus = _gpus(LEND_HELP, required=False, nullable=True)
    fair_share_weight = WeightField(required=False, help_text=WEIGHT_HELP)
    disk_quota_bytes = disk_quota_bytes_field()

    def validate_name(self, name: str) -> str:
        if QuotaGroup.objects.filter(name=name).exists():
            raise serializers.ValidationError(f"A group named {name!r} already exists.")
        return name


class GroupUpdateSerializer(RefuseUnknownFields):
    """Some of a group's quota; its name is its key and does not change."""

    nominal_gpus = _gpus(NOMINAL_HELP, required=False)
    borrow_limit_gpus = _gpus(BORROW_HELP, required=False, nullable=True)
    lend_limit_gpus = _gpus(LEND_HELP, required=False, nullable=True)
    fair_share_weight = WeightField(required=False, help_text=WEIGHT_HELP)
    disk_quota_bytes = disk_quota_bytes_field()


@extend_schema(tags=["groups"])
@extend_schema_view(
    list=extend_schema(
        operation_id="groups_list",
        summary="Groups: all of them for an admin, your own (or none) for anyone else",
        responses={200: GroupSerializer(many=True), **errors()},
    ),
    retrieve=extend_schema(
        operation_id="groups_get",
        summary="A group (anyone else than an admin: only their own)",
        responses={200: GroupSerializer, **errors(404)},
    ),
)
class GroupViewSet(
    mixins.ListModelMixin, mixins.RetrieveModelMixin, mixins.DestroyModelMixin, viewsets.GenericViewSet[QuotaGroup]
):
    """Groups of users that share a quota of GPUs (docs/groups.md)."""

    serializer_class = GroupSerializer
    permission_classes = [IsAuthenticated, ReadOrAdmin]
    lookup_field = "name"
    lookup_value_regex = NAME_PATTERN
    pagination_class = None  # a lab has a handful of groups

    def get_queryset(self) -> QuerySet[QuotaGroup]:
        groups = QuotaGroup.objects.prefetch_related("memberships__user__disk_usage").order_by("name")
        if getattr(self, "swagger_fake_view", False):  # drf-spectacular, building the schema
            return groups
        user = request_user(self.request)
        return groups if user.is_staff else groups.filter(memberships__user=user)

    @extend_schema(
        operation_id="groups_create",
        summary="Create a group (admins)",
        request=GroupCreateSerializer,
        responses={201: GroupSerializer, **errors(400, 403)},
    )
    def create(self, request: Request) -> Response:
        body = GroupCreateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        group = rules.create_group(request_user(request), **body.validated_data)
        return Response(
            GroupSerializer(group).data,
            status=status.HTTP_201_CREATED,
            headers={"Location": reverse("accounts-api:group-detail", kwargs={"name": group.name})},
        )

    @extend_schema(
        operation_id="groups_update",
        summary="Change a group's quota (admins)",
        description="Only the fields sent change; the name does not. Every change is recorded in the "
        "group's history (admin site).",
        request=GroupUpdateSerializer,
        responses={200: GroupSerializer, **errors(400, 403, 404)},
    )
    def partial_update(self, request: Request, name: str) -> Response:
        group = self.get_object()
        body = GroupUpdateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        rules.update_group(request_user(request), group, **body.validated_data)
        return Response(GroupSerializer(group).data)

    @extend_schema(
        operation_id="groups_delete",
        summary="Delete a group (admins)",
        description="Refused (409, saying why) while it has members or live tasks: move the members "
        'out (PATCH /api/v2/users/NAME {"group": null}) and let their tasks end first.',
        responses={204: None, **errors(403, 404, 409)},
    )
    def destroy(self, request: Request, name: str) -> Response:
        group = self.get_object()
        try:
            rules.delete_group(request_user(request), group)
        except rules.GroupInUse as refusal:
            raise Conflict(str(refusal)) from None
        return Response(status=status.HTTP_204_NO_CONTENT)
