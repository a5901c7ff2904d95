from __future__ import annotations

from rest_framework.routers import SimpleRouter

from tasks.pipelines.api.views import PipelineViewSet

router = SimpleRouter(trailing_slash=False)
router.register("pipelines", PipelineViewSet, basename="pipeline")

app_name = "pipelines-api"

urlpatterns = router.urls
