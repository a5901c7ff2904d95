"""The retention rule, pure: which steps go (tasks.checkpoints.retention)."""

from __future__ import annotations

from tasks.checkpoints.retention import best_step, doomed


def test_it_keeps_the_newest_up_to_the_complete_one() -> None:
    assert doomed([1, 2, 3, 4], latest=4, keep=2, needed=()) == [1, 2]
    assert doomed([1, 2, 3, 4], latest=4, keep=1, needed=()) == [1, 2, 3]
    assert doomed([3, 4], latest=4, keep=2, needed=()) == []


def test_a_newer_step_not_complete_yet_deletes_nothing() -> None:
    """The tracker still names step 1 while step 2 is written: step 1 stays, whatever keep says."""
    assert doomed([1, 2], latest=1, keep=1, needed=()) == []
    # and it counts nothing for keep: the two newest complete ones up to the tracker's stay.
    assert doomed([1, 2, 3, 4], latest=3, keep=2, needed=()) == [1]


def test_nothing_goes_while_no_step_is_known_complete_or_when_all_are_kept() -> None:
    assert doomed([1, 2, 3], latest=None, keep=1, needed=()) == []
    assert doomed([1, 2, 3], latest=3, keep=0, needed=()) == []


def test_a_needed_step_stays() -> None:
    assert doomed([1, 2, 3, 4], latest=4, keep=1, needed={2}) == [1, 3]


def test_the_best_step_is_the_best_value_among_steps_with_a_checkpoint() -> None:
    values = {1: 0.5, 2: 0.9, 3: 0.7, 5: 0.99}  # step 5 has no checkpoint
    assert best_step(values, [1, 2, 3, 4], "max") == 2
    assert best_step(values, [1, 2, 3, 4], "min") == 1
    assert best_step({1: 0.5, 3: 0.5}, [1, 3], "max") == 3  # a tie: the later
    assert best_step({5: 1.0}, [1, 2], "max") is None


def test_a_nan_value_is_never_the_best() -> None:
    """A diverged validation (NaN) is no best: compared with NaN every value looks no better, so it
    would win as the first seen and the real best step would be deleted (found in review)."""
    nan = float("nan")
    assert best_step({1: nan, 2: 0.9, 3: 0.7}, [1, 2, 3], "max") == 2
    assert best_step({1: nan, 2: 0.9, 3: 0.7}, [1, 2, 3], "min") == 3
    assert best_step({1: nan}, [1], "max") is None
