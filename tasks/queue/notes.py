"""A waiting task's place in the queue, in words: when it should start, whose tasks are ahead of
it, and which of them passed it by fair share.

"about 14:20 UTC, behind 2 tasks of bob's and 1 of yours; 1 task of a lighter user (carol) goes
first (fair share)"; with groups, a task of another group passes as "of a user of a lighter group"
(groups come first in fair share, tasks.queue.fairshare.fair_tree).

Pure functions over the waiting tasks in scheduling order (tasks.queue.order.in_order), so that
the queue API and the queue page say the same thing and tests need no database.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

# Owners named in "behind …" before the rest are summed up: a long list reads as noise.
NAMED_OWNERS = 3


@dataclass(frozen=True)
class Placed:
    """A waiting task as its note needs it."""

    owner: str
    priority: int  # Task.priority_rank: higher goes first
    submitted: datetime
    estimated_start_at: datetime | None = None
    group: str = ""  # its owner's group ("": none)


def about(when: datetime, now: datetime) -> str:
    """An estimated start in words, to the minute, in UTC (the site's zone): ``about 14:20 UTC``,
    ``about Mar 4, 14:20 UTC`` on another day, ``about now`` once it has passed (the scheduler
    starts it at a tick, or plans it again)."""
    if when <= now:
        return "about now"
    if when.date() == now.date():
        return f"about {when:%H:%M} UTC"
    return f"about {when:%b} {when.day}, {when:%H:%M} UTC"


def note(ordered: Sequence[Placed], index: int, viewer: str, now: datetime) -> str:
    """The note for ``ordered[index]``, as ``viewer`` reads it (their own tasks are "yours")."""
    task = ordered[index]
    ahead = ordered[:index]
    parts = [about(task.estimated_start_at, now)] if task.estimated_start_at else []
    parts.append(_behind(ahead, viewer) if ahead else "first in line")
    words = ", ".join(parts)
    # Only a lighter user's task can pass an earlier one of the same priority (tasks.queue.
    # fairshare.order): a task submitted later yet ahead of it is one that fair share moved up.
    passed = [t for t in ahead if t.priority == task.priority and t.submitted > task.submitted]
    if passed:
        words += f"; {_passed_by(passed, viewer, task.group)}"
    return words


def _behind(ahead: Sequence[Placed], viewer: str) -> str:
    """``behind 2 tasks of bob's, 1 of carol's and 1 of yours``: owners nearest the head first."""
    counts: dict[str, int] = {}
    for task in ahead:
        counts[task.owner] = counts.get(task.owner, 0) + 1
    owners = list(counts)
    named = owners[:NAMED_OWNERS]
    if viewer in counts and viewer not in named:
        # The viewer's own tasks ahead are what they most want to know about: always named.
        named = [*owners[: NAMED_OWNERS - 1], viewer]
    groups = []
    for n, owner in enumerate(named):
        whose = "yours" if owner == viewer else f"{owner}'s"
        noun = f" {_tasks(counts[owner])}" if n == 0 else ""
        groups.append(f"{counts[owner]}{noun} of {whose}")
    rest = [owner for owner in owners if owner not in named]
    if rest:
        others = "another user" if len(rest) == 1 else f"{len(rest)} other users"
        groups.append(f"{sum(counts[owner] for owner in rest)} more of {others}")
    return "behind " + _listed(groups)


def _passed_by(passed: Sequence[Placed], viewer: str, group: str) -> str:
    """``3 tasks of lighter users (bob, carol) go first (fair share)``; ``group``: the passed
    task's owner's, as a passer of another group is not lighter as a user but as a group."""
    users = list(dict.fromkeys(task.owner for task in passed))
    names = ["you" if user == viewer else user for user in users[:NAMED_OWNERS]]
    if len(users) > NAMED_OWNERS:
        names.append(f"{len(users) - NAMED_OWNERS} more")
    others = {task.group for task in passed} != {group}
    if len(users) == 1:
        who = "a user of a lighter group" if others else "a lighter user"
    elif all(task.group != group for task in passed):
        who = "users of lighter groups"
    else:
        who = "lighter users and groups" if others else "lighter users"
    verb = "goes" if len(passed) == 1 else "go"
    return f"{len(passed)} {_tasks(len(passed))} of {who} ({', '.join(names)}) {verb} first (fair share)"


def _tasks(count: int) -> str:
    return "task" if count == 1 else "tasks"


def _listed(items: Sequence[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}"
