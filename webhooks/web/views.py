"""The account page's webhook forms: add (the secret is shown on the answer, once) and delete."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_POST

from accounts.users import request_user
from common.pages import report_errors
from webhooks.api.serializers import WebhookSerializer
from webhooks.models import Webhook


@never_cache  # the answer carries the secret: no cache, no back button copy
@login_required
@require_POST
def webhook_create_view(request: HttpRequest) -> HttpResponse:
    # The API's serializer: one set of rules (URL policy, events) for the page and the API.
    data = {"url": request.POST.get("url", ""), "events": request.POST.getlist("events")}
    serializer = WebhookSerializer(data=data, context={"user": request.user})
    if not serializer.is_valid():
        report_errors(request, serializer.errors)
        return redirect("/account/#webhooks")
    hook = Webhook.create(user=request_user(request), **serializer.validated_data)
    return render(request, "webhooks/created.html", {"webhook": hook}, status=201)


@login_required
@require_POST
def webhook_delete_view(request: HttpRequest, pk: int) -> HttpResponse:
    hook = get_object_or_404(Webhook, pk=pk, user=request.user)
    hook.delete()
    messages.success(request, f"Webhook to {hook.url} deleted.")
    return redirect("/account/#webhooks")
