"""The account page's SSH keys: add and delete (the page lists them: accounts/web/views.py)."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect
from django.urls import path
from django.views.decorators.http import require_POST

from accounts.sshkeys.api import SshKeyAddSerializer
from accounts.sshkeys.models import KeyRefused, SshKey
from accounts.users import request_user
from common.pages import report_errors

BACK = "/account/#ssh-keys"


@login_required
@require_POST
def ssh_key_add_view(request: HttpRequest) -> HttpResponse:
    # The API's serializer and model method: one set of rules for the page and the API.
    form = SshKeyAddSerializer(
        data={"name": request.POST.get("name", ""), "public_key": request.POST.get("public_key", "")}
    )
    if not form.is_valid():
        report_errors(request, form.errors)
        return redirect(BACK)
    try:
        key = SshKey.register(request_user(request), **form.validated_data)
    except KeyRefused as exc:
        messages.error(request, f"{exc.field}: {exc.message}")
        return redirect(BACK)
    messages.success(request, f"SSH key {key.name} added ({key.fingerprint}): sign in to SFTP with it.")
    return redirect(BACK)


@login_required
@require_POST
def ssh_key_delete_view(request: HttpRequest, pk: int) -> HttpResponse:
    key = get_object_or_404(SshKey, user=request_user(request), pk=pk)
    key.delete()
    messages.success(request, f"SSH key {key.name} deleted: it signs no one in any more.")
    return redirect(BACK)


urlpatterns = [
    path("", ssh_key_add_view, name="account-ssh-key-add"),
    path("<int:pk>/delete/", ssh_key_delete_view, name="account-ssh-key-delete"),
]
