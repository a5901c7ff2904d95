from __future__ import annotations

from django.urls import path

from tasks.usage.api.views import UsageView

app_name = "usage-api"

urlpatterns = [path("usage", UsageView.as_view(), name="usage")]
