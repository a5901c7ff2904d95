"""Timings the Ray tests measure, printed at the end of the run (the issue's goals: worker join
≤ 15 s, rejoin after the head moved ≤ 30 s, recovery after a killed raylet ≤ 30 s)."""

from __future__ import annotations

import pytest

TIMINGS: dict[str, float] = {}


@pytest.fixture(scope="session")
def timings() -> dict[str, float]:
    return TIMINGS


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if TIMINGS:
        terminalreporter.section("raypool timings")
        for name, seconds in TIMINGS.items():
            terminalreporter.write_line(f"{name}: {seconds:.1f} s")
