"""The account page's webhooks in Chromium: add one, copy its secret once, delete it."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, expect

from tasks.choices import Role, TaskState
from tests.web.helpers import shot
from webhooks.models import Delivery, DeliveryStatus, Webhook

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_it_adds_a_webhook_shows_its_secret_once_and_deletes_it(signed_in_page: Page, settings, make_task) -> None:
    settings.ARGUS_WEBHOOK_ALLOWED_HOSTS = ["127.0.0.1"]
    page = signed_in_page
    page.goto("/account/")
    page.get_by_label("URL").fill("http://127.0.0.1:9/hook")
    page.get_by_label("RETRYING").check()
    for unwanted in (
        "CANCELED",
        "PIPELINE_SUCCEEDED",
        "PIPELINE_FAILED",
        "SWEEP_SUCCEEDED",
        "SWEEP_FAILED",
    ):  # checked by default
        page.get_by_label(unwanted, exact=True).uncheck()
    page.get_by_role("button", name="Add webhook").click()
    secret = page.locator("[data-secret]").inner_text()
    hook = Webhook.objects.get(user__username="alice")
    assert secret == hook.secret and hook.events == ["SUCCEEDED", "FAILED", "RETRYING"]
    shot(page, "webhook-created")

    task = make_task(hook.user)
    task.transition(TaskState.CANCELED, actor="api:alice")  # not wanted: no delivery
    task = make_task(hook.user)
    for state in (TaskState.SUBMITTING, TaskState.SUBMITTED, TaskState.RUNNING, TaskState.FAILED):
        task.transition(state, role=Role.SCHEDULER, actor="scheduler")
    Delivery.objects.update(status=DeliveryStatus.PENDING, attempts=2, error="HTTP 502 Bad Gateway")

    page.get_by_role("link", name="Back to your account").click()
    row = page.locator(f"[data-webhook-row='{hook.pk}']")
    expect(row).to_contain_text("SUCCEEDED, FAILED, RETRYING")
    [delivery] = Delivery.objects.all()
    sent = page.locator(f"[data-delivery-row='{delivery.pk}']")
    expect(sent).to_contain_text(task.task_id)
    expect(sent).to_contain_text("Pending")
    expect(sent).to_contain_text("HTTP 502 Bad Gateway")
    assert secret not in page.content()
    shot(page, "account-webhooks")

    row.get_by_role("button", name=re.compile("Delete webhook")).click()
    page.locator("#confirm-dialog").get_by_role("button", name="Delete").click()
    expect(page.get_by_role("status")).to_contain_text("deleted")
    assert not Webhook.objects.exists()


def test_a_refused_url_is_explained(signed_in_page: Page, settings) -> None:
    settings.ARGUS_WEBHOOK_ALLOWED_HOSTS = []
    page = signed_in_page
    page.goto("/account/")
    page.get_by_label("URL").fill("http://10.0.0.3/hook")
    page.get_by_role("button", name="Add webhook").click()
    expect(page.get_by_role("alert")).to_contain_text("a private address")
    assert not Webhook.objects.exists()
