"""Cheap reachability checks of a Ray head, bounded in time (a hung head must not hang us)."""

from __future__ import annotations

import errno
import socket
import urllib.error
import urllib.request

PROBE_TIMEOUT_S = 2.0


def port_open(host: str, port: int, timeout: float = PROBE_TIMEOUT_S) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def job_server_answers(job_server_url: str, timeout: float = PROBE_TIMEOUT_S) -> bool:
    # /api/version is served by the job module itself: what JobSubmissionClient checks first.
    try:
        with urllib.request.urlopen(f"{job_server_url}/api/version", timeout=timeout) as response:
            return response.status == 200
    except (OSError, urllib.error.URLError, ValueError):
        return False


def nobody_listens(host: str, port: int, timeout: float = PROBE_TIMEOUT_S) -> bool:
    """True only when the connection is refused outright or the host is unreachable: the
    process (or its container) is gone. A timeout proves nothing (a slow network, a busy host)
    and reads as False, so callers leave those cases to Ray's own reconnect logic."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return False
    except ConnectionRefusedError:
        return True
    except OSError as e:
        return e.errno == errno.EHOSTUNREACH
