"""A task's checkpoints as its page and the API show them: each step with its size, whether
it is the newest complete one, and who needs it."""

from __future__ import annotations

from dataclasses import dataclass, field

from tasks.checkpoints import folders
from tasks.checkpoints.needs import needs
from tasks.jobfiles import checkpoint_dir
from tasks.models import Task
from tasks.scheduler.storage import bounded
from tasks.specs.resolved import ResolvedSpec


@dataclass(frozen=True)
class Listed:
    step: int
    bytes: int
    path: str
    latest: bool  # the newest complete one, the one a retry resumes from
    needed_by: tuple[str, ...]


@dataclass(frozen=True)
class Listing:
    keep_checkpoints: int | None  # None: a workload without checkpoints (an export)
    keep_best: dict[str, str] | None
    latest: int | None
    checkpoints: list[Listed] = field(default_factory=list)
    unread: str = ""  # why the folder could not be read (shared storage), else ""

    @property
    def total_bytes(self) -> int:
        return sum(listed.bytes for listed in self.checkpoints)


def listing(task: Task) -> Listing:
    spec = ResolvedSpec.from_json(task.spec)
    try:
        found = bounded(folders.scan, checkpoint_dir(task.user.username, task.task_id))
    except OSError as error:
        return Listing(spec.keep_checkpoints, spec.keep_best, None, unread=str(error))
    who: dict[int, list[str]] = {}
    for need in needs(task, found.latest):
        who.setdefault(need.step, []).append(need.who)
    rows = [
        Listed(c.step, c.bytes, str(c.path), c.step == found.latest, tuple(who.get(c.step, ())))
        for c in found.checkpoints
    ]
    return Listing(spec.keep_checkpoints, spec.keep_best, found.latest, rows)
