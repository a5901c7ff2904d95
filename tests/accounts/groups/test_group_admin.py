"""Groups in the admin site: listed with their quota and members, added and changed (and so
recorded in their history), deleted only when nothing holds them; a user's group on their page."""

from __future__ import annotations

import pytest
from django.contrib.admin.models import ADDITION, LogEntry
from django.test import Client

from accounts.groups.models import Membership, QuotaGroup
from tasks.choices import TaskState
from tests.accounts.helpers import page_form
from tests.tasks.attempt_data import attempt_of

pytestmark = pytest.mark.django_db

ADD = "/admin/accounts/quotagroup/add/"
LIST = "/admin/accounts/quotagroup/"


@pytest.fixture
def site(admin) -> Client:
    client = Client()
    client.force_login(admin)
    return client


def test_the_list_shows_each_groups_quota_and_member_count(site, make_group, alice, bob):
    make_group("nlp", alice, bob, nominal_gpus=16, borrow_limit_gpus=4)
    response = site.get(LIST)
    assert response.status_code == 200
    row = response.context["cl"].result_list[0]
    assert (row.name, row.nominal_gpus, row.borrow_limit_gpus, row.members) == ("nlp", 16, 4, 2)
    assert "quota group" in response.content.decode()  # apart from Django's own Groups


def test_an_admin_adds_a_group_and_it_is_in_its_history(site, admin):
    data = page_form(site, ADD, name="vision", nominal_gpus="8", lend_limit_gpus="2", fair_share_weight="1.5")
    response = site.post(ADD, data)
    assert response.status_code == 302, response.context and response.context["errors"]
    group = QuotaGroup.objects.get(name="vision")
    assert (group.nominal_gpus, group.borrow_limit_gpus, group.lend_limit_gpus, group.fair_share_weight) == (
        8,
        None,
        2,
        1.5,
    )
    entry = LogEntry.objects.get(object_id=str(group.pk))
    assert (entry.action_flag, entry.user) == (ADDITION, admin)


@pytest.mark.parametrize(
    ("field", "value"),
    [("name", "Vision"), ("nominal_gpus", "-1"), ("borrow_limit_gpus", "1.5"), ("fair_share_weight", "0")],
)
def test_a_bad_value_is_a_form_error_naming_the_field(site, field, value):
    data = page_form(site, ADD, **{"name": "vision", "nominal_gpus": "8", field: value})
    response = site.post(ADD, data)
    assert response.status_code == 200
    assert field in response.context["adminform"].form.errors
    assert not QuotaGroup.objects.exists()


def test_a_groups_name_does_not_change_on_its_page(site, make_group, alice):
    group = make_group("nlp", alice)
    url = f"/admin/accounts/quotagroup/{group.pk}/change/"
    html = site.get(url).content.decode()
    assert 'name="name"' not in html and "alice" in html  # its members, read only
    response = site.post(url, page_form(site, url, nominal_gpus="32"))
    assert response.status_code == 302, response.context and response.context["errors"]
    group.refresh_from_db()
    assert (group.name, group.nominal_gpus) == ("nlp", 32)


def test_an_empty_group_is_deleted(site, make_group):
    group = make_group("nlp")
    response = site.post(f"/admin/accounts/quotagroup/{group.pk}/delete/", {"post": "yes"})
    assert response.status_code == 302
    assert not QuotaGroup.objects.exists()


def test_a_group_with_members_or_live_tasks_is_not_deleted_and_the_page_says_why(site, make_group, alice, make_task):
    group = make_group("nlp", alice)
    attempt_of(make_task(alice, state=TaskState.RUNNING), 4, group=group)  # admitted in nlp
    url = f"/admin/accounts/quotagroup/{group.pk}/delete/"
    response = site.post(url, {"post": "yes"})
    assert response.status_code == 200
    html = response.content.decode()
    assert "it has 1 member (alice)" in html and "1 live task" in html
    assert QuotaGroup.objects.filter(pk=group.pk).exists()


def test_the_bulk_delete_refuses_a_held_group(site, make_group, alice):
    held, empty = make_group("nlp", alice), make_group("vision")
    data = {"action": "delete_selected", "_selected_action": [held.pk, empty.pk], "post": "yes"}
    response = site.post(LIST, data)
    assert response.status_code == 200
    assert "Group nlp cannot be deleted: it has 1 member (alice)." in response.content.decode()
    assert QuotaGroup.objects.count() == 2


def test_a_users_group_is_set_and_cleared_on_their_page(site, make_group, alice):
    group = make_group("nlp")
    url = f"/admin/auth/user/{alice.pk}/change/"
    response = site.post(url, page_form(site, url, **{"group_membership-0-group": str(group.pk)}))
    assert response.status_code == 302, response.context and response.context["errors"]
    assert Membership.objects.get(user=alice).group == group
    assert "nlp" in site.get("/admin/auth/user/").content.decode()  # the list's group column
    data = page_form(site, url)
    data["group_membership-0-DELETE"] = ["on"]
    assert site.post(url, data).status_code == 302
    assert not Membership.objects.exists()
