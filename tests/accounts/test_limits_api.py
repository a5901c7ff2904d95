"""PATCH /api/v2/users/<name>: an admin sets a user's limits and fair-share weight; GET shows them."""

from __future__ import annotations

import pytest
from drf_spectacular.generators import SchemaGenerator
from rest_framework.test import APIClient

from accounts.bounds import LIMIT_MAX
from accounts.models import UserLimits
from tests.accounts.helpers import assert_error

pytestmark = pytest.mark.django_db

UNSET = {"value": None, "effective": 0}


@pytest.fixture
def api(admin, client_for) -> APIClient:
    return client_for(admin)


@pytest.fixture
def site_limits(settings) -> None:
    settings.ARGUS_USER_MAX_RUNNING_GPUS = 16
    settings.ARGUS_USER_MAX_RUNNING_TASKS = 4
    settings.ARGUS_USER_MAX_QUEUED_TASKS = 10


def test_an_admin_sets_limits_and_the_answer_shows_them_set_and_in_effect(api, alice, site_limits):
    response = api.patch(
        "/api/v2/users/alice", {"max_running_gpus": 8, "max_queued_tasks": 0, "fair_share_weight": 2.5}, format="json"
    )
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["username"] == "alice"
    assert body["limits"] == {
        "max_running_gpus": {"value": 8, "effective": 8},
        "max_running_tasks": {"value": None, "effective": 4},
        "max_queued_tasks": {"value": 0, "effective": 0},
        "fair_share_weight": 2.5,
    }
    row = UserLimits.objects.get(user=alice)
    assert (row.max_running_gpus, row.max_running_tasks, row.max_queued_tasks, row.fair_share_weight) == (
        8,
        None,
        0,
        2.5,
    )


def test_a_patch_changes_only_the_fields_it_sends(api, alice):
    UserLimits.objects.create(user=alice, max_running_gpus=8, max_running_tasks=2, fair_share_weight=3.0)
    response = api.patch("/api/v2/users/alice", {"max_running_tasks": 5}, format="json")
    assert response.status_code == 200
    row = UserLimits.objects.get(user=alice)
    assert (row.max_running_gpus, row.max_running_tasks, row.fair_share_weight) == (8, 5, 3.0)


def test_null_sends_a_limit_back_to_the_site_default(api, alice, site_limits):
    UserLimits.objects.create(user=alice, max_running_gpus=2)
    response = api.patch("/api/v2/users/alice", {"max_running_gpus": None}, format="json")
    assert response.status_code == 200
    assert response.json()["limits"]["max_running_gpus"] == {"value": None, "effective": 16}
    assert UserLimits.objects.get(user=alice).max_running_gpus is None


def test_an_empty_patch_changes_nothing(api, alice):
    response = api.patch("/api/v2/users/alice", {}, format="json")
    assert response.status_code == 200
    assert response.json()["limits"]["max_queued_tasks"] == UNSET
    assert not UserLimits.objects.exists()


def test_get_and_me_show_the_limits(api, alice, client_for, site_limits):
    UserLimits.objects.create(user=alice, max_queued_tasks=3, fair_share_weight=0.5)
    for response in (api.get("/api/v2/users/alice"), client_for(alice).get("/api/v2/me")):
        limits = response.json()["limits"]
        assert limits["max_queued_tasks"] == {"value": 3, "effective": 3}
        assert limits["max_running_gpus"] == {"value": None, "effective": 16}
        assert limits["fair_share_weight"] == 0.5


def test_the_user_list_reads_the_limits_in_the_same_query(api, alice, bob, django_assert_max_num_queries):
    UserLimits.objects.create(user=alice, max_running_tasks=1)
    UserLimits.objects.create(user=bob, max_running_tasks=2)
    api.get("/api/v2/me")  # the token's first use is recorded; that write is not the list's
    with django_assert_max_num_queries(3):  # the token, the count, the page
        response = api.get("/api/v2/users")
    shown = {user["username"]: user["limits"]["max_running_tasks"]["value"] for user in response.json()["results"]}
    assert shown == {"admin": None, "alice": 1, "bob": 2}


def test_an_admin_grants_and_withdraws_high_priority(api, alice, client_for):
    response = api.patch("/api/v2/users/alice", {"can_use_high_priority": True}, format="json")
    assert response.status_code == 200, response.content
    assert response.json()["can_use_high_priority"] is True
    assert UserLimits.objects.get(user=alice).can_use_high_priority is True
    for shown in (api.get("/api/v2/users/alice"), client_for(alice).get("/api/v2/me")):
        assert shown.json()["can_use_high_priority"] is True
    api.patch("/api/v2/users/alice", {"can_use_high_priority": False}, format="json")
    assert api.get("/api/v2/users/alice").json()["can_use_high_priority"] is False


def test_get_and_me_show_high_priority_as_in_effect(api, admin, alice, client_for):
    # Not granted by default; an admin always has it.
    assert api.get("/api/v2/users/alice").json()["can_use_high_priority"] is False
    assert client_for(alice).get("/api/v2/me").json()["can_use_high_priority"] is False
    assert api.get("/api/v2/users/admin").json()["can_use_high_priority"] is True
    assert api.get("/api/v2/me").json()["can_use_high_priority"] is True
    listed = {user["username"]: user["can_use_high_priority"] for user in api.get("/api/v2/users").json()["results"]}
    assert listed == {"admin": True, "alice": False}


