"""Successive halving's rules (tasks.sweeps.early_stop), as plain functions: the rungs, a trial's
value at a rung, the cutoff and the verdict."""

from __future__ import annotations

import pytest

from tasks.sweeps.early_stop import better, cutoff, judge, next_rung, rungs, value_at


def test_the_rungs_are_min_steps_times_powers_of_eta_up_to_the_logged_step() -> None:
    assert list(rungs(10, 2, 9)) == []
    assert list(rungs(10, 2, 10)) == [10]
    assert list(rungs(10, 2, 79)) == [10, 20, 40]
    assert list(rungs(10, 2, 80)) == [10, 20, 40, 80]
    assert list(rungs(3, 3, 26)) == [3, 9]
    assert list(rungs(3, 3, 27)) == [3, 9, 27]
    assert list(rungs(1, 4, 16)) == [1, 4, 16]


def test_the_next_rung_is_the_lowest_above_a_step() -> None:
    assert next_rung(10, 2, None) == 10
    assert [next_rung(10, 2, step) for step in (0, 9, 10, 19, 20, 39, 40)] == [10, 10, 20, 20, 40, 40, 80]
    assert next_rung(3, 3, 3) == 9


@pytest.mark.parametrize(("min_steps", "eta"), [(0, 2), (10, 1), (10, 0)])
def test_rungs_that_never_grow_are_refused(min_steps: int, eta: int) -> None:
    with pytest.raises(ValueError, match="min_steps >= 1 and eta >= 2"):
        list(rungs(min_steps, eta, 100))
    with pytest.raises(ValueError, match="min_steps >= 1 and eta >= 2"):
        next_rung(min_steps, eta, 100)


def test_the_value_at_a_rung_is_the_last_point_at_or_before_it() -> None:
    # verl validates every test_freq steps (here 4) and before training (step 0).
    points = [(0, 0.2), (4, 0.3), (8, 0.35), (12, 0.5)]
    assert value_at(points, 8) == (8, 0.35)  # on the rung
    assert value_at(points, 10) == (8, 0.35)  # between validations: the last before
    assert value_at(points, 3) == (0, 0.2)
    assert value_at(points, 100) == (12, 0.5)


def test_a_rung_with_no_point_at_or_before_it_has_no_value() -> None:
    assert value_at([(12, 0.5), (24, 0.6)], 10) is None
    assert value_at([], 10) is None


@pytest.mark.parametrize(
    ("values", "eta", "best", "kept"),
    [
        ([0.5], 2, 0.5, 1),  # alone at the rung: its own value
        ([0.5, 0.7], 2, 0.7, 1),
        ([0.5, 0.7, 0.6], 2, 0.7, 1),  # floor(3 / 2) = 1
        ([0.5, 0.7, 0.6, 0.4], 2, 0.6, 2),  # the top half: the 2nd best
        ([0.1, 0.2, 0.3, 0.4, 0.5], 3, 0.5, 1),  # eta 3: floor(5 / 3) = 1
        ([0.1, 0.2, 0.3, 0.4, 0.5, 0.6], 3, 0.5, 2),  # floor(6 / 3) = 2
        ([0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9], 3, 0.7, 3),
    ],
)
def test_the_cutoff_is_the_kth_best_of_the_values_at_the_rung(values, eta, best, kept) -> None:
    assert cutoff(values, eta, "max") == (best, kept)


def test_with_mode_min_the_best_are_the_lowest() -> None:
    assert cutoff([0.5, 0.7, 0.6, 0.4], 2, "min") == (0.5, 2)
    assert better(0.4, 0.5, "min") and not better(0.5, 0.4, "min")
    assert better(0.5, 0.4, "max") and not better(0.4, 0.5, "max")
    assert not better(0.5, 0.5, "min") and not better(0.5, 0.5, "max")


def test_a_value_strictly_worse_than_the_cutoff_stops_the_trial() -> None:
    verdict = judge(10, 8, 0.4, [0.6, 0.5, 0.4], 2, "max")
    assert (verdict.rung, verdict.step, verdict.value, verdict.cutoff) == (10, 8, 0.4, 0.6)
    assert (verdict.kept, verdict.recorded, verdict.stop) == (1, 3, True)
    assert not judge(10, 10, 0.6, [0.6, 0.5, 0.4], 2, "max").stop  # the best goes on


def test_the_first_trial_at_a_rung_goes_on_whatever_its_value() -> None:
    assert not judge(10, 10, 0.01, [0.01], 2, "max").stop
    assert not judge(10, 10, 99.0, [99.0], 2, "min").stop


def test_a_tie_with_the_cutoff_goes_on() -> None:
    assert not judge(10, 10, 0.6, [0.6, 0.6], 2, "max").stop
    assert not judge(10, 10, 0.6, [0.6, 0.6, 0.5, 0.7], 2, "max").stop  # the 2nd best is 0.6, as it
    assert not judge(10, 10, 0.3, [0.3, 0.3, 0.5], 2, "min").stop


def test_with_mode_min_a_value_above_the_cutoff_stops() -> None:
    # A loss: lower is better.
    assert judge(10, 10, 0.9, [0.2, 0.9], 2, "min").stop
    assert not judge(10, 10, 0.2, [0.2, 0.9], 2, "min").stop
    verdict = judge(20, 20, 0.5, [0.1, 0.2, 0.3, 0.5], 2, "min")
    assert (verdict.cutoff, verdict.kept, verdict.stop) == (0.2, 2, True)


def test_eta_3_keeps_the_top_third() -> None:
    values = [0.9, 0.8, 0.7, 0.6, 0.5, 0.4]  # k = 2: the cutoff is 0.8
    assert [judge(9, 9, value, values, 3, "max").stop for value in values] == [False, False, True, True, True, True]
    # Two at the rung: k = max(1, 0) = 1, the better of the two goes on.
    assert judge(3, 3, 0.5, [0.9, 0.5], 3, "max").stop


def test_a_trial_reaching_a_rung_after_others_ended_is_judged_against_their_values() -> None:
    # Three trials ended with these values at the rung; a fourth arrives: n = 4, k = 2.
    ended = [0.8, 0.3, 0.6]
    assert judge(10, 10, 0.5, [*ended, 0.5], 2, "max").stop  # below 0.6
    assert not judge(10, 10, 0.7, [*ended, 0.7], 2, "max").stop  # the 2nd best itself
