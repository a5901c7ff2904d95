from __future__ import annotations

from rest_framework.routers import SimpleRouter

from tasks.api import TaskViewSet

router = SimpleRouter(trailing_slash=False)
router.register("tasks", TaskViewSet, basename="task")

urlpatterns = router.urls
