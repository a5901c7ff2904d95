"""Disk usage: the scan over real temporary trees (sizes summed, symlinks not followed, the time
budget between users), the periodic job that runs it, and where it is shown (/me, the users and
groups APIs, the account page, the admin site, /metrics)."""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone
from django_q.models import Schedule
from prometheus_client.parser import text_string_to_metric_families

from accounts.diskusage.models import DiskUsage
from accounts.diskusage.scan import measure_all, tree_bytes
from accounts.groups.models import Membership, QuotaGroup
from accounts.homes import home_dir
from accounts.limits import set_limits
from tests.accounts.helpers import assert_error

pytestmark = pytest.mark.django_db


def write(path: Path, size: int) -> int:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"x" * size)
    return size


def test_tree_bytes_sums_every_file_once_and_never_follows_a_symlink(tmp_path):
    root = tmp_path / "home"
    outside = tmp_path / "elsewhere"
    expected = write(root / "a.bin", 1000)
    expected += write(root / "datasets" / "part-0.parquet", 2048)
    expected += write(root / "jobs" / "t-1" / "checkpoints" / "global_step_2" / "model.pt", 4096)
    expected += write(root / "deep" / "a" / "b" / "c" / "d" / "e.txt", 7)
    (root / "empty").mkdir()
    write(outside / "huge.bin", 1_000_000)
    (root / "link-to-file").symlink_to(outside / "huge.bin")
    (root / "link-to-dir").symlink_to(outside, target_is_directory=True)
    (root / "loop").symlink_to(root, target_is_directory=True)
    (root / "dangling").symlink_to(tmp_path / "missing")
    # A link counts as the link itself (its own few bytes), as du counts it.
    expected += sum(os.lstat(root / name).st_size for name in ("link-to-file", "link-to-dir", "loop", "dangling"))

    assert tree_bytes(root) == expected
    assert expected < 1_000_000  # none of the outside file's bytes


def test_tree_bytes_of_a_missing_folder_is_zero(tmp_path):
    assert tree_bytes(tmp_path / "nobody") == 0


def test_a_folder_the_scan_may_not_read_is_logged_and_the_rest_counted(tmp_path, monkeypatch, caplog):
    # Usage then falls short of the truth: the log says where, so an administrator can see it.
    root = tmp_path / "home"
    expected = write(root / "a.bin", 100)
    write(root / "locked" / "hidden.bin", 5000)
    scandir = os.scandir

    def refusing(path):
        if os.fspath(path) == os.fspath(root / "locked"):
            raise PermissionError(13, "Permission denied", os.fspath(path))
        return scandir(path)

    monkeypatch.setattr(os, "scandir", refusing)
    assert tree_bytes(root) == expected
    assert f"Disk usage: cannot read {root / 'locked'} (Permission denied): not counted" in caplog.text


def test_measure_all_stores_each_users_home_jobs_included(alice, bob):
    alice_bytes = write(home_dir("alice") / "datasets" / "train.parquet", 3000)
    alice_bytes += write(home_dir("alice") / "jobs" / "t-1" / "checkpoints" / "global_step_1" / "m.pt", 5000)
    bob_bytes = write(home_dir("bob") / "models" / "m.safetensors", 123)
    before = timezone.now()

    assert measure_all() == 2

    rows = {row.user.username: row for row in DiskUsage.objects.select_related("user")}
    assert rows["alice"].used_bytes == alice_bytes
    assert rows["bob"].used_bytes == bob_bytes
    assert all(row.measured_at >= before for row in rows.values())

    # Files removed since: the next scan says so.
    (home_dir("alice") / "jobs" / "t-1" / "checkpoints" / "global_step_1" / "m.pt").unlink()
    measure_all()
    assert DiskUsage.objects.get(user__username="alice").used_bytes == 3000