def test_non_admins_may_not_grant_themselves_high_priority(alice, client_for):
    response = client_for(alice).patch("/api/v2/users/alice", {"can_use_high_priority": True}, format="json")
    assert_error(response, 403, "permission")
    assert not UserLimits.objects.exists()


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"max_running_gpus": -1}, "max_running_gpus"),
        ({"max_running_gpus": LIMIT_MAX + 1}, "max_running_gpus"),
        ({"max_running_tasks": "5"}, "max_running_tasks"),
        ({"max_running_tasks": 2.5}, "max_running_tasks"),
        ({"max_queued_tasks": True}, "max_queued_tasks"),
        ({"max_queued_tasks": [1]}, "max_queued_tasks"),
        ({"fair_share_weight": 0}, "fair_share_weight"),
        ({"fair_share_weight": -1.5}, "fair_share_weight"),
        ({"fair_share_weight": "2"}, "fair_share_weight"),
        ({"fair_share_weight": True}, "fair_share_weight"),
        ({"fair_share_weight": None}, "fair_share_weight"),
        ({"can_use_high_priority": "true"}, "can_use_high_priority"),
        ({"can_use_high_priority": 1}, "can_use_high_priority"),
        ({"can_use_high_priority": None}, "can_use_high_priority"),
        ({"max_queud_tasks": 5}, "max_queud_tasks"),
        ({"is_staff": True}, "is_staff"),
    ],
)
def test_a_bad_value_or_unknown_field_is_a_400_naming_it(api, alice, body, field):
    error = assert_error(api.patch("/api/v2/users/alice", body, format="json"), 400, fields=(field,))
    assert error["code"] == "invalid"
    assert not UserLimits.objects.exists()
    alice.refresh_from_db()
    assert not alice.is_staff


def test_an_unknown_field_is_named_beside_a_bad_value(api, alice):
    body = {"max_running_gpus": -1, "colour": "blue", "fair_share_weight": 2.0}
    error = assert_error(api.patch("/api/v2/users/alice", body, format="json"), 400)
    assert set(error["fields"]) == {"max_running_gpus", "colour"}
    assert "Unknown field" in error["fields"]["colour"][0]
    assert not UserLimits.objects.exists()


def test_an_infinite_weight_is_a_400(api, alice):
    # JSON has no infinity, but 1e400 reads as one in Python.
    response = api.patch("/api/v2/users/alice", '{"fair_share_weight": 1e400}', content_type="application/json")
    assert_error(response, 400, fields=("fair_share_weight",))


def test_a_body_that_is_not_an_object_is_a_400(api, alice):
    assert_error(api.patch("/api/v2/users/alice", [1, 2], format="json"), 400)
    assert not UserLimits.objects.exists()


def test_non_admins_may_not_set_limits_even_their_own(alice, client_for):
    response = client_for(alice).patch("/api/v2/users/alice", {"max_queued_tasks": 0}, format="json")
    assert_error(response, 403, "permission")
    assert not UserLimits.objects.exists()


def test_an_unknown_user_is_a_404(api):
    assert_error(api.patch("/api/v2/users/nobody", {"max_queued_tasks": 1}, format="json"), 404)
    assert not UserLimits.objects.exists()


def test_put_is_not_offered(api, alice):
    assert_error(api.put("/api/v2/users/alice", {"max_queued_tasks": 1}, format="json"), 405)


def test_the_schema_documents_high_priority_on_the_user_and_in_the_patch():
    schema = SchemaGenerator().get_schema(public=True)
    components = schema["components"]["schemas"]
    user = components["User"]
    assert user["properties"]["can_use_high_priority"]["type"] == "boolean"
    assert "can_use_high_priority" in user["required"]
    operation = schema["paths"]["/api/v2/users/{username}"]["patch"]
    ref = operation["requestBody"]["content"]["application/json"]["schema"]["$ref"]
    assert components[ref.rsplit("/", 1)[1]]["properties"]["can_use_high_priority"]["type"] == "boolean"
    submit = schema["paths"]["/api/v2/tasks"]["post"]
    assert "403" in submit["responses"] and "priority_not_allowed" in submit["description"]


def test_the_schema_documents_the_patch_and_its_closed_body():
    schema = SchemaGenerator().get_schema(public=True)
    operation = schema["paths"]["/api/v2/users/{username}"]["patch"]
    assert {"200", "400", "401", "403", "404"} <= set(operation["responses"])
    ref = operation["requestBody"]["content"]["application/json"]["schema"]["$ref"]
    body = schema["components"]["schemas"][ref.rsplit("/", 1)[1]]
    assert body["additionalProperties"] is False
    assert "required" not in body
    assert set(body["properties"]) == {
        *("max_running_gpus", "max_running_tasks", "max_queued_tasks"),
        *("fair_share_weight", "can_use_high_priority", "group", "disk_quota_bytes"),
    }
    quota = body["properties"]["disk_quota_bytes"]
    assert (quota["type"], quota["minimum"], quota["maximum"], quota["nullable"]) == ("integer", 0, 2**63 - 1, True)
    group = body["properties"]["group"]
    assert (group["type"], group["nullable"], group["pattern"]) == ("string", True, "^[a-z][a-z0-9_-]{0,31}$")
    gpus = body["properties"]["max_running_gpus"]
    assert (gpus["type"], gpus["minimum"], gpus["maximum"], gpus["nullable"]) == ("integer", 0, LIMIT_MAX, True)
    weight = body["properties"]["fair_share_weight"]
    assert (weight["type"], weight["minimum"], weight["exclusiveMinimum"]) == ("number", 0, True)
    assert "nullable" not in weight
    user = schema["components"]["schemas"]["User"]
    assert "limits" in user["properties"]
