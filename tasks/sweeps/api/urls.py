from __future__ import annotations

from rest_framework.routers import SimpleRouter

from tasks.sweeps.api.views import SweepViewSet

router = SimpleRouter(trailing_slash=False)
router.register("sweeps", SweepViewSet, basename="sweep")

app_name = "sweeps-api"

urlpatterns = router.urls
