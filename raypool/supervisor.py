"""The supervisord ``[program:…]`` section that keeps a role alive (``raynode supervisor-config``).

supervisord restarts the head or the watchdog when it dies; the watchdog in turn restarts Ray
(seed 002 §3.2). SIGTERM goes to the raynode process alone (``stopasgroup=false``): raynode then
stops its own Ray node the one way that works (RAY_NOTES.md), instead of every process in the
group getting the signal at once.
"""

from __future__ import annotations

import shlex
from pathlib import Path

from raypool.rayproc import STOP_TIMEOUT_S

# Longer than raynode's own wait for Ray to drain, so supervisord does not SIGKILL raynode
# while it is still stopping its node cleanly.
STOP_WAIT_S = int(STOP_TIMEOUT_S) + 10
LOG_MAX_BYTES = "50MB"
LOG_BACKUPS = 5


def program_name(role: str) -> str:
    return f"argus-ray-{role}"


def program_section(role: str, *, python: str, project_dir: Path, log_dir: Path | None) -> str:
    name = program_name(role)
    command = shlex.join([python, str(project_dir / "manage.py"), "raynode", role])
    if log_dir is None:
        # /dev/stdout cannot be rotated: maxbytes=0 turns rotation off (supervisord docs).
        logfile, maxbytes, backups = "/dev/stdout", "0", "0"
    else:
        logfile, maxbytes, backups = str(log_dir / f"{name}.log"), LOG_MAX_BYTES, str(LOG_BACKUPS)
    lines = [
        f"[program:{name}]",
        f"command={_escape(command)}",
        f"directory={_escape(str(project_dir))}",
        "autostart=true",
        "autorestart=true",
        # A role that dies within startsecs counts as a failed start; after startretries of
        # those in a row supervisord gives up (FATAL) instead of spinning on a broken config.
        "startsecs=5",
        "startretries=10",
        "stopsignal=TERM",
        f"stopwaitsecs={STOP_WAIT_S}",
        "stopasgroup=false",
        "killasgroup=false",
        "redirect_stderr=true",
        f"stdout_logfile={_escape(logfile)}",
        f"stdout_logfile_maxbytes={maxbytes}",
        f"stdout_logfile_backups={backups}",
    ]
    return "\n".join(lines) + "\n"


def _escape(value: str) -> str:
    # supervisord expands %(name)s in values; a literal % must be doubled.
    return value.replace("%", "%%")
