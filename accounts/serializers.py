from __future__ import annotations

from datetime import datetime
from typing import Any

from django.contrib.auth.models import User
from django.core.exceptions import ValidationError as DjangoValidationError
from django.utils import timezone
from rest_framework import serializers

from accounts import users
from accounts.homes import home_dir
from accounts.models import ApiToken, TokenState


class UserSerializer(serializers.ModelSerializer):
    is_admin = serializers.BooleanField(source="is_staff", read_only=True)
    home = serializers.SerializerMethodField(help_text="The user's home directory on the shared storage.")

    class Meta:
        model = User
        fields = ["username", "is_admin", "is_active", "date_joined", "last_login", "home"]
        read_only_fields = fields

    def get_home(self, user: User) -> str:
        return str(home_dir(user.username))


class UserCreateSerializer(serializers.Serializer):
    username = serializers.CharField(max_length=40, trim_whitespace=False, help_text=users.USERNAME_HELP)
    is_admin = serializers.BooleanField(default=False)
    password = serializers.CharField(
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


class TokenSerializer(serializers.ModelSerializer):
    state = serializers.ChoiceField(choices=TokenState.choices, read_only=True)

    class Meta:
        model = ApiToken
        # Never token_hash: even a hash is of no use to anyone reading the list.
        fields = ["id", "name", "prefix", "state", "created_at", "last_used_at", "expires_at", "revoked_at"]
        read_only_fields = fields


class TokenCreateSerializer(serializers.ModelSerializer):
    name = serializers.CharField(max_length=100)

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
        return self.context["raw_token"]
