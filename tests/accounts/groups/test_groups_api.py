"""/api/v2/groups: admins create, list, show, change and delete groups; anyone else sees only
their own. PATCH /api/v2/users/NAME puts a user in a group; the user API and /me show it."""

from __future__ import annotations

import pytest
from django.contrib.admin.models import ADDITION, CHANGE, DELETION, LogEntry
from django.contrib.contenttypes.models import ContentType
from django.db import connection
from django.db.models import Model
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from accounts.bounds import LIMIT_MAX
from accounts.groups.models import Membership, QuotaGroup
from accounts.groups.rules import deletion_refusal
from tasks.choices import ACTIVE_STATES, TaskState
from tests.accounts.helpers import assert_error
from tests.tasks.attempt_data import attempt_of

pytestmark = pytest.mark.django_db

NLP = {"name": "nlp", "nominal_gpus": 8, "borrow_limit_gpus": 4, "lend_limit_gpus": None, "fair_share_weight": 2.0}


@pytest.fixture
def api(admin, client_for) -> APIClient:
    return client_for(admin)


def history(obj: Model) -> list[tuple[int, str, str]]:
    """The admin's history of ``obj``: (flag, who, message), oldest first."""
    kind = ContentType.objects.get_for_model(type(obj))
    entries = LogEntry.objects.filter(content_type=kind, object_id=str(obj.pk)).order_by("action_time", "pk")
    return [(entry.action_flag, entry.user.username, entry.change_message) for entry in entries]


# --- Create, list, show, change, delete ------------------------------------------------


def test_an_admin_creates_a_group_and_the_answer_shows_it(api):
    response = api.post("/api/v2/groups", NLP, format="json")
    assert response.status_code == 201, response.content
    body = response.json()
    assert {key: body[key] for key in NLP} == NLP
    assert body["members"] == []
    assert response["Location"].endswith("/api/v2/groups/nlp")
    group = QuotaGroup.objects.get(name="nlp")
    assert (group.nominal_gpus, group.borrow_limit_gpus, group.lend_limit_gpus, group.fair_share_weight) == (
        8,
        4,
        None,
        2.0,
    )
    [(flag, who, message)] = history(group)
    assert flag == ADDITION and who == "admin" and "nominal_gpus 8" in message


def test_a_group_created_with_its_share_alone_borrows_and_lends_without_limit(api):
    response = api.post("/api/v2/groups", {"name": "vision", "nominal_gpus": 0}, format="json")
    assert response.status_code == 201, response.content
    body = response.json()
    assert (body["borrow_limit_gpus"], body["lend_limit_gpus"], body["fair_share_weight"]) == (None, None, 1.0)


def test_an_admin_lists_every_group_with_its_members(api, make_group, alice, bob):
    make_group("vision", bob)
    make_group("nlp", alice)
    response = api.get("/api/v2/groups")
    assert response.status_code == 200
    assert [(group["name"], group["members"]) for group in response.json()] == [
        ("nlp", ["alice"]),
        ("vision", ["bob"]),
    ]


def test_the_list_costs_the_same_queries_whatever_the_number_of_groups(api, make_group, make_user):
    make_group("a", make_user("u1"))
    api.get("/api/v2/groups")  # the token's first use is written once: not a cost of the list
    with CaptureQueriesContext(connection) as one:
        api.get("/api/v2/groups")
    make_group("b", make_user("u2"), make_user("u3"))
    make_group("c")
    with CaptureQueriesContext(connection) as three:
        assert len(api.get("/api/v2/groups").json()) == 3
    assert len(three) == len(one)


def test_an_admin_shows_a_group(api, make_group, alice):
    make_group("nlp", alice, nominal_gpus=4)
    response = api.get("/api/v2/groups/nlp")
    assert response.status_code == 200
    assert (response.json()["nominal_gpus"], response.json()["members"]) == (4, ["alice"])


def test_an_unknown_group_is_a_404(api):
    assert_error(api.get("/api/v2/groups/nope"), 404)
    assert_error(api.patch("/api/v2/groups/nope", {"nominal_gpus": 1}, format="json"), 404)
    assert_error(api.delete("/api/v2/groups/nope"), 404)


def test_a_patch_changes_only_what_it_sends_and_records_what_changed(api, make_group):
    group = make_group("nlp", nominal_gpus=8, borrow_limit_gpus=2)
    response = api.patch("/api/v2/groups/nlp", {"borrow_limit_gpus": None, "nominal_gpus": 8}, format="json")
    assert response.status_code == 200, response.content
    assert (response.json()["nominal_gpus"], response.json()["borrow_limit_gpus"]) == (8, None)
    group.refresh_from_db()
    assert (group.nominal_gpus, group.borrow_limit_gpus, group.lend_limit_gpus) == (8, None, None)
    [(flag, who, message)] = history(group)
    # nominal_gpus was sent unchanged: only what changed is recorded.
    assert (flag, who) == (CHANGE, "admin") and message == "Changed group nlp: borrow_limit_gpus 2 -> None"


