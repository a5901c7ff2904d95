"""Shared storage, bounded: every file call the tick makes waits at most ARGUS_STORAGE_TIMEOUT_S.

A slow shared filesystem (NFS, GPFS) can block a read or a write for minutes; a tick blocked
that long outlives its lease while another scheduler takes over. The calls run on a few threads
of their own: one that overruns raises ``StorageTimeout`` (an ``OSError``, so every caller's
storage error path handles it) and the tick goes on. The thread itself cannot be interrupted;
it finishes or hangs on its own, and a pool of hung threads only makes later calls time out too.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from typing import ParamSpec, TypeVar

from django.conf import settings

P = ParamSpec("P")
R = TypeVar("R")

_pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="argus-storage")


class StorageTimeout(OSError):
    """Shared storage did not answer within ARGUS_STORAGE_TIMEOUT_S."""


def bounded(call: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
    """``call(*args, **kwargs)``, or StorageTimeout once ARGUS_STORAGE_TIMEOUT_S has passed."""
    limit = settings.ARGUS_STORAGE_TIMEOUT_S
    future = _pool.submit(call, *args, **kwargs)
    try:
        return future.result(timeout=limit)
    except FutureTimeout:
        name = getattr(call, "__name__", "a file call")
        raise StorageTimeout(f"shared storage did not answer within {limit:g} s ({name})") from None
