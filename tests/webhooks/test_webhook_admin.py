from __future__ import annotations

import pytest
from django.test import Client

from tasks.choices import Role, TaskState
from webhooks.models import Delivery, Webhook

pytestmark = pytest.mark.django_db


def test_operators_see_webhooks_and_deliveries_but_no_secret(client: Client, admin, alice, running_task) -> None:
    hook = Webhook.create(user=alice, url="http://127.0.0.1:9/hook", events=["SUCCEEDED"])
    task = running_task(alice)
    task.transition(TaskState.SUCCEEDED, role=Role.SCHEDULER, actor="scheduler")
    client.force_login(admin)
    deliveries = client.get("/admin/webhooks/delivery/?status__exact=PENDING")
    assert deliveries.status_code == 200 and task.task_id in deliveries.content.decode()
    page = client.get(f"/admin/webhooks/webhook/{hook.pk}/change/")
    assert page.status_code == 200 and hook.secret not in page.content.decode()
    delivery = client.get(f"/admin/webhooks/delivery/{Delivery.objects.get().pk}/change/")
    assert delivery.status_code == 200 and hook.secret not in delivery.content.decode()
