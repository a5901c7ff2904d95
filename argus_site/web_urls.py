"""Every web page's route. The nav links to pages by plain path (/tasks/, /queue/, …)."""

from __future__ import annotations

from django.urls import include, path
from django.views.generic import RedirectView

from accounts.web import views as account_views
from tasks.pipelines.web import views as pipeline_views
from tasks.sweeps.web import views as sweep_views
from tasks.usage.web import views as usage_views
from tasks.web import views as task_views

app_name = "web"

urlpatterns = [
    path("", RedirectView.as_view(url="/tasks/"), name="home"),
    path("login/", account_views.login_view, name="login"),
    path("logout/", account_views.logout_view, name="logout"),
    path("account/", account_views.account_view, name="account"),
    path("account/tokens/<int:pk>/revoke/", account_views.revoke_token_view, name="account-token-revoke"),
    path("account/secrets/", account_views.secret_set_view, name="account-secret-set"),
    path("account/secrets/<str:name>/delete/", account_views.secret_delete_view, name="account-secret-delete"),
    path("account/webhooks/", include("webhooks.web.urls")),
    path("account/ssh-keys/", include("accounts.sshkeys.web")),
    path("data/", account_views.data_view, name="data"),
    path("data/download/", account_views.data_download_view, name="data-download"),
    path("data/upload/", account_views.data_upload_view, name="data-upload"),
    path("data/mkdir/", account_views.data_mkdir_view, name="data-mkdir"),
    path("data/delete/", account_views.data_delete_view, name="data-delete"),
    path("tasks/", task_views.task_list_view, name="tasks"),
    path("tasks/new/", task_views.task_new_view, name="task-new"),
    path("tasks/<str:task_id>/", task_views.task_detail_view, name="task-detail"),
    path("tasks/<str:task_id>/cancel/", task_views.task_cancel_view, name="task-cancel"),
    path(
        "tasks/<str:task_id>/checkpoints/<int:step>/delete/",
        task_views.task_checkpoint_delete_view,
        name="task-checkpoint-delete",
    ),
    path("pipelines/", pipeline_views.pipeline_list_view, name="pipelines"),
    path("pipelines/<str:pipeline_id>/", pipeline_views.pipeline_detail_view, name="pipeline-detail"),
    path("pipelines/<str:pipeline_id>/cancel/", pipeline_views.pipeline_cancel_view, name="pipeline-cancel"),
    path("pipelines/<str:pipeline_id>/retry/", pipeline_views.pipeline_retry_view, name="pipeline-retry"),
    path("sweeps/", sweep_views.sweep_list_view, name="sweeps"),
    path("sweeps/<str:sweep_id>/", sweep_views.sweep_detail_view, name="sweep-detail"),
    path("sweeps/<str:sweep_id>/cancel/", sweep_views.sweep_cancel_view, name="sweep-cancel"),
    path("queue/", task_views.queue_view, name="queue"),
    path("cluster/", task_views.cluster_view, name="cluster"),
    path("usage/", usage_views.usage_view, name="usage"),
]
