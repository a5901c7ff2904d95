from __future__ import annotations

from django.urls import path
from rest_framework.routers import SimpleRouter

from tasks.api import TaskViewSet
from tasks.views_admission import AdmissionView
from tasks.views_ray import ClusterView, QueueView, SharesView

router = SimpleRouter(trailing_slash=False)
router.register("tasks", TaskViewSet, basename="task")

urlpatterns = [
    path("queue", QueueView.as_view(), name="queue"),
    path("queue/shares", SharesView.as_view(), name="queue-shares"),
    path("cluster", ClusterView.as_view(), name="cluster"),
    path("admission", AdmissionView.as_view(), name="admission"),
    *router.urls,
]