def test_a_patch_that_changes_nothing_records_nothing(api, make_group):
    group = make_group("nlp", nominal_gpus=8)
    assert api.patch("/api/v2/groups/nlp", {"nominal_gpus": 8}, format="json").status_code == 200
    assert history(group) == []


def test_a_group_is_not_replaced_with_put(api, make_group):
    make_group("nlp")
    assert_error(api.put("/api/v2/groups/nlp", NLP, format="json"), 405)


def test_an_admin_deletes_an_empty_group_and_it_is_recorded(api, make_group):
    group = make_group("nlp")
    pk = group.pk
    assert api.delete("/api/v2/groups/nlp").status_code == 204
    assert not QuotaGroup.objects.exists()
    entry = LogEntry.objects.get(object_id=str(pk), content_type=ContentType.objects.get_for_model(QuotaGroup))
    assert (entry.action_flag, entry.user.username, entry.change_message) == (DELETION, "admin", "Deleted group nlp")


def test_a_group_with_members_is_not_deleted(api, make_group, alice, bob):
    make_group("nlp", bob, alice)
    error = assert_error(api.delete("/api/v2/groups/nlp"), 409, "Group nlp cannot be deleted: it has 2 members")
    assert "(alice, bob)" in error["message"] and "live task" not in error["message"]
    assert QuotaGroup.objects.filter(name="nlp").exists()


@pytest.mark.parametrize(
    "state",
    [
        TaskState.WAITING,
        TaskState.QUEUED,
        TaskState.PENDING_RESOURCES,
        TaskState.SUBMITTING,
        TaskState.SUBMITTED,
        TaskState.RUNNING,
    ],
)
def test_a_group_with_live_tasks_is_not_deleted_and_the_409_says_so(api, make_group, alice, make_task, state):
    nlp = make_group("nlp", alice)
    task = make_task(alice, state=state)
    if state in ACTIVE_STATES:  # on Ray: admitted, in its owner's group (tasks.group_holds)
        attempt_of(task, 4, group=nlp)
    make_task(alice, state=TaskState.SUCCEEDED)  # ended: holds nothing
    error = assert_error(api.delete("/api/v2/groups/nlp"), 409, "it has 1 member (alice)")
    assert "1 live task (not yet succeeded, failed or canceled) belong to it" in error["message"]


@pytest.mark.parametrize("state", [TaskState.SUCCEEDED, TaskState.FAILED, TaskState.CANCELED])
def test_ended_tasks_do_not_hold_a_group(make_group, alice, make_task, state):
    group = make_group("nlp", alice)
    make_task(alice, state=state)
    assert deletion_refusal(group) == "Group nlp cannot be deleted: it has 1 member (alice)."


def test_once_its_members_are_moved_out_a_group_is_deleted(api, make_group, alice):
    make_group("nlp", alice)
    assert api.patch("/api/v2/users/alice", {"group": None}, format="json").status_code == 200
    assert api.delete("/api/v2/groups/nlp").status_code == 204


# --- Bad values: a 400 naming the field ------------------------------------------------


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("name", "NLP"),
        ("name", "1nlp"),
        ("name", "nlp team"),
        ("name", "n" * 33),
        ("name", "nlp\n"),
        ("name", ""),
        ("name", 5),
        ("nominal_gpus", -1),
        ("nominal_gpus", 1.5),
        ("nominal_gpus", "8"),
        ("nominal_gpus", None),
        ("nominal_gpus", LIMIT_MAX + 1),
        ("borrow_limit_gpus", -1),
        ("borrow_limit_gpus", 2.5),
        ("lend_limit_gpus", -3),
        ("lend_limit_gpus", True),
        ("fair_share_weight", 0),
        ("fair_share_weight", -1.0),
        ("fair_share_weight", "2"),
        ("colour", "blue"),
    ],
)
def test_a_bad_value_on_create_is_a_400_naming_the_field(api, field, value):
    assert_error(api.post("/api/v2/groups", {**NLP, field: value}, format="json"), 400, fields=(field,))
    assert not QuotaGroup.objects.exists()


def test_a_group_without_its_share_is_a_400_naming_it(api):
    assert_error(api.post("/api/v2/groups", {"name": "nlp"}, format="json"), 400, fields=("nominal_gpus",))


def test_a_second_group_of_the_same_name_is_a_400_naming_it(api, make_group):
    make_group("nlp")
    error = assert_error(api.post("/api/v2/groups", NLP, format="json"), 400, fields=("name",))
    assert "already exists" in str(error["fields"]["name"])


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("nominal_gpus", -1),
        ("nominal_gpus", None),
        ("borrow_limit_gpus", -2),
        ("lend_limit_gpus", 0.5),
        ("fair_share_weight", 0),
        ("fair_share_weight", -0.5),
        ("name", "vision"),  # the name is the key: it does not change
    ],
)
def test_a_bad_value_on_change_is_a_400_naming_the_field(api, make_group, field, value):
    group = make_group("nlp", nominal_gpus=8)
    assert_error(api.patch("/api/v2/groups/nlp", {field: value}, format="json"), 400, fields=(field,))
    group.refresh_from_db()
    assert (group.name, group.nominal_gpus, group.fair_share_weight) == ("nlp", 8, 1.0)


