"""The ``head.json`` discovery record: where the Ray head is, and until when to believe it.

The head publishes the record on shared storage; workers and the scheduler read it (SPEC §7).
This module only reads and writes the file: it imports neither Django nor any process
management, so the scheduler can use it from the web side and ``raynode`` from a bare image.

On disk the record is one JSON object::

    {"cluster_name": "argus-ray", "head_ip": "10.0.0.12", "gcs_port": 6379,
     "dashboard_port": 8265, "job_server_url": "http://10.0.0.12:8265",
     "updated_at": "2025-12-25T17:00:00.000Z", "expires_at": "2025-12-25T17:01:00.000Z"}

Times are ISO 8601 strings in UTC with a ``Z`` suffix, as in seed 001; in Python they are
timezone-aware ``datetime`` objects. Keys this module does not know are ignored, so a newer
head can add fields without breaking older readers.

``raynode head`` adds ``"head_id"``: which process wrote the record (host, pid and a random
part), so that a head tells its own record from another head's, even one at the same address
(a head restarted in place). A record without it (an older head, a test) is nobody's own.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

HEAD_FILE_NAME = "head.json"
# A real record is a few hundred bytes; anything much larger is not ours and is not read whole.
MAX_RECORD_BYTES = 64 * 1024


def head_path(shared_root: str | os.PathLike[str], cluster_name: str) -> Path:
    """``<shared_root>/ray/discovery/<cluster_name>/head.json``."""
    if not cluster_name or "/" in cluster_name or cluster_name in (".", ".."):
        raise ValueError(f"invalid cluster name {cluster_name!r}")
    return Path(shared_root) / "ray" / "discovery" / cluster_name / HEAD_FILE_NAME


def head_file_from_settings() -> Path:
    """The head file the Django side should read: ARGUS_HEAD_IP_FILE if set, else the default
    path under settings.ARGUS_SHARED_ROOT for settings.ARGUS_CLUSTER_NAME."""
    from django.conf import settings  # here, not at the top: raynode images import this module bare

    override = getattr(settings, "ARGUS_HEAD_IP_FILE", "") or os.environ.get("ARGUS_HEAD_IP_FILE", "")
    if override.strip():
        return Path(override.strip())
    return head_path(settings.ARGUS_SHARED_ROOT, settings.ARGUS_CLUSTER_NAME)


def format_time(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def parse_time(text: object) -> datetime:
    if not isinstance(text, str):
        raise ValueError(f"time must be an ISO 8601 string, not {text!r}")
    moment = datetime.fromisoformat(text)
    # A time without a zone is ambiguous between hosts; the head always writes UTC with "Z".
    if moment.tzinfo is None:
        raise ValueError(f"time {text!r} has no timezone")
    return moment.astimezone(UTC)


def host_port(host: str, port: int) -> str:
    # IPv6 literals need brackets wherever a port follows.
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


@dataclass(frozen=True)
class HeadRecord:
    cluster_name: str
    head_ip: str
    gcs_port: int
    dashboard_port: int
    job_server_url: str
    updated_at: datetime
    expires_at: datetime
    head_id: str = ""

    @classmethod
    def new(
        cls,
        *,
        cluster_name: str,
        head_ip: str,
        gcs_port: int,
        dashboard_port: int,
        ttl_s: float,
        now: datetime | None = None,
        head_id: str = "",
    ) -> HeadRecord:
        """A record published ``now`` and believed for ``ttl_s`` seconds."""
        now = now or datetime.now(UTC)
        # Milliseconds, as the file stores them, so a record reads back equal to itself.
        now = now.replace(microsecond=now.microsecond // 1000 * 1000)
        return cls(
            cluster_name=cluster_name,
            head_ip=head_ip,
            gcs_port=gcs_port,
            dashboard_port=dashboard_port,
            job_server_url=f"http://{host_port(head_ip, dashboard_port)}",
            updated_at=now,
            expires_at=now + timedelta(seconds=ttl_s),
            head_id=head_id,
        )

    @property
    def gcs_address(self) -> str:
        """``ip:port`` of the head's GCS: what ``ray start --address`` and the SDKs take."""
        return host_port(self.head_ip, self.gcs_port)

    def is_fresh(self, now: datetime | None = None) -> bool:
        return (now or datetime.now(UTC)) < self.expires_at

    def expired(self, now: datetime | None = None) -> HeadRecord:
        """The same address, no longer to be believed: what a head leaves when it stops."""
        now = now or datetime.now(UTC)
        return replace(self, updated_at=now, expires_at=now)

    def to_json(self) -> dict[str, object]:
        data: dict[str, object] = {
            "cluster_name": self.cluster_name,
            "head_ip": self.head_ip,
            "gcs_port": self.gcs_port,
            "dashboard_port": self.dashboard_port,
            "job_server_url": self.job_server_url,
            "updated_at": format_time(self.updated_at),
            "expires_at": format_time(self.expires_at),
        }
        if self.head_id:
            data["head_id"] = self.head_id
        return data

    @classmethod
    def from_json(cls, data: object) -> HeadRecord:
        """Raises ValueError when ``data`` is not a complete, well-typed record."""
        if not isinstance(data, dict):
            raise ValueError("head record must be a JSON object")
        strings = {}
        for key in ("cluster_name", "head_ip", "job_server_url"):
            value = data.get(key)
            if not isinstance(value, str) or not value.strip():
                raise ValueError(f"{key} must be a non-empty string")
            strings[key] = value.strip()
        ports = {}
        for key in ("gcs_port", "dashboard_port"):
            value = data.get(key)
            # bool is an int in Python; "true" is not a port.
            if not isinstance(value, int) or isinstance(value, bool) or not 0 < value < 65536:
                raise ValueError(f"{key} must be a port number")
            ports[key] = value
        head_id = data.get("head_id", "")
        if not isinstance(head_id, str):
            raise ValueError("head_id must be a string")
        return cls(
            cluster_name=strings["cluster_name"],
            head_ip=strings["head_ip"],
            gcs_port=ports["gcs_port"],
            dashboard_port=ports["dashboard_port"],
            job_server_url=strings["job_server_url"],
            updated_at=parse_time(data.get("updated_at")),
            expires_at=parse_time(data.get("expires_at")),
            head_id=head_id.strip(),
        )


