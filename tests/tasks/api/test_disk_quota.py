"""Disk quotas at the doors: a user (or group) at or over one is refused new tasks (API, page,
pipelines: tasks.submit.admit_new) and uploads (files API, data page: accounts.files.begin_upload)
with the same words, naming the usage and the quota; running tasks are left alone."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.utils import timezone

from accounts.diskusage.models import DiskUsage
from accounts.diskusage.scan import measure_all
from accounts.groups.models import Membership, QuotaGroup
from accounts.homes import home_dir
from accounts.limits import set_limits
from tasks.choices import EventKind, TaskState
from tasks.models import Task
from tests.accounts.helpers import assert_error
from tests.conftest import PIPELINE_YAML, PPO_SPEC

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("datasets")]

ALICE_FULL = (
    "alice uses 1000 bytes of disk, at or over their disk_quota_bytes of 1000: delete files (old checkpoints, "
    "data) to go under it, or ask an administrator for more"
)


def uses(user: User, used: int) -> None:
    DiskUsage.objects.update_or_create(user=user, defaults={"used_bytes": used, "measured_at": timezone.now()})


def submit(client_for, user: User):
    return client_for(user).post("/api/v2/tasks", PPO_SPEC, content_type="application/yaml")


def test_a_user_at_their_quota_is_refused_a_task_with_429_naming_usage_and_quota(alice, client_for):
    set_limits(alice, actor="test", disk_quota_bytes=1000)
    uses(alice, 1000)
    error = assert_error(submit(client_for, alice), 429)
    assert error == {"code": "disk_quota_exceeded", "message": ALICE_FULL}
    assert not Task.objects.exists()


def test_under_the_quota_or_unmeasured_or_without_one_a_task_is_queued(alice, bob, client_for):
    set_limits(alice, actor="test", disk_quota_bytes=1000)
    assert submit(client_for, alice).status_code == 201  # not measured yet: nothing to hold against
    uses(alice, 999)
    assert submit(client_for, alice).status_code == 201
    uses(bob, 10**15)  # no quota
    assert submit(client_for, bob).status_code == 201


def test_the_groups_quota_counts_all_its_members(alice, bob, client_for):
    group = QuotaGroup.objects.create(name="nlp", nominal_gpus=4, disk_quota_bytes=1500)
    for user in (alice, bob):
        Membership.objects.create(user=user, group=group)
    uses(alice, 1000)
    assert submit(client_for, alice).status_code == 201
    uses(bob, 500)  # together at 1500
    error = assert_error(submit(client_for, alice), 429)
    assert error["code"] == "disk_quota_exceeded"
    assert error["message"].startswith("group nlp uses 1500 bytes of disk, at or over its disk_quota_bytes of 1500")


def test_a_pipeline_is_refused_the_same_way(alice, client_for):
    set_limits(alice, actor="test", disk_quota_bytes=1000)
    uses(alice, 1000)
    response = client_for(alice).post("/api/v2/pipelines", PIPELINE_YAML, content_type="application/yaml")
    assert assert_error(response, 429) == {"code": "disk_quota_exceeded", "message": ALICE_FULL}


def test_the_submit_page_is_refused_with_the_same_words(alice):
    set_limits(alice, actor="test", disk_quota_bytes=1000)
    uses(alice, 1000)
    page = Client()
    page.force_login(alice)
    response = page.post("/tasks/new/", {"spec": PPO_SPEC})
    assert response.status_code == 429
    assert ALICE_FULL in response.content.decode().replace("&#x27;", "'")


def test_uploads_are_refused_with_the_same_words_through_the_api_and_the_page(alice, client_for):
    set_limits(alice, actor="test", disk_quota_bytes=1000)
    uses(alice, 1000)
    body = {"file": SimpleUploadedFile("x.jsonl", b"{}\n")}
    response = client_for(alice).post("/api/v2/files?path=datasets", body, format="multipart")
    error = assert_error(response, 429, fields=("file",))
    assert (error["code"], error["message"]) == ("disk_quota_exceeded", ALICE_FULL)

    page = Client()
    page.force_login(alice)
    shown = page.post(
        "/data/upload/", {"path": "datasets", "file": SimpleUploadedFile("y.jsonl", b"{}\n")}, follow=True
    )
    assert ALICE_FULL in [str(message) for message in shown.context["messages"]]
    assert not (home_dir("alice") / "datasets" / "x.jsonl").exists()
    assert not (home_dir("alice") / "datasets" / "y.jsonl").exists()

    set_limits(alice, actor="test", disk_quota_bytes=None)  # no quota: the upload goes in
    again = client_for(alice).post("/api/v2/files?path=datasets", body, format="multipart")
    assert again.status_code == 201


def test_a_running_task_is_left_alone_when_its_owner_goes_over(alice, make_task):
    running = make_task(alice, state=TaskState.RUNNING)
    set_limits(alice, actor="test", disk_quota_bytes=10)
    (home_dir("alice") / "jobs" / running.task_id).mkdir(parents=True, exist_ok=True)
    (home_dir("alice") / "jobs" / running.task_id / "big.bin").write_bytes(b"x" * 100)
    measure_all()
    running.refresh_from_db()
    assert running.state == TaskState.RUNNING
    stops = (EventKind.STOP_REQUESTED, EventKind.CANCEL_REQUESTED, EventKind.STATE_TRANSITION)
    assert not running.events.filter(kind__in=stops).exists()


def test_an_upload_over_the_quota_is_refused_before_its_body_is_read(alice, client_for, monkeypatch):
    # An upload may be a gigabyte: refused at once, not after the whole body has come in.
    set_limits(alice, actor="test", disk_quota_bytes=1000)
    uses(alice, 1000)

    def read(*args, **kwargs):
        raise AssertionError("the body was read")

    monkeypatch.setattr("rest_framework.parsers.MultiPartParser.parse", read)
    body = {"file": SimpleUploadedFile("x.jsonl", b"{}\n")}
    response = client_for(alice).post("/api/v2/files?path=datasets", body, format="multipart")
    error = assert_error(response, 429, fields=("file",))
    assert (error["code"], error["message"]) == ("disk_quota_exceeded", ALICE_FULL)
