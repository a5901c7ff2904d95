from __future__ import annotations

from django.contrib import admin
from django.db import DatabaseError, connection
from django.http import HttpRequest, HttpResponse
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from tasks.prometheus import metrics_view


def healthz(request: HttpRequest) -> HttpResponse:
    """Up, and the database answers."""
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
    except DatabaseError:
        return HttpResponse("database unavailable\n", content_type="text/plain", status=503)
    return HttpResponse("ok\n", content_type="text/plain")


handler404 = "argus_site.api.not_found"
handler500 = "argus_site.api.server_error"

urlpatterns = [
    path("admin/", admin.site.urls),
    path("healthz", healthz, name="healthz"),
    path("metrics", metrics_view, name="metrics"),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="schema"), name="swagger-ui"),
    path("api/v2/", include("accounts.urls")),
    path("api/v2/", include("tasks.urls")),
    path("api/v2/", include("accounts.files_urls")),
    path("api/v2/", include("webhooks.urls")),
    path("", include("argus_site.web_urls")),
]
