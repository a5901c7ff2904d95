"""The disk-usage scan: what the periodic job ``argus-disk-usage`` runs (django-q2, beside the
tick, never inside it: a home of millions of files must not slow scheduling).

One pass over each home with os.scandir, summing the files' sizes; symlinks are counted as
links, never followed (a link to a dataset is not the user's bytes, and a loop never ends).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from pathlib import Path

from django.conf import settings
from django.contrib.auth.models import User
from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone

from accounts.diskusage.models import DiskUsage
from accounts.homes import home_dir

logger = logging.getLogger(__name__)


def tree_bytes(root: Path) -> int:
    """The apparent sizes of the files under ``root`` (0 when it does not exist), symlinks not
    followed. Iterative: a deep tree cannot exhaust the stack."""
    total = 0
    pending = [os.fspath(root)]
    while pending:
        folder = pending.pop()
        try:
            with os.scandir(folder) as entries:
                for entry in entries:
                    try:
                        if entry.is_dir(follow_symlinks=False):
                            pending.append(entry.path)
                        else:
                            total += entry.stat(follow_symlinks=False).st_size
                    except OSError:  # removed while we looked (a checkpoint pruned): not there
                        continue
        except (FileNotFoundError, NotADirectoryError):  # the root missing, or a folder removed meanwhile
            continue
        except OSError as exc:  # unreadable (a job's folder with another owner's modes, say)
            logger.warning("Disk usage: cannot read %s (%s): not counted", folder, exc.strerror or exc)
            continue
    return total


def measure_all(clock: Callable[[], float] = time.monotonic) -> int:
    """Measure users' homes, the longest unmeasured first, until ARGUS_DISK_SCAN_BUDGET_S is
    spent (checked between users: each user's total is of one whole pass, never a partial one;
    the next run goes on with those left). Returns how many users were measured."""
    deadline = clock() + settings.ARGUS_DISK_SCAN_BUDGET_S
    users = User.objects.order_by(F("disk_usage__measured_at").asc(nulls_first=True), "pk")
    measured = 0
    for user_id, username in users.values_list("pk", "username"):
        if measured and clock() >= deadline:
            break
        used = tree_bytes(home_dir(username))
        now = timezone.now()
        try:
            with transaction.atomic():
                DiskUsage.objects.update_or_create(user_id=user_id, defaults={"used_bytes": used, "measured_at": now})
        except IntegrityError:  # the user was deleted while their home was scanned
            continue
        measured += 1
    logger.info("Disk usage measured for %d users", measured)
    return measured