def read_head(path: str | os.PathLike[str]) -> HeadRecord | None:
    """The record in ``path``, fresh or not; None when the file is missing, unreadable,
    half-written or malformed. Never raises on bad content."""
    try:
        with open(path, "rb") as f:
            raw = f.read(MAX_RECORD_BYTES + 1)
    except OSError:
        return None
    if len(raw) > MAX_RECORD_BYTES:
        return None
    try:
        return HeadRecord.from_json(json.loads(raw))
    except (ValueError, TypeError, OverflowError):
        # json.JSONDecodeError and UnicodeDecodeError are ValueErrors too.
        return None


def read_fresh_head(path: str | os.PathLike[str], now: datetime | None = None) -> HeadRecord | None:
    """The record in ``path`` if it is there and fresh, else None: what a caller that wants
    to reach the head should use."""
    record = read_head(path)
    if record is None or not record.is_fresh(now):
        return None
    return record


def write_head(path: str | os.PathLike[str], record: HeadRecord) -> None:
    """Replace ``path`` with ``record`` atomically: readers see the old record or the new
    one, never half of one (temp file in the same directory, fsync, rename)."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    payload = (json.dumps(record.to_json(), indent=2) + "\n").encode()
    fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(payload)
            f.flush()
            os.fsync(f.fileno())
        # mkstemp makes the file private; the scheduler may run as another user than the head.
        os.chmod(tmp_name, 0o644)
        os.replace(tmp_name, target)
    except BaseException:
        # Also on KeyboardInterrupt: a stray temp file would pile up on shared storage.
        Path(tmp_name).unlink(missing_ok=True)
        raise
    fsync_dir(target.parent)


def fsync_dir(directory: Path) -> None:
    # Makes the rename itself durable. Best effort: some filesystems refuse fsync on a directory.
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
