"""What every page shares: the nav, a title, the 404 page."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    ("url", "title"),
    [("/tasks/", "Tasks"), ("/tasks/new/", "New task"), ("/queue/", "Queue"), ("/cluster/", "Cluster")],
)
def test_the_task_pages_answer_with_their_title(client: Client, alice: User, url: str, title: str) -> None:
    client.force_login(alice)
    response = client.get(url)
    assert response.status_code == 200
    assert f"<h1>{title}</h1>" in response.content.decode()


def test_an_unknown_page_is_a_404_page_with_the_nav(client: Client, alice: User) -> None:
    client.force_login(alice)
    response = client.get("/no/such/page/")
    assert response.status_code == 404
    page = response.content.decode()
    assert "<h1>Not found</h1>" in page and 'aria-label="Main"' in page


def test_the_nav_links_admin_for_staff_only(client: Client, alice: User, admin: User) -> None:
    client.force_login(alice)
    assert 'href="/admin/"' not in client.get("/tasks/").content.decode()
    client.force_login(admin)
    assert 'href="/admin/"' in client.get("/tasks/").content.decode()


def test_the_nav_marks_the_current_page(client: Client, alice: User) -> None:
    client.force_login(alice)
    page = client.get("/tasks/new/").content.decode()
    assert '<a href="/tasks/new/" aria-current="page">' in page
    assert '<a href="/tasks/" aria-current="page">' not in page


def test_a_stale_form_gets_a_page_that_explains(alice: User) -> None:
    client = Client(enforce_csrf_checks=True)
    response = client.post("/login/", {"username": "alice", "password": "x"})
    assert response.status_code == 403
    assert "The form you sent was out of date" in response.content.decode()
