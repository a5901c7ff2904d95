"""The admission pause in the admin site: one row, changed through AdmissionControl.set()."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client

from tasks.pause import AdmissionControl

pytestmark = pytest.mark.django_db

CHANGELIST = "/admin/tasks/admissioncontrol/"


@pytest.fixture
def site(admin: User) -> Client:
    client = Client()
    client.force_login(admin)
    return client


def test_the_first_pause_is_added_with_who_and_when(site: Client) -> None:
    response = site.post(f"{CHANGELIST}add/", {"paused": "on", "reason": ""}, follow=True)
    assert response.status_code == 200
    state = AdmissionControl.objects.get()
    assert (state.name, state.paused, state.changed_by) == ("default", True, "admin:admin")
    assert state.reason == "paused by admin:admin" and state.changed_at is not None


def test_a_change_goes_through_set(site: Client) -> None:
    row = AdmissionControl.set(True, "maintenance", "api:ops")
    response = site.post(f"{CHANGELIST}{row.pk}/change/", {"reason": "still here"}, follow=True)
    assert response.status_code == 200
    state = AdmissionControl.objects.get()
    # Unchecked: resumed, and the reason cleared whatever the form said.
    assert (state.paused, state.reason, state.changed_by) == (False, "", "admin:admin")

    site.post(f"{CHANGELIST}{row.pk}/change/", {"paused": "on", "reason": "  new disks "})
    state.refresh_from_db()
    assert (state.paused, state.reason) == (True, "new disks")


def test_there_is_no_second_row_and_no_delete(site: Client) -> None:
    row = AdmissionControl.set(True, "maintenance", "api:ops")
    assert site.get(f"{CHANGELIST}add/").status_code == 403
    assert site.get(f"{CHANGELIST}{row.pk}/delete/").status_code == 403
    site.post(CHANGELIST, {"action": "delete_selected", "_selected_action": [row.pk], "post": "yes"})
    assert AdmissionControl.objects.count() == 1
    page = site.get(f"{CHANGELIST}{row.pk}/change/").content.decode()
    assert 'name="paused"' in page and 'name="changed_by"' not in page


def test_a_user_cannot_reach_it(alice: User) -> None:
    client = Client()
    client.force_login(alice)
    response = client.get(CHANGELIST)
    assert response.status_code == 302 and "/admin/login/" in response["Location"]