@pytest.mark.django_db(transaction=True)  # the foreign key checked at each write, as in production
def test_a_user_deleted_while_their_home_is_scanned_ends_nothing_but_their_row(alice, bob, monkeypatch):
    write(home_dir("bob") / "models" / "m.safetensors", 123)
    scanned = tree_bytes

    def deleting_alice(root: Path) -> int:
        if root == home_dir("alice"):
            User.objects.filter(username="alice").delete()  # by an admin, between list and write
        return scanned(root)

    monkeypatch.setattr("accounts.diskusage.scan.tree_bytes", deleting_alice)
    assert measure_all() == 1
    assert [(row.user.username, row.used_bytes) for row in DiskUsage.objects.select_related("user")] == [("bob", 123)]


def test_past_its_budget_a_scan_starts_no_new_home_and_the_next_goes_on_with_the_oldest(settings, alice, bob):
    settings.ARGUS_DISK_SCAN_BUDGET_S = 10
    write(home_dir("alice") / "a", 10)
    write(home_dir("bob") / "b", 20)
    ticks = iter([0.0, 11.0, 11.0])  # the deadline computed, then past it before the second user

    assert measure_all(clock=lambda: next(ticks)) == 1
    first = DiskUsage.objects.get()
    assert first.user.username == "alice"  # never measured: the lowest id first

    ticks = iter([0.0, 11.0, 11.0])
    assert measure_all(clock=lambda: next(ticks)) == 1
    assert DiskUsage.objects.get(user__username="bob").used_bytes == 20  # the unmeasured one, not alice again


def test_the_periodic_job_runs_the_scan_every_5_minutes():
    # Created by accounts' migration 0007; qcluster (make run, the image's scheduler role) runs it.
    schedule = Schedule.objects.get(name="argus-disk-usage")
    assert (schedule.func, schedule.schedule_type, schedule.minutes, schedule.repeats) == (
        "accounts.diskusage.scan.measure_all",
        Schedule.MINUTES,
        5,
        -1,
    )


def measured(user: User, used: int) -> DiskUsage:
    return DiskUsage.objects.create(user=user, used_bytes=used, measured_at=timezone.now() - timedelta(minutes=2))


def test_me_and_the_users_api_show_the_usage(alice, bob, admin, client_for):
    measured(alice, 12345)
    me = client_for(alice).get("/api/v2/me").json()
    assert me["disk_used_bytes"] == 12345
    assert me["disk_measured_at"] is not None
    assert client_for(bob).get("/api/v2/me").json()["disk_used_bytes"] is None  # not measured yet

    listed = {row["username"]: row for row in client_for(admin).get("/api/v2/users").json()["results"]}
    assert listed["alice"]["disk_used_bytes"] == 12345
    assert listed["bob"]["disk_used_bytes"] is None
    assert client_for(admin).get("/api/v2/users/alice").json()["disk_used_bytes"] == 12345


def test_a_groups_usage_is_the_sum_of_its_members(alice, bob, admin, make_user, client_for):
    carol = make_user("carol")
    group = QuotaGroup.objects.create(name="nlp", nominal_gpus=4)
    for user in (alice, bob):
        Membership.objects.create(user=user, group=group)
    measured(alice, 100)
    measured(bob, 250)
    measured(carol, 10_000)  # not a member

    assert client_for(admin).get("/api/v2/groups/nlp").json()["disk_used_bytes"] == 350
    assert client_for(alice).get("/api/v2/groups/nlp").json()["disk_used_bytes"] == 350


def test_the_account_page_shows_the_usage(alice):
    site = Client()
    site.force_login(alice)
    assert "not been measured yet" in site.get("/account/").content.decode()
    measured(alice, 5 * 1024 * 1024)
    page = site.get("/account/").content.decode()
    assert "5.0\xa0MB" in page and "5242880 bytes" in page


