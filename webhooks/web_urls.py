from __future__ import annotations

from django.urls import path

from webhooks import web_views

urlpatterns = [
    path("", web_views.webhook_create_view, name="webhook-create"),
    path("<int:pk>/delete/", web_views.webhook_delete_view, name="webhook-delete"),
]
