from __future__ import annotations

from django.urls import path
from rest_framework.routers import SimpleRouter

from tasks.api.admission_pause import AdmissionView
from tasks.api.cluster import ClusterView, QueueView, SharesView
from tasks.api.views import TaskViewSet

router = SimpleRouter(trailing_slash=False)
router.register("tasks", TaskViewSet, basename="task")

app_name = "tasks-api"

urlpatterns = [
    path("queue", QueueView.as_view(), name="queue"),
    path("queue/shares", SharesView.as_view(), name="queue-shares"),
    path("cluster", ClusterView.as_view(), name="cluster"),
    path("admission", AdmissionView.as_view(), name="admission"),
    *router.urls,
]