def test_the_account_page_shows_the_quotas_and_says_when_they_refuse(alice):
    site = Client()
    site.force_login(alice)
    group = QuotaGroup.objects.create(name="nlp", nominal_gpus=1, disk_quota_bytes=10**9)
    Membership.objects.create(user=alice, group=group)
    set_limits(alice, actor="test", disk_quota_bytes=2048)
    measured(alice, 1000)
    page = site.get("/account/").content.decode()
    assert "Your disk quota is 2.0\xa0KB (2048 bytes)." in page
    assert "Your group's is 953.7\xa0MB (1000000000 bytes)" in page
    assert "disk-quota-refusal" not in page
    DiskUsage.objects.filter(user=alice).update(used_bytes=2048)
    page = site.get("/account/").content.decode().replace("&#x27;", "'")
    assert "New tasks and uploads are refused: alice uses 2048 bytes of disk, at or over their" in page


def test_the_admin_site_lists_the_usage_read_only(alice, admin):
    measured(alice, 777)
    site = Client()
    site.force_login(admin)
    page = site.get("/admin/accounts/diskusage/")
    assert page.status_code == 200
    assert "777" in page.content.decode()
    assert site.get("/admin/accounts/diskusage/add/").status_code == 403


def test_metrics_shows_each_measured_users_bytes(client, alice, bob):
    measured(alice, 4096)
    measured(bob, 0)
    response = client.get("/metrics")
    assert response.status_code == 200
    samples = {
        sample.labels["user"]: sample.value
        for family in text_string_to_metric_families(response.content.decode())
        if family.name == "argus_disk_used_bytes"
        for sample in family.samples
    }
    assert samples == {"alice": 4096, "bob": 0}


def test_an_admin_sets_a_users_disk_quota_and_clears_it(alice, admin, client_for):
    api = client_for(admin)
    assert client_for(alice).get("/api/v2/me").json()["disk_quota_bytes"] is None
    response = api.patch("/api/v2/users/alice", {"disk_quota_bytes": 10**12}, format="json")
    assert response.status_code == 200
    assert response.json()["disk_quota_bytes"] == 10**12
    assert client_for(alice).get("/api/v2/me").json()["disk_quota_bytes"] == 10**12
    assert (
        api.patch("/api/v2/users/alice", {"disk_quota_bytes": None}, format="json").json()["disk_quota_bytes"] is None
    )


def test_a_user_cannot_set_their_own_disk_quota(alice, client_for):
    response = client_for(alice).patch("/api/v2/users/alice", {"disk_quota_bytes": 10**15}, format="json")
    assert response.status_code == 403


@pytest.mark.parametrize("bad", [-1, "100", 1.5, True, 2**63, {"bytes": 1}])
def test_a_bad_disk_quota_is_a_400_naming_the_field(alice, admin, client_for, bad):
    api = client_for(admin)
    response = api.patch("/api/v2/users/alice", {"disk_quota_bytes": bad}, format="json")
    assert_error(response, 400, fields=("disk_quota_bytes",))
    QuotaGroup.objects.create(name="nlp", nominal_gpus=1)
    response = api.patch("/api/v2/groups/nlp", {"disk_quota_bytes": bad}, format="json")
    assert_error(response, 400, fields=("disk_quota_bytes",))
    response = api.post("/api/v2/groups", {"name": "cv", "nominal_gpus": 1, "disk_quota_bytes": bad}, format="json")
    assert_error(response, 400, fields=("disk_quota_bytes",))


def test_an_admin_sets_a_groups_disk_quota(admin, client_for):
    api = client_for(admin)
    created = api.post("/api/v2/groups", {"name": "nlp", "nominal_gpus": 2, "disk_quota_bytes": 5000}, format="json")
    assert created.status_code == 201
    assert created.json()["disk_quota_bytes"] == 5000
    changed = api.patch("/api/v2/groups/nlp", {"disk_quota_bytes": None}, format="json")
    assert changed.status_code == 200 and changed.json()["disk_quota_bytes"] is None
    assert QuotaGroup.objects.get(name="nlp").disk_quota_bytes is None
