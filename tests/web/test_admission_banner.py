"""The admission banner every signed-in page shows while admission is paused."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from tasks.pause import AdmissionControl

pytestmark = pytest.mark.django_db

BANNER = "data-admission-banner"
PAGES = ["/tasks/", "/tasks/new/", "/queue/", "/cluster/", "/data/", "/account/"]


@pytest.fixture
def as_alice(client: Client, alice: User) -> Client:
    client.force_login(alice)
    return client


def banner_queries(client: Client, url: str, **headers: str) -> tuple[str, int]:
    """The page, and how many of its queries read the admission row."""
    with CaptureQueriesContext(connection) as queries:
        response = client.get(url, **headers)  # type: ignore[arg-type]  # extra= headers, as WSGI keys
    assert response.status_code in (200, 404), url
    table = AdmissionControl._meta.db_table
    return response.content.decode(), sum(table in query["sql"] for query in queries.captured_queries)


@pytest.mark.parametrize("url", PAGES)
def test_every_page_shows_the_pause_and_its_reason(as_alice: Client, url: str) -> None:
    AdmissionControl.set(True, "GPU driver upgrade until 14:00", "api:admin")
    page, reads = banner_queries(as_alice, url)
    assert BANNER in page
    assert "Admission is paused: GPU driver upgrade until 14:00</strong>" in page
    assert "— running tasks go on; nothing new starts." in page
    assert reads == 1


def test_the_404_page_shows_it_too(as_alice: Client) -> None:
    AdmissionControl.set(True, "maintenance", "api:admin")
    page, _ = banner_queries(as_alice, "/no/such/page/")
    assert "Admission is paused: maintenance" in page


@pytest.mark.parametrize("url", PAGES)
def test_no_banner_while_admission_is_open(as_alice: Client, url: str) -> None:
    page, reads = banner_queries(as_alice, url)
    assert BANNER not in page and "Admission is paused" not in page
    assert reads == 1  # the one cheap look, before anyone ever paused


def test_no_banner_once_resumed(as_alice: Client) -> None:
    AdmissionControl.set(True, "maintenance", "api:admin")
    AdmissionControl.set(False, "", "api:admin")
    page, _ = banner_queries(as_alice, "/tasks/")
    assert BANNER not in page


def test_the_reason_is_escaped(as_alice: Client) -> None:
    AdmissionControl.set(True, "<script>alert(1)</script>", "api:admin")
    page, _ = banner_queries(as_alice, "/tasks/")
    assert "Admission is paused: &lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "<script>alert(1)" not in page


def test_a_live_part_does_not_read_it(as_alice: Client) -> None:
    AdmissionControl.set(True, "maintenance", "api:admin")
    part, reads = banner_queries(as_alice, "/tasks/", HTTP_HX_REQUEST="true")
    assert BANNER not in part and reads == 0


def test_the_sign_in_page_does_not_show_it(client: Client) -> None:
    AdmissionControl.set(True, "maintenance", "api:admin")
    page, reads = banner_queries(client, "/login/")
    assert BANNER not in page and "maintenance" not in page and reads == 0


def test_staff_get_a_link_to_change_it(client: Client, alice: User, admin: User) -> None:
    AdmissionControl.set(True, "maintenance", "api:admin")
    client.force_login(alice)
    assert 'href="/admin/tasks/admissioncontrol/"' not in banner_queries(client, "/tasks/")[0]
    client.force_login(admin)
    assert 'href="/admin/tasks/admissioncontrol/"' in banner_queries(client, "/tasks/")[0]
