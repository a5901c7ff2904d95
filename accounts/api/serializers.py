from __future__ import annotations

from datetime import datetime
from typing import Any, TypedDict

from django.contrib.auth.models import User
from django.core.exceptions import ValidationError as DjangoValidationError
from django.utils import timezone
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from accounts import limits, users
from accounts import secrets as secrets_crypto
from accounts.bounds import DISK_QUOTA_HELP, DISK_QUOTA_MAX, LIMIT_MAX, validate_weight
from accounts.diskusage.usage import own_usage
from accounts.groups.fields import GroupRefField
from accounts.groups.rules import group_of
from accounts.homes import home_dir
from accounts.models import ApiToken, Secret, TokenState, UserLimits
from common.api import JSONBooleanField, JSONFloatField, JSONIntegerField, JSONStringField, RefuseUnknownFields


class LimitValue(TypedDict):
    value: int | None
    effective: int


class LimitValueSerializer(serializers.Serializer[LimitValue]):
    value = serializers.IntegerField(
        allow_null=True, help_text="The user's own limit; null: the site default applies. 0: no limit."
    )
    effective = serializers.IntegerField(help_text="The limit in effect. 0: no limit.")


class UserLimitsSerializer(serializers.Serializer[dict[str, LimitValue | float]]):
    """A user's limits, each as set for them and as in effect (the site default where unset)."""

    max_running_gpus = LimitValueSerializer(help_text="GPUs of the user's running tasks at once.")
    max_running_tasks = LimitValueSerializer(help_text="The user's running tasks at once.")
    max_queued_tasks = LimitValueSerializer(
        help_text="The user's waiting tasks (QUEUED, PENDING_RESOURCES); a submission past it is a 429."
    )
    fair_share_weight = serializers.FloatField(
        help_text="Fair share orders users by decayed GPU-seconds over this weight (default 1.0)."
    )

    @staticmethod
    def of(row: UserLimits | None) -> dict[str, object]:
        """The limits of a user whose own are ``row`` (None: they have none), as this shows them."""
        effective = limits.resolve(row)
        shown: dict[str, LimitValue | float] = {
            name: {"value": getattr(row, name, None), "effective": getattr(effective, name)}
            for name in limits.LIMIT_NAMES
        }
        shown["fair_share_weight"] = effective.weight
        return UserLimitsSerializer(shown).data


class UserSerializer(serializers.ModelSerializer[User]):
    is_admin = serializers.BooleanField(source="is_staff", read_only=True)
    home = serializers.SerializerMethodField(help_text="The user's home directory on the shared storage.")
    limits = serializers.SerializerMethodField()
    can_use_high_priority = serializers.SerializerMethodField(
        help_text="Whether the user may submit tasks with priority: high: always for an admin, else as "
        "granted (PATCH this user with can_use_high_priority)."
    )
    group = serializers.SerializerMethodField(help_text="The name of the user's group; null: no group.")
    disk_used_bytes = serializers.SerializerMethodField(
        help_text="Bytes of the user's files on the shared storage (home, jobs included) at the last scan "
        "(every few minutes, off the scheduler); null: not measured yet."
    )
    disk_measured_at = serializers.SerializerMethodField(help_text="When disk_used_bytes was measured; null: never.")
    disk_quota_bytes = serializers.SerializerMethodField(
        help_text="The user's own disk quota in bytes (an admin sets it: PATCH /api/v2/users/NAME); null: none. "
        "Their group's quota, if any, applies too."
    )

    class Meta:
        model = User
        fields = [
            "username",
            "is_admin",
            "is_active",
            "date_joined",
            "last_login",
            "home",
            "limits",
            "can_use_high_priority",
            "group",
            "disk_used_bytes",
            "disk_measured_at",
            "disk_quota_bytes",
        ]
        read_only_fields = fields

    def get_home(self, user: User) -> str:
        return str(home_dir(user.username))

    @extend_schema_field(UserLimitsSerializer)
    def get_limits(self, user: User) -> dict[str, object]:
        return UserLimitsSerializer.of(limits.own_limits(user))

    def get_can_use_high_priority(self, user: User) -> bool:
        return limits.may_use_high_priority(user)

    def get_group(self, user: User) -> str | None:
        group = group_of(user)
        return group.name if group else None

    def get_disk_used_bytes(self, user: User) -> int | None:
        usage = own_usage(user)
        return usage.used_bytes if usage else None

    def get_disk_measured_at(self, user: User) -> datetime | None:
        usage = own_usage(user)
        return usage.measured_at if usage else None

    def get_disk_quota_bytes(self, user: User) -> int | None:
        row = limits.own_limits(user)
        return row.disk_quota_bytes if row else None


