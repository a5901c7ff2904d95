"""One ``ray start --block`` process: this node's Ray, started and stopped alone.

Never ``ray stop``: it kills every Ray process on the machine, other nodes and other people's
clusters included. A node is stopped by SIGTERM to its own ``ray start --block`` process, which
drains the node and stops the processes it started (RAY_NOTES.md); SIGTERM to its whole process
group instead can leave it hanging.
"""

from __future__ import annotations

import ctypes
import functools
import logging
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

logger = logging.getLogger(__name__)

# Ray drains a node for up to 30 s on SIGTERM before it stops it; give it that and a little more.
STOP_TIMEOUT_S = 35.0
PR_SET_PDEATHSIG = 1


def ray_executable() -> str:
    # The `ray` next to this interpreter first: supervisord starts us without the venv on PATH.
    sibling = Path(sys.executable).with_name("ray")
    if sibling.exists():
        return str(sibling)
    return shutil.which("ray") or "ray"


def _die_with_parent(parent_pid: int) -> None:
    """Runs in the child before exec: if raynode dies, even by SIGKILL, the kernel sends this
    ``ray start`` SIGTERM, so a restarted watchdog never finds an orphan node beside its new one."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    except (OSError, AttributeError):
        return  # not Linux: the node outlives a killed raynode, as with plain `ray start`
    # The parent may have died before prctl took effect; then nobody would ever signal us.
    if os.getppid() != parent_pid:
        os.kill(os.getpid(), signal.SIGTERM)


class RayProcess:
    def __init__(self, popen: subprocess.Popen[bytes], args: Sequence[str]) -> None:
        self.popen = popen
        self.args = list(args)

    @classmethod
    def start(cls, args: Sequence[str]) -> RayProcess:
        """``ray start <args>`` (which must include ``--block``), in a session of its own so
        a signal to raynode's process group (Ctrl-C in a terminal) does not reach it."""
        command = [ray_executable(), "start", *args]
        logger.info("starting: %s", " ".join(command))
        popen = subprocess.Popen(
            command, start_new_session=True, preexec_fn=functools.partial(_die_with_parent, os.getpid())
        )
        return cls(popen, command)

    @property
    def pid(self) -> int:
        return self.popen.pid

    def exit_code(self) -> int | None:
        """None while Ray runs."""
        return self.popen.poll()

    def stop(self, timeout: float = STOP_TIMEOUT_S) -> int:
        """SIGTERM to this ``ray start`` alone, and wait; SIGKILL its whole session if it hangs."""
        if self.popen.poll() is None:
            logger.info("stopping ray start (pid %d)", self.pid)
            self.popen.send_signal(signal.SIGTERM)
            try:
                self.popen.wait(timeout)
            except subprocess.TimeoutExpired:
                logger.warning("ray start (pid %d) did not stop in %.0f s; killing it", self.pid, timeout)
                # Its own session, so this group holds only this node's processes.
                try:
                    os.killpg(self.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                self.popen.wait()
        return self.popen.returncode
