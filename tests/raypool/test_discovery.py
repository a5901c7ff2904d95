"""head.json: the atomic write, freshness, and a reader that never trips on bad content."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from devkit.pool import PROJECT_DIR
from raypool import discovery
from raypool.discovery import HeadRecord, head_path, read_fresh_head, read_head, write_head

NOW = datetime(2025, 12, 25, 17, 0, tzinfo=UTC)


def record(**overrides: object) -> HeadRecord:
    fields: dict = {
        "cluster_name": "argus-ray",
        "head_ip": "10.0.0.12",
        "gcs_port": 6379,
        "dashboard_port": 8265,
        "ttl_s": 60,
        "now": NOW,
    }
    fields.update(overrides)
    return HeadRecord.new(**fields)


def read_back(path: Path) -> HeadRecord:
    """read_head() where the test wrote a good record: None would be a failure."""
    head = read_head(path)
    assert head is not None, f"no readable record at {path}"
    return head


def test_head_path_is_under_the_shared_root(tmp_path: Path) -> None:
    assert head_path(tmp_path, "argus-ray") == tmp_path / "ray" / "discovery" / "argus-ray" / "head.json"


@pytest.mark.parametrize("name", ["", "..", "a/b", "."])
def test_head_path_rejects_names_that_leave_the_discovery_dir(tmp_path: Path, name: str) -> None:
    with pytest.raises(ValueError):
        head_path(tmp_path, name)


def test_it_writes_the_record_of_the_spec(tmp_path: Path) -> None:
    path = tmp_path / "d" / "head.json"
    write_head(path, record())
    assert json.loads(path.read_text()) == {
        "cluster_name": "argus-ray",
        "head_ip": "10.0.0.12",
        "gcs_port": 6379,
        "dashboard_port": 8265,
        "job_server_url": "http://10.0.0.12:8265",
        "updated_at": "2025-12-25T17:00:00.000Z",
        "expires_at": "2025-12-25T17:01:00.000Z",
    }
    assert path.stat().st_mode & 0o777 == 0o644
    assert read_head(path) == record()
    assert read_back(path).gcs_address == "10.0.0.12:6379"


def test_it_brackets_ipv6_addresses() -> None:
    head = record(head_ip="fd00::2")
    assert head.gcs_address == "[fd00::2]:6379"
    assert head.job_server_url == "http://[fd00::2]:8265"


def test_a_rewrite_replaces_the_record_and_leaves_no_temp_file(tmp_path: Path) -> None:
    path = tmp_path / "d" / "head.json"
    write_head(path, record())
    write_head(path, record(gcs_port=6400))
    assert read_back(path).gcs_port == 6400
    assert os.listdir(path.parent) == ["head.json"]


def test_a_failed_write_leaves_the_old_record_and_no_temp_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "d" / "head.json"
    write_head(path, record())

    def broken_fsync(fd: int) -> None:
        raise OSError("disk full")

    monkeypatch.setattr("raypool.discovery.os.fsync", broken_fsync)
    with pytest.raises(OSError, match="disk full"):
        write_head(path, record(gcs_port=6400))
    assert read_back(path).gcs_port == 6379
    assert os.listdir(path.parent) == ["head.json"]


def test_freshness_follows_expires_at() -> None:
    head = record()
    assert head.is_fresh(NOW)
    assert head.is_fresh(NOW + timedelta(seconds=59))
    assert not head.is_fresh(NOW + timedelta(seconds=60))
    assert not head.expired(NOW).is_fresh(NOW)


def test_read_fresh_head_ignores_a_stale_record(tmp_path: Path) -> None:
    path = tmp_path / "head.json"
    write_head(path, record())
    assert read_fresh_head(path, NOW + timedelta(seconds=10)) == record()
    assert read_fresh_head(path, NOW + timedelta(seconds=61)) is None
    # read_head still shows it, for `raynode status` and the cluster page.
    assert read_head(path) == record()


def test_a_missing_file_reads_as_none(tmp_path: Path) -> None:
    assert read_head(tmp_path / "nope" / "head.json") is None
    assert read_fresh_head(tmp_path / "nope" / "head.json") is None


def test_a_directory_reads_as_none(tmp_path: Path) -> None:
    assert read_head(tmp_path) is None


GOOD = record().to_json()


@pytest.mark.parametrize(
    "content",
    [
        b"",
        json.dumps(GOOD).encode()[:40],  # half-written
        b"\xff\xfe not utf-8",
        b"[1, 2, 3]",
        b"null",
        json.dumps({**GOOD, "gcs_port": "6379"}).encode(),
        json.dumps({**GOOD, "gcs_port": True}).encode(),
        json.dumps({**GOOD, "gcs_port": 70000}).encode(),
        json.dumps({**GOOD, "head_ip": ""}).encode(),
        json.dumps({**GOOD, "expires_at": "tomorrow"}).encode(),
        json.dumps({**GOOD, "expires_at": 1766682060}).encode(),
        json.dumps({**GOOD, "expires_at": "2025-12-25T17:01:00"}).encode(),  # no timezone
        json.dumps({k: v for k, v in GOOD.items() if k != "job_server_url"}).encode(),
        b"{" + b" " * (discovery.MAX_RECORD_BYTES + 1) + b"}",
    ],
)
def test_bad_content_reads_as_none_and_never_raises(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "head.json"
    path.write_bytes(content)
    assert read_head(path) is None
    assert read_fresh_head(path) is None


def test_the_head_id_names_the_process_that_wrote_the_record(tmp_path: Path) -> None:
    path = tmp_path / "head.json"
    write_head(path, record(head_id="node-a:41:9f3c2e"))
    assert json.loads(path.read_text())["head_id"] == "node-a:41:9f3c2e"
    assert read_head(path) == record(head_id="node-a:41:9f3c2e")
    # A record from before head ids (an older head) reads as nobody's.
    write_head(path, record())
    assert "head_id" not in json.loads(path.read_text())
    assert read_head(path) == record(head_id="")


def test_a_head_id_that_is_not_a_string_makes_the_record_unreadable(tmp_path: Path) -> None:
    path = tmp_path / "head.json"
    path.write_text(json.dumps({**record().to_json(), "head_id": 7}))
    assert read_head(path) is None


def test_unknown_keys_are_ignored(tmp_path: Path) -> None:
    path = tmp_path / "head.json"
    path.write_text(json.dumps({**GOOD, "head_started_at": "later"}))
    assert read_head(path) == record()


def test_a_record_written_with_an_offset_reads_back_in_utc(tmp_path: Path) -> None:
    path = tmp_path / "head.json"
    path.write_text(json.dumps({**GOOD, "expires_at": "2025-12-26T01:01:00+08:00"}))
    assert read_back(path).expires_at == NOW + timedelta(seconds=60)


def test_head_file_from_settings_follows_the_shared_root(settings, tmp_path: Path) -> None:
    settings.ARGUS_SHARED_ROOT = tmp_path
    settings.ARGUS_CLUSTER_NAME = "c1"
    assert discovery.head_file_from_settings() == tmp_path / "ray" / "discovery" / "c1" / "head.json"


def test_head_file_from_settings_honours_argus_head_ip_file(
    settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ARGUS_HEAD_IP_FILE", str(tmp_path / "elsewhere.json"))
    assert discovery.head_file_from_settings() == tmp_path / "elsewhere.json"


def test_the_module_imports_no_django_and_no_process_management() -> None:
    """The scheduler imports it on the web side, raynode images import it bare (SPEC §2)."""
    code = (
        "import sys, raypool.discovery; "
        "bad = [m for m in sys.modules if m.split('.')[0] in ('django', 'ray') "
        "or m in ('raypool.rayproc', 'raypool.watchdog', 'raypool.headnode')]; "
        "assert not bad, bad"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=PROJECT_DIR, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