@extend_schema_field({"type": "number", "format": "double", "minimum": 0, "exclusiveMinimum": True})
class WeightField(JSONFloatField):
    """A fair-share weight: a number greater than 0 (accounts.bounds.validate_weight)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(validators=[validate_weight], **kwargs)


def disk_quota_bytes_field() -> JSONIntegerField:
    """A disk quota as the users and groups APIs take it: bytes, or null for none."""
    return JSONIntegerField(
        required=False, allow_null=True, min_value=0, max_value=DISK_QUOTA_MAX, help_text=DISK_QUOTA_HELP
    )


class UserLimitsUpdateSerializer(RefuseUnknownFields):
    """Some of a user's limits: a number, or null for the site default (ARGUS_USER_*); 0: no limit."""

    max_running_gpus = JSONIntegerField(
        required=False, allow_null=True, min_value=0, max_value=LIMIT_MAX, help_text="GPUs of running tasks at once."
    )
    max_running_tasks = JSONIntegerField(
        required=False, allow_null=True, min_value=0, max_value=LIMIT_MAX, help_text="Running tasks at once."
    )
    max_queued_tasks = JSONIntegerField(
        required=False,
        allow_null=True,
        min_value=0,
        max_value=LIMIT_MAX,
        help_text="Waiting tasks (QUEUED, PENDING_RESOURCES) at once; a submission past it is a 429.",
    )
    fair_share_weight = WeightField(required=False, help_text="Greater than 0; 1.0 for everyone by default.")
    can_use_high_priority = JSONBooleanField(
        required=False,
        help_text="Whether the user may submit tasks with priority: high (false by default; admins always may).",
    )
    group = GroupRefField(
        required=False, allow_null=True, help_text="The user's group, by name (it must exist); null: no group."
    )
    disk_quota_bytes = disk_quota_bytes_field()


class UserCreateSerializer(serializers.Serializer[User]):
    username = JSONStringField(max_length=40, trim_whitespace=False, help_text=users.USERNAME_HELP)
    is_admin = JSONBooleanField(default=False)
    password = JSONStringField(
        required=False,
        write_only=True,
        trim_whitespace=False,
        style={"input_type": "password"},
        help_text="Optional: without a password the user can only use API tokens.",
    )

    def create(self, validated_data: dict[str, Any]) -> User:
        try:
            return users.create_user(
                validated_data["username"],
                admin=validated_data["is_admin"],
                password=validated_data.get("password"),
            )
        except DjangoValidationError as exc:
            # Named per field ("username", "password"), so the 400 says which one is wrong.
            raise serializers.ValidationError(exc.message_dict) from None


class TokenSerializer(serializers.ModelSerializer[ApiToken]):
    state = serializers.ChoiceField(choices=TokenState.choices, read_only=True)

    class Meta:
        model = ApiToken
        # Never token_hash: even a hash is of no use to anyone reading the list.
        fields = ["id", "name", "prefix", "state", "created_at", "last_used_at", "expires_at", "revoked_at"]
        read_only_fields = fields


class TokenCreateSerializer(serializers.ModelSerializer[ApiToken]):
    name = JSONStringField(max_length=100)

    class Meta:
        model = ApiToken
        fields = ["name", "expires_at"]

    def validate_expires_at(self, value: datetime | None) -> datetime | None:
        if value is not None and value <= timezone.now():
            raise serializers.ValidationError("The expiry must be in the future.")
        return value


class IssuedTokenSerializer(TokenSerializer):
    """A token just issued: the one response that carries the raw token."""

    token = serializers.SerializerMethodField(help_text="The token itself. It is shown this once only.")

    class Meta(TokenSerializer.Meta):
        fields = [*TokenSerializer.Meta.fields, "token"]
        read_only_fields = fields

    def get_token(self, token: ApiToken) -> str:
        return str(self.context["raw_token"])


class SecretSerializer(serializers.ModelSerializer[Secret]):
    """A secret as anyone is shown it: its name and times, never its value (not even to admins)."""

    class Meta:
        model = Secret
        fields = ["name", "created_at", "updated_at"]
        read_only_fields = fields


class SecretNameField(JSONStringField):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__(
            max_length=secrets_crypto.NAME_MAX,
            trim_whitespace=False,
            help_text=secrets_crypto.NAME_HELP + " Used by name in a task spec: secrets: [NAME].",
            **kwargs,
        )

    def to_internal_value(self, data: object) -> str:
        name = super().to_internal_value(data)
        error = secrets_crypto.name_error(name)
        if error:
            raise serializers.ValidationError(error)
        return name


class SecretValueField(JSONStringField):
    def __init__(self, **kwargs: Any) -> None:
        # max_length counts characters; value_error counts the bytes the limit is about.
        super().__init__(
            write_only=True,
            trim_whitespace=False,
            max_length=secrets_crypto.VALUE_MAX_BYTES,
            style={"input_type": "password"},
            help_text=secrets_crypto.VALUE_HELP,
            **kwargs,
        )

    def to_internal_value(self, data: object) -> str:
        value = super().to_internal_value(data)
        error = secrets_crypto.value_error(value)
        if error:
            raise serializers.ValidationError(error)
        return value


# The schema's patterns: what the fields above accept, so that a client (and schemathesis) can
# tell a valid body from the schema alone.
SecretNameFieldSchema = extend_schema_field(
    {
        "type": "string",
        "pattern": f"^{secrets_crypto.NAME_PATTERN}$",
        "maxLength": secrets_crypto.NAME_MAX,
        "description": SecretNameField().help_text,
    }
)(SecretNameField)
SecretValueFieldSchema = extend_schema_field(
    {
        "type": "string",
        "writeOnly": True,
        "minLength": 1,
        # Printable: no C0/C1 control characters, no line or paragraph separators.
        "pattern": r"^[^\x00-\x1f\x7f-\x9f\u2028\u2029]+$",
        "maxLength": secrets_crypto.VALUE_MAX_BYTES,
        "description": secrets_crypto.VALUE_HELP,
    }
)(SecretValueField)


class SecretSetSerializer(RefuseUnknownFields):
    """Set a secret: a new name is created (201), an existing one replaced (200)."""

    name = SecretNameFieldSchema()
    value = SecretValueFieldSchema()
