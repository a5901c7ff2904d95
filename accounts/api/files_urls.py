from __future__ import annotations

from django.urls import path

from accounts.api.files import FileDownloadView, FilesView, FolderView

app_name = "files-api"

urlpatterns = [
    path("files", FilesView.as_view(), name="api-files"),
    path("files/download", FileDownloadView.as_view(), name="api-files-download"),
    path("files/mkdir", FolderView.as_view(), name="api-files-mkdir"),
]
