"""Every web page's route. The task pages (/tasks/, /queue/, /cluster/) are placeholders until
the task API lands; the nav links to them by plain path, so their views can change freely."""

from __future__ import annotations

from collections.abc import Callable

from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.urls import path
from django.views.generic import RedirectView, TemplateView

from accounts import web_views


def placeholder(title: str) -> Callable[..., HttpResponse]:
    view = TemplateView.as_view(template_name="tasks/placeholder.html", extra_context={"title": title})
    return login_required(view)


urlpatterns = [
    path("", RedirectView.as_view(url="/tasks/"), name="home"),
    path("login/", web_views.login_view, name="login"),
    path("logout/", web_views.logout_view, name="logout"),
    path("account/", web_views.account_view, name="account"),
    path("account/tokens/<int:pk>/revoke/", web_views.revoke_token_view, name="account-token-revoke"),
    path("data/", web_views.data_view, name="data"),
    path("data/download/", web_views.data_download_view, name="data-download"),
    path("data/upload/", web_views.data_upload_view, name="data-upload"),
    path("data/mkdir/", web_views.data_mkdir_view, name="data-mkdir"),
    path("data/delete/", web_views.data_delete_view, name="data-delete"),
    path("tasks/", placeholder("Tasks"), name="tasks"),
    path("tasks/new/", placeholder("New task"), name="task-new"),
    path("queue/", placeholder("Queue"), name="queue"),
    path("cluster/", placeholder("Cluster"), name="cluster"),
]
