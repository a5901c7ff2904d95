"""Fair share: decayed usage, Slurm's factor, and the order it gives the queue (pure)."""

from __future__ import annotations

import pytest

from tasks.queue.fairshare import Waiting, decayed, factors, order

HOUR = 3600.0


def test_usage_halves_every_half_life():
    assert decayed(100.0, 168 * HOUR, 168 * HOUR) == pytest.approx(50.0)
    assert decayed(100.0, 336 * HOUR, 168 * HOUR) == pytest.approx(25.0)
    assert decayed(100.0, 0, 168 * HOUR) == 100.0


def test_the_factor_is_slurms_classic_one():
    f = factors({"alice": 300.0, "bob": 100.0}, {}, ["alice", "bob", "carol"])
    # alice used 3/4 of all with a share of 1/3: 2^(-2.25); bob 1/4: 2^(-0.75); carol nothing.
    assert f["alice"] == pytest.approx(2**-2.25)
    assert f["bob"] == pytest.approx(2**-0.75)
    assert f["carol"] == 1.0
    # Weight 3 for alice: her share is 3/5 of the lab, her usage 3/4 of it.
    weighted = factors({"alice": 300.0, "bob": 100.0}, {"alice": 3.0}, ["alice", "bob", "carol"])
    assert weighted["alice"] == pytest.approx(2 ** -(0.75 / 0.6))
    assert factors({}, {}, ["a", "b"]) == {"a": 1.0, "b": 1.0}


def test_a_lighter_users_task_passes_within_the_window_only():
    heavy, light = 0.1, 1.0
    factor = {"heavy": heavy, "light": light}
    queue = [Waiting(1, "heavy", 0, 0.0), Waiting(2, "heavy", 0, 100.0), Waiting(3, "light", 0, 1000.0)]
    # A window of 1 h: light's task (1000 s later) goes first: 1000 - 3600 < 0 - 360.
    assert [w.key for w in order(queue, factor, 3600.0)] == [3, 1, 2]
    # Submitted two hours after heavy's: beyond what the window lets it pass.
    late = [Waiting(1, "heavy", 0, 0.0), Waiting(3, "light", 0, 7200.0)]
    assert [w.key for w in order(late, factor, 3600.0)] == [1, 3]
    # Off: plain first come, first served.
    assert [w.key for w in order(queue, factor, 0.0)] == [1, 2, 3]


def test_priority_comes_before_fair_share():
    queue = [Waiting(1, "light", 0, 0.0), Waiting(2, "heavy", 10, 50.0)]
    assert [w.key for w in order(queue, {"heavy": 0.01, "light": 1.0}, 3600.0)] == [2, 1]
