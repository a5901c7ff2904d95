"""Cheap reachability checks of a Ray head, bounded in time (a hung head must not hang us), and
the one rule that turns failed looks into "the head is dead" (``HeadWatch``)."""

from __future__ import annotations

import enum
import errno
import socket
import urllib.error
import urllib.request
from collections.abc import Callable

from raypool.discovery import HeadRecord
from raypool.raytoken import bearer

PROBE_TIMEOUT_S = 2.0
# The errors that say "nobody is there" rather than "slow": the host or network has no route
# (ICMP unreachable, no ARP answer) or the host answers that no process listens.
UNREACHABLE_ERRNOS = frozenset({errno.EHOSTUNREACH, errno.ENETUNREACH, errno.EHOSTDOWN})
# One such error is a blip (an ARP entry expiring, a switch or a container network being
# re-plumbed, a GCS between two accept() calls), not a death: a head counts as dead only after
# this many looks in a row found nobody. Ray's own GCS reconnect outlasts a few seconds of this,
# so leaving on the first look would kill training for nothing.
DEAD_AFTER_LOOKS = 2


def port_open(host: str, port: int, timeout: float = PROBE_TIMEOUT_S) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def port_bound(port: int) -> bool:
    """Whether a process of this host holds ``port`` (so a server started now could not bind
    it): asked by binding it, as a server would (with SO_REUSEADDR, so a closed connection
    lingering in TIME_WAIT does not count), on every interface, which Ray's dashboard uses."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("0.0.0.0", port))
        except OSError as e:
            return e.errno == errno.EADDRINUSE
    return False


def job_server_answers(job_server_url: str, token: str | None = None, timeout: float = PROBE_TIMEOUT_S) -> bool:
    # /api/version is served by the job module itself: what JobSubmissionClient checks first.
    # Under Ray's token authentication it answers 401 without the token.
    request = urllib.request.Request(f"{job_server_url}/api/version", headers=bearer(token) if token else {})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return int(response.status) == 200  # urlopen's answer is untyped
    except (OSError, urllib.error.URLError, ValueError):
        return False


def nobody_listens(
    host: str,
    port: int,
    timeout: float = PROBE_TIMEOUT_S,
    *,
    connect: Callable[[tuple[str, int], float], socket.socket] = socket.create_connection,
) -> bool:
    """True when one look finds nobody: the connection is refused outright or the host is
    unreachable. A timeout proves nothing (a slow network, a busy host) and reads as False, so
    callers leave those cases to Ray's own reconnect logic. One True is not a death: see
    ``HeadWatch``."""
    try:
        with connect((host, port), timeout):
            return False
    except ConnectionRefusedError:
        return True
    except OSError as e:
        return e.errno in UNREACHABLE_ERRNOS


def nobody_at_gcs(record: HeadRecord) -> bool:
    return nobody_listens(record.head_ip, record.gcs_port)


class Look(enum.Enum):
    ANSWERS = "answers"
    MISSED = "missed"  # nobody this time: a blip until it happens DEAD_AFTER_LOOKS times in a row
    DEAD = "dead"


class HeadWatch:
    """Decides when a head is dead, for the worker watchdog and the head publisher alike (one
    rule): ``DEAD_AFTER_LOOKS`` looks in a row at the same record that found nobody at its GCS.

    The count starts again when the record looked at changes: another head, or the same head
    having refreshed it (a head that still writes its record is alive, whatever one look at
    its port says)."""

    def __init__(self, nobody_at: Callable[[HeadRecord], bool] = nobody_at_gcs) -> None:
        self.nobody_at = nobody_at
        self.record: HeadRecord | None = None
        self.misses = 0

    def look(self, record: HeadRecord) -> Look:
        if record != self.record:
            self.record, self.misses = record, 0
        if not self.nobody_at(record):
            self.misses = 0
            return Look.ANSWERS
        self.misses += 1
        return Look.DEAD if self.misses >= DEAD_AFTER_LOOKS else Look.MISSED
