"""devkit.wait.wait_for, the one way tests and benches wait for a condition, on a clock the test
moves: no real time passes."""

from __future__ import annotations

import pytest

from devkit import wait


class Clock:
    """time.monotonic and time.sleep as devkit.wait sees them: sleeping moves the clock."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.now = 100.0
        self.sleeps: list[float] = []
        monkeypatch.setattr("devkit.wait.time.monotonic", lambda: self.now)
        monkeypatch.setattr("devkit.wait.time.sleep", self.sleep)

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    return Clock(monkeypatch)


def test_it_returns_the_first_truthy_answer_polling_at_the_interval(clock: Clock) -> None:
    answers = iter([None, 0, "", "ready", "later"])
    assert wait.wait_for(lambda: next(answers), "ready", timeout=10, interval=0.5) == "ready"
    assert clock.sleeps == [0.5, 0.5, 0.5]


def test_it_fails_naming_what_it_waited_for_once_the_timeout_has_passed(clock: Clock) -> None:
    calls: list[float] = []

    def never() -> bool:
        calls.append(clock.now)
        return False

    with pytest.raises(AssertionError, match=r"timed out after 2 s waiting for the head to answer"):
        wait.wait_for(never, "the head to answer", timeout=2, interval=0.5)
    assert calls[-1] > 102  # the condition is asked once more past the deadline, then it fails
    assert len(calls) == 6


def test_it_asks_at_least_once_however_short_the_timeout(clock: Clock) -> None:
    assert wait.wait_for(lambda: 7, "a number", timeout=0) == 7
    assert clock.sleeps == []
