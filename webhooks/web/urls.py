from __future__ import annotations

from django.urls import path

from webhooks.web import views

urlpatterns = [
    path("", views.webhook_create_view, name="webhook-create"),
    path("<int:pk>/delete/", views.webhook_delete_view, name="webhook-delete"),
]
