from __future__ import annotations

from rest_framework.routers import SimpleRouter

from webhooks.api.views import WebhookViewSet

router = SimpleRouter(trailing_slash=False)
router.register("me/webhooks", WebhookViewSet, basename="my-webhook")

app_name = "webhooks-api"

urlpatterns = router.urls
