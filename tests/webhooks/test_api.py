"""/api/v2/me/webhooks: register (secret shown once), list, delete, deliveries."""

from __future__ import annotations

from typing import Any

import pytest
from django.urls import include, path
from drf_spectacular.generators import SchemaGenerator

from tasks.choices import Role, TaskState
from tests.accounts.test_schema import conforms, documented
from webhooks.models import MAX_WEBHOOKS_PER_USER, Delivery, DeliveryStatus, Webhook

pytestmark = pytest.mark.django_db
URL = "/api/v2/me/webhooks"


@pytest.fixture(scope="module")
def schema() -> dict[str, Any]:
    return SchemaGenerator(patterns=[path("api/v2/", include("webhooks.api.urls"))]).get_schema(public=True)


def checked(schema: dict[str, Any], method: str, template: str, response: Any) -> Any:
    """The response's JSON, after checking that the schema documents it as it is."""
    spec = documented(schema, method, template, response.status_code)
    conforms(response.json(), spec, schema, f"{method.upper()} {template} {response.status_code}")
    return response.json()


def test_it_registers_a_webhook_and_shows_its_secret_once(schema, alice, client_for):
    api = client_for(alice)
    response = api.post(URL, {"url": "http://127.0.0.1:9/hook", "events": ["FAILED", "SUCCEEDED"]}, format="json")
    assert response.status_code == 201, response.content
    body = checked(schema, "post", URL, response)
    hook = Webhook.objects.get(user=alice)
    assert body["secret"] == hook.secret and len(hook.secret) == 64
    assert body["events"] == ["SUCCEEDED", "FAILED"]
    assert response["Cache-Control"] == "no-store"

    listed = checked(schema, "get", URL, api.get(URL))
    assert [item["id"] for item in listed["results"]] == [hook.pk]
    assert "secret" not in listed["results"][0]
    assert "secret" not in api.get(f"{URL}/{hook.pk}").json()


def test_it_names_the_wrong_fields(schema, alice, client_for, settings):
    settings.ARGUS_WEBHOOK_ALLOWED_HOSTS = []
    response = client_for(alice).post(URL, {"url": "http://10.0.0.8/x", "events": ["DONE"]}, format="json")
    assert response.status_code == 400
    error = checked(schema, "post", URL, response)["error"]
    assert set(error["fields"]) == {"url", "events"}
    assert "private address" in error["fields"]["url"][0]
    assert "ARGUS_WEBHOOK_ALLOWED_HOSTS" in error["fields"]["url"][0]
    response = client_for(alice).post(URL, {"url": "http://93.184.215.14/x", "events": []}, format="json")
    assert response.status_code == 400 and set(response.json()["error"]["fields"]) == {"events"}
    assert not Webhook.objects.exists()


def test_it_hides_other_users_webhooks(schema, alice, bob, client_for):
    bobs = Webhook.create(user=bob, url="http://127.0.0.1:9/bob", events=["FAILED"])
    api = client_for(alice)
    assert api.get(URL).json()["count"] == 0
    for method, url in [
        ("get", f"{URL}/{bobs.pk}"),
        ("delete", f"{URL}/{bobs.pk}"),
        ("get", f"{URL}/{bobs.pk}/deliveries"),
    ]:
        response = getattr(api, method)(url)
        assert response.status_code == 404, (method, url)
    assert Webhook.objects.filter(pk=bobs.pk).exists()
    assert client_for(None).get(URL).status_code == 401


def test_it_deletes_a_webhook(alice, client_for):
    hook = Webhook.create(user=alice, url="http://127.0.0.1:9/hook", events=["FAILED"])
    response = client_for(alice).delete(f"{URL}/{hook.pk}")
    assert response.status_code == 204
    assert not Webhook.objects.exists()


def test_it_lists_deliveries_with_status_and_attempts(schema, alice, client_for, running_task):
    hook = Webhook.create(user=alice, url="http://127.0.0.1:9/hook", events=["SUCCEEDED"])
    task = running_task(alice)
    task.transition(TaskState.SUCCEEDED, role=Role.SCHEDULER, actor="scheduler")
    Delivery.objects.update(attempts=2, response_code=500, error="HTTP 500")
    template = f"{URL}/{{id}}/deliveries"
    body = checked(schema, "get", template, client_for(alice).get(f"{URL}/{hook.pk}/deliveries"))
    [row] = body["results"]
    assert row["task_id"] == task.task_id and row["event_name"] == "SUCCEEDED"
    assert (row["status"], row["attempts"], row["response_code"]) == (DeliveryStatus.PENDING, 2, 500)


def test_a_user_has_a_bounded_number_of_webhooks(schema, alice, bob, client_for):
    for index in range(MAX_WEBHOOKS_PER_USER):
        Webhook.create(user=alice, url=f"http://127.0.0.1:9/{index}", events=["FAILED"])
    response = client_for(alice).post(URL, {"url": "http://127.0.0.1:9/one-more", "events": ["FAILED"]}, format="json")
    assert response.status_code == 400
    assert checked(schema, "post", URL, response)["error"]["message"] == (
        f"You have {MAX_WEBHOOKS_PER_USER} webhooks already; delete one first."
    )
    response = client_for(bob).post(URL, {"url": "http://127.0.0.1:9/bob", "events": ["FAILED"]}, format="json")
    assert response.status_code == 201
