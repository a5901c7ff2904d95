from __future__ import annotations

from django.contrib import admin
from django.db import models

from common.admin_save import SaveChangedFieldsOnly
from webhooks.models import Delivery, Webhook


@admin.register(Webhook)
class WebhookAdmin(admin.ModelAdmin[Webhook]):
    list_display = ["id", "user", "url", "events", "created_at"]
    search_fields = ["user__username", "url"]
    list_select_related = ["user"]
    exclude = ["secret"]
    formfield_overrides = {models.URLField: {"assume_scheme": "https"}}  # Django 6's default, today


@admin.register(Delivery)
class DeliveryAdmin(SaveChangedFieldsOnly[Delivery]):
    """Deliveries; an edit writes only what changed: the delivery worker writes the same rows."""

    list_display = ["id", "task", "event_name", "webhook", "status", "attempts", "response_code", "next_try_at"]
    list_filter = ["status", "event_name"]
    search_fields = ["task__task_id", "webhook__url"]
    list_select_related = ["task", "webhook__user"]
    raw_id_fields = ["webhook", "task", "event"]
    readonly_fields = ["body"]
