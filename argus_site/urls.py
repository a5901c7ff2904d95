from __future__ import annotations

from django.contrib import admin
from django.db import DatabaseError, connection
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.templatetags.static import static
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

from tasks.api.metrics import metrics_view


def healthz(request: HttpRequest) -> HttpResponse:
    """Up, and the database answers."""
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
    except DatabaseError:
        return HttpResponse("database unavailable\n", content_type="text/plain", status=503)
    return HttpResponse("ok\n", content_type="text/plain")


def favicon(request: HttpRequest) -> HttpResponse:
    """Browsers ask for /favicon.ico on pages that name no icon (the admin's): Argus's own."""
    return HttpResponseRedirect(static("img/argus.svg"))


handler404 = "common.api.not_found"
handler500 = "common.api.server_error"

urlpatterns = [
    path("admin/", admin.site.urls),
    path("healthz", healthz, name="healthz"),
    path("favicon.ico", favicon, name="favicon"),
    path("metrics", metrics_view, name="metrics"),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    # The split view serves its start-up script as a file (?script): the CSP refuses inline scripts.
    path("api/docs/", SpectacularSwaggerSplitView.as_view(url_name="schema"), name="swagger-ui"),
    path("api/v2/", include("accounts.api.urls", namespace="accounts-api")),
    path("api/v2/", include("tasks.api.urls", namespace="tasks-api")),
    path("api/v2/", include("tasks.pipelines.api.urls", namespace="pipelines-api")),
    path("api/v2/", include("tasks.sweeps.api.urls", namespace="sweeps-api")),
    path("api/v2/", include("tasks.usage.api.urls", namespace="usage-api")),
    path("api/v2/", include("accounts.api.files_urls", namespace="files-api")),
    path("api/v2/", include("webhooks.api.urls", namespace="webhooks-api")),
    path("", include("argus_site.web_urls", namespace="web")),
]