# --- Who sees what, who writes --------------------------------------------------------


def test_a_user_sees_only_their_own_group(client_for, make_group, alice, bob):
    make_group("nlp", alice)
    make_group("vision", bob)
    mine = client_for(alice)
    assert [group["name"] for group in mine.get("/api/v2/groups").json()] == ["nlp"]
    assert mine.get("/api/v2/groups/nlp").json()["members"] == ["alice"]
    # Another group is as if it did not exist.
    assert_error(mine.get("/api/v2/groups/vision"), 404)


def test_a_user_in_no_group_sees_none(client_for, make_group, alice, bob):
    make_group("nlp", bob)
    assert client_for(alice).get("/api/v2/groups").json() == []
    assert_error(client_for(alice).get("/api/v2/groups/nlp"), 404)


def test_only_an_admin_writes(client_for, make_group, alice):
    make_group("nlp", alice)
    mine = client_for(alice)
    assert_error(mine.post("/api/v2/groups", {**NLP, "name": "mine"}, format="json"), 403)
    assert_error(mine.patch("/api/v2/groups/nlp", {"nominal_gpus": 64}, format="json"), 403)
    assert_error(mine.delete("/api/v2/groups/nlp"), 403)
    assert_error(mine.patch("/api/v2/users/alice", {"group": None}, format="json"), 403)
    assert QuotaGroup.objects.get(name="nlp").nominal_gpus == 8
    assert Membership.objects.filter(user=alice, group__name="nlp").exists()
    assert not QuotaGroup.objects.filter(name="mine").exists()


def test_anonymous_sees_nothing(client_for, make_group):
    make_group("nlp")
    assert_error(client_for(None).get("/api/v2/groups"), 401)
    assert_error(client_for(None).get("/api/v2/groups/nlp"), 401)


# --- A user's group ----------------------------------------------------------------------


def test_an_admin_puts_a_user_in_a_group_moves_them_and_takes_them_out(api, make_group, alice):
    make_group("nlp")
    make_group("vision")
    response = api.patch("/api/v2/users/alice", {"group": "nlp"}, format="json")
    assert response.status_code == 200, response.content
    assert response.json()["group"] == "nlp"
    assert Membership.objects.get(user=alice).group.name == "nlp"
    assert api.patch("/api/v2/users/alice", {"group": "vision"}, format="json").json()["group"] == "vision"
    assert Membership.objects.get(user=alice).group.name == "vision"
    assert api.patch("/api/v2/users/alice", {"group": None}, format="json").json()["group"] is None
    assert not Membership.objects.exists()
    assert [message for _, _, message in history(alice)] == [
        "Changed the group of alice: no group -> nlp",
        "Changed the group of alice: nlp -> vision",
        "Changed the group of alice: vision -> no group",
    ]


def test_the_same_group_again_records_nothing(api, make_group, alice):
    make_group("nlp", alice)
    assert api.patch("/api/v2/users/alice", {"group": "nlp"}, format="json").json()["group"] == "nlp"
    assert history(alice) == []


def test_a_user_patch_sets_limits_and_group_together(api, make_group, alice):
    make_group("nlp")
    response = api.patch("/api/v2/users/alice", {"group": "nlp", "max_running_gpus": 4}, format="json")
    assert response.status_code == 200
    assert (response.json()["group"], response.json()["limits"]["max_running_gpus"]["value"]) == ("nlp", 4)


@pytest.mark.parametrize(
    ("value", "said"), [("nope", "There is no group named 'nope'"), ("NLP", "Invalid group name"), (3, "")]
)
def test_a_bad_group_for_a_user_is_a_400_naming_the_field(api, make_group, alice, value, said):
    make_group("nlp")
    error = assert_error(api.patch("/api/v2/users/alice", {"group": value}, format="json"), 400, fields=("group",))
    assert said in str(error["fields"]["group"])
    assert not Membership.objects.exists()


def test_the_user_api_and_me_show_the_group(api, client_for, make_group, alice, bob):
    make_group("nlp", alice)
    assert client_for(alice).get("/api/v2/me").json()["group"] == "nlp"
    assert client_for(bob).get("/api/v2/me").json()["group"] is None
    assert api.get("/api/v2/users/alice").json()["group"] == "nlp"
    listed = {user["username"]: user["group"] for user in api.get("/api/v2/users").json()["results"]}
    assert listed == {"admin": None, "alice": "nlp", "bob": None}


def test_a_group_deleted_after_the_request_named_it_is_a_400_not_a_database_error(api, make_group, alice, monkeypatch):
    from accounts.groups import fields

    group = make_group("nlp")
    resolve = fields.GroupRefField.to_internal_value

    def resolved_then_deleted(self, data):
        found = resolve(self, data)
        group.delete()  # another admin's delete, between the lookup and the write
        return found

    monkeypatch.setattr(fields.GroupRefField, "to_internal_value", resolved_then_deleted)
    error = assert_error(api.patch("/api/v2/users/alice", {"group": "nlp"}, format="json"), 400, fields=("group",))
    assert "The group nlp was deleted meanwhile." in str(error["fields"]["group"])
    assert not Membership.objects.exists()
