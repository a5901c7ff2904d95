"""GET and POST /api/v2/admission: anyone signed in reads the pause, only an admin changes it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import User
from drf_spectacular.generators import SchemaGenerator
from rest_framework.test import APIClient

from tasks.pause import AdmissionControl
from tests.accounts.helpers import assert_error
from tests.accounts.test_schema import conforms, documented

pytestmark = pytest.mark.django_db

URL = "/api/v2/admission"
ClientFor = Callable[[User | None], APIClient]


@pytest.fixture(scope="module")
def schema() -> dict[str, Any]:
    return SchemaGenerator().get_schema(public=True)


def test_a_user_reads_that_admission_is_open(alice: User, client_for: ClientFor) -> None:
    response = client_for(alice).get(URL)
    assert response.status_code == 200
    assert response.json() == {"paused": False, "reason": "", "changed_by": "", "changed_at": None}


def test_a_user_reads_a_pause_with_its_reason(alice: User, client_for: ClientFor) -> None:
    AdmissionControl.set(True, "maintenance", "admin:root")
    body = client_for(alice).get(URL).json()
    assert (body["paused"], body["reason"], body["changed_by"]) == (True, "maintenance", "admin:root")
    assert body["changed_at"] is not None


def test_an_admin_pauses_and_resumes(admin: User, client_for: ClientFor) -> None:
    api = client_for(admin)
    response = api.post(URL, {"paused": True, "reason": "GPU driver upgrade"}, format="json")
    assert response.status_code == 200, response.content
    body = response.json()
    assert (body["paused"], body["reason"], body["changed_by"]) == (True, "GPU driver upgrade", "api:admin")
    state = AdmissionControl.current()
    assert (state.paused, state.reason, state.changed_by) == (True, "GPU driver upgrade", "api:admin")

    response = api.post(URL, {"paused": False}, format="json")
    assert response.status_code == 200, response.content
    assert (response.json()["paused"], response.json()["reason"]) == (False, "")
    assert AdmissionControl.current().paused is False


def test_a_pause_without_a_reason_says_who_paused(admin: User, client_for: ClientFor) -> None:
    response = client_for(admin).post(URL, {"paused": True}, format="json")
    assert response.json()["reason"] == "paused by api:admin"


def test_a_user_may_not_pause(alice: User, client_for: ClientFor) -> None:
    assert_error(client_for(alice).post(URL, {"paused": True, "reason": "mine"}, format="json"), 403)
    assert not AdmissionControl.objects.exists()


def test_anonymous_may_neither_read_nor_pause(client_for: ClientFor) -> None:
    assert_error(client_for(None).get(URL), 401)
    assert_error(client_for(None).post(URL, {"paused": True}, format="json"), 401)
    assert not AdmissionControl.objects.exists()


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({}, "paused"),
        ({"reason": "no switch"}, "paused"),
        ({"paused": None}, "paused"),
        ({"paused": "yes"}, "paused"),
        ({"paused": 1}, "paused"),
        ({"paused": True, "reason": "x" * 501}, "reason"),
        ({"paused": True, "reason": 5}, "reason"),
        ({"paused": True, "reason": None}, "reason"),
    ],
)
def test_a_bad_body_is_a_400_naming_the_field(
    admin: User, client_for: ClientFor, body: dict[str, Any], field: str
) -> None:
    assert_error(client_for(admin).post(URL, body, format="json"), 400, fields=(field,))
    assert not AdmissionControl.objects.exists()


def test_a_body_that_is_not_an_object_is_a_400(admin: User, client_for: ClientFor) -> None:
    assert_error(client_for(admin).post(URL, [True], format="json"), 400)
    assert_error(client_for(admin).post(URL, '"paused"', content_type="application/json"), 400)


def test_every_answer_is_the_one_the_schema_documents(
    schema: dict[str, Any], admin: User, alice: User, client_for: ClientFor
) -> None:
    calls = [
        ("get", None, client_for(alice)),
        ("post", {"paused": True}, client_for(admin)),
        ("get", None, client_for(alice)),
        ("post", {"paused": True}, client_for(alice)),
        ("post", {"paused": "no"}, client_for(admin)),
        ("get", None, client_for(None)),
    ]
    for method, body, api in calls:
        response = getattr(api, method)(URL, body, format="json")
        spec = documented(schema, method, URL, response.status_code)
        conforms(response.json(), spec, schema, f"{method.upper()} {URL} {response.status_code}")
