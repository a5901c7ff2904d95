"""A waiting task's note in words (tasks.queue.notes): pure, no database."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from tasks.queue.notes import Placed, about, note

NOW = datetime(2026, 3, 4, 12, 0, tzinfo=UTC)


def at(minutes: int) -> datetime:
    """Submitted ``minutes`` before NOW."""
    return NOW - timedelta(minutes=minutes)


def test_the_head_of_the_queue_is_first_in_line() -> None:
    assert note([Placed("alice", 0, at(5))], 0, "alice", NOW) == "first in line"


def test_it_gives_the_estimated_start_then_whose_tasks_are_ahead() -> None:
    ordered = [
        Placed("bob", 0, at(50)),
        Placed("bob", 0, at(40)),
        Placed("alice", 0, at(30)),
        Placed("carol", 0, at(20), estimated_start_at=NOW.replace(hour=14, minute=20)),
    ]
    assert note(ordered, 3, "alice", NOW) == "about 14:20 UTC, behind 2 tasks of bob's and 1 of yours"
    assert note(ordered, 3, "dave", NOW) == "about 14:20 UTC, behind 2 tasks of bob's and 1 of alice's"
    assert note(ordered, 1, "alice", NOW) == "behind 1 task of bob's"


def test_owners_are_grouped_nearest_the_head_first_and_the_rest_summed_up() -> None:
    owners = ["bob", "carol", "bob", "dave", "erin", "alice", "frank", "erin"]
    ordered = [Placed(owner, 0, at(100 - n)) for n, owner in enumerate(owners)] + [Placed("zoe", 0, at(1))]
    # Three owners named; the viewer's own always among them.
    assert (
        note(ordered, 8, "alice", NOW)
        == "behind 2 tasks of bob's, 1 of carol's, 1 of yours and 4 more of 3 other users"
    )
    assert (
        note(ordered, 8, "zoe", NOW) == "behind 2 tasks of bob's, 1 of carol's, 1 of dave's and 4 more of 3 other users"
    )
    assert note(ordered, 4, "zoe", NOW) == "behind 2 tasks of bob's, 1 of carol's and 1 of dave's"
    assert (
        note(ordered, 5, "zoe", NOW) == "behind 2 tasks of bob's, 1 of carol's, 1 of dave's and 1 more of another user"
    )


def test_it_says_when_lighter_users_passed_it_by_fair_share() -> None:
    ordered = [
        Placed("carol", 0, at(10)),
        Placed("bob", 0, at(5)),
        Placed("bob", 0, at(4)),
        Placed("alice", 0, at(30)),  # the heavy one: submitted first, passed by three
    ]
    assert note(ordered, 3, "alice", NOW) == (
        "behind 1 task of carol's and 2 of bob's; 3 tasks of lighter users (carol, bob) go first (fair share)"
    )
    assert note(ordered, 2, "alice", NOW) == "behind 1 task of carol's and 1 of bob's"


def test_a_higher_priority_or_an_earlier_task_ahead_is_no_fair_share_pass() -> None:
    ordered = [
        Placed("bob", 1, at(1)),  # high priority: ahead of everything normal, whenever submitted
        Placed("carol", 0, at(40)),  # submitted earlier
        Placed("dave", 0, at(5)),  # lighter: passed alice
        Placed("alice", 0, at(30)),
    ]
    assert note(ordered, 3, "bob", NOW) == (
        "behind 1 task of yours, 1 of carol's and 1 of dave's; 1 task of a lighter user (dave) goes first (fair share)"
    )


def test_the_viewer_may_be_the_lighter_user() -> None:
    ordered = [Placed("alice", 0, at(5)), Placed("alice", 0, at(4)), Placed("bob", 0, at(30))]
    assert note(ordered, 2, "alice", NOW) == (
        "behind 2 tasks of yours; 2 tasks of a lighter user (you) go first (fair share)"
    )


def test_an_estimate_reads_in_utc_with_the_day_when_it_is_not_today() -> None:
    assert about(NOW + timedelta(minutes=90), NOW) == "about 13:30 UTC"
    assert about(NOW + timedelta(days=1, hours=2), NOW) == "about Mar 5, 14:00 UTC"
    assert about(NOW - timedelta(minutes=1), NOW) == "about now"


def test_a_task_of_a_lighter_group_passes_as_such() -> None:
    ordered = [
        Placed("bob", 0, at(5), group="nlp"),  # a lighter group's user, however heavy himself
        Placed("carol", 0, at(4), group="vision"),  # alice's group's lighter user
        Placed("dan", 0, at(3), group="nlp"),
        Placed("alice", 0, at(30), group="vision"),
    ]
    assert note(ordered[:1] + ordered[3:], 1, "alice", NOW) == (
        "behind 1 task of bob's; 1 task of a user of a lighter group (bob) goes first (fair share)"
    )
    others = [ordered[0], ordered[2], ordered[3]]
    assert note(others, 2, "alice", NOW).endswith("2 tasks of users of lighter groups (bob, dan) go first (fair share)")
    assert note(ordered, 3, "alice", NOW).endswith(
        "3 tasks of lighter users and groups (bob, carol, dan) go first (fair share)"
    )
    assert note(ordered[1:2] + ordered[3:], 1, "alice", NOW).endswith(
        "1 task of a lighter user (carol) goes first (fair share)"
    )
