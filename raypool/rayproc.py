"""One ``ray start --block`` process: this node's Ray, started and stopped alone.

Never ``ray stop``: it kills every Ray process on the machine, other nodes and other people's
clusters included. A node is stopped by SIGTERM to its own ``ray start --block`` process, which
drains the node and stops the processes it started (RAY_NOTES.md); SIGTERM to its whole process
group instead can leave it hanging.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import logging
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Protocol

logger = logging.getLogger(__name__)

# Ray drains a node for up to 30 s on SIGTERM before it stops it; give it that and a little more.
STOP_TIMEOUT_S = 35.0
# How long the rest of a node's processes get to follow `ray start` out before SIGKILL.
GROUP_EXIT_WAIT_S = 3.0
PR_SET_PDEATHSIG = 1


def ray_executable() -> str:
    # The `ray` next to this interpreter first: supervisord starts us without the venv on PATH.
    sibling = Path(sys.executable).with_name("ray")
    if sibling.exists():
        return str(sibling)
    return shutil.which("ray") or "ray"


def _load_prctl() -> Callable[..., int] | None:
    # Looked up once in the parent: the child between fork and exec should do as little as it can.
    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None  # not Linux: the node outlives a killed raynode, as with plain `ray start`


_prctl = _load_prctl()


def _die_with_parent(parent_pid: int) -> None:
    """Runs in the child before exec: if raynode dies, even by SIGKILL, the kernel sends this
    ``ray start`` SIGTERM, so a restarted watchdog never finds an orphan node beside its new one."""
    if _prctl is None:
        return
    _prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    # The parent may have died before prctl took effect; then nobody would ever signal us.
    if os.getppid() != parent_pid:
        os.kill(os.getpid(), signal.SIGTERM)


class RayNode(Protocol):
    """What the head publisher and the worker watchdog need of their ``ray start`` child: the
    real one is ``RayProcess``; the unit tests stand one in."""

    def exit_code(self) -> int | None: ...

    def stop(self) -> int: ...

    def kill(self) -> int: ...


class RayProcess:
    def __init__(self, popen: subprocess.Popen[bytes]) -> None:
        self.popen = popen

    @classmethod
    def start(cls, args: Sequence[str], env: Mapping[str, str] | None = None) -> RayProcess:
        """``ray start <args>`` (which must include ``--block``) with ``env`` (default: ours), in
        a session of its own so a signal to raynode's process group (Ctrl-C in a terminal) does
        not reach it."""
        command = [ray_executable(), "start", *args]
        logger.info("starting: %s", " ".join(command))
        popen = subprocess.Popen(
            command,
            env=env,
            start_new_session=True,
            preexec_fn=functools.partial(_die_with_parent, os.getpid()),
        )
        return cls(popen)

    @property
    def pid(self) -> int:
        return self.popen.pid

    def exit_code(self) -> int | None:
        """None while Ray runs."""
        return self.popen.poll()

    def stop(self, timeout: float = STOP_TIMEOUT_S) -> int:
        """SIGTERM to this ``ray start`` alone and wait while it drains the node; SIGKILL its
        session if it hangs. Also after Ray exited by itself: clears what it left behind."""
        if self.popen.poll() is None:
            logger.info("stopping ray start (pid %d)", self.pid)
            self.popen.send_signal(signal.SIGTERM)
            try:
                self.popen.wait(timeout)
            except subprocess.TimeoutExpired:
                logger.warning("ray start (pid %d) did not stop in %.0f s; killing it", self.pid, timeout)
                self._kill_group()
                self.popen.wait()
        self._clear_group()
        return self.popen.returncode

    def kill(self) -> int:
        """SIGKILL the node at once. Only for a node whose head is gone: draining it would wait
        ~30 s for a GCS that will never answer, and there is no cluster left to drain it from."""
        logger.info("killing ray start (pid %d) and its processes", self.pid)
        self._kill_group()
        self.popen.wait()
        self._clear_group()
        return self.popen.returncode

    def _kill_group(self) -> None:
        # start_new_session made ray start a session and group leader: the group holds this
        # node's processes (raylet, agents, workers) and nothing else.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.pid, signal.SIGKILL)

    def _group_alive(self) -> bool:
        try:
            os.killpg(self.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True

    def _clear_group(self) -> None:
        """Ray's agents can outlive ``ray start`` by a moment and hold the node's ports; a rejoin
        would then fail on them ("Failed to bind"). Wait for them, SIGKILL the stragglers."""
        deadline = time.monotonic() + GROUP_EXIT_WAIT_S
        while self._group_alive() and time.monotonic() < deadline:
            time.sleep(0.1)
        if self._group_alive():
            logger.warning("processes of ray start (pid %d) outlived it; killing them", self.pid)
            self._kill_group()
            deadline = time.monotonic() + GROUP_EXIT_WAIT_S
            while self._group_alive() and time.monotonic() < deadline:
                time.sleep(0.1)
