"""Successive halving on a sweep's metric (as ASHA and W&B's hyperband do), as plain functions:
the tick (tasks.sweeps.curves) reads the curves and keeps the values; these decide.

- Rungs: ``min_steps``, ``min_steps × eta``, ``min_steps × eta²``, …
- A trial's value at a rung: the last point of its metric logged at a step at or before the rung
  (verl validates every ``test_freq`` steps, which need not fall on a rung), judged once the
  trial's logged step has reached the rung (what it logged later cannot change that value). A
  rung with no point at or before it is not judged for that trial.
- The cutoff: of the n values recorded at the rung by the sweep's trials so far (this trial's
  included, ended trials' too), the k-th best, k = max(1, floor(n / eta)): the top 1/eta go on.
- The verdict: a value strictly worse than the cutoff stops the trial; a tie goes on.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from tasks.sweeps.models import Mode


@dataclass(frozen=True)
class Verdict:
    """A trial's value at a rung against the cutoff of the values recorded there."""

    rung: int
    step: int  # where the value was logged: the last point at or before the rung
    value: float
    cutoff: float
    kept: int  # k: how many of the values at the rung go on
    recorded: int  # n: the values recorded at the rung, this trial's included
    stop: bool


def rungs(min_steps: int, eta: int, up_to: int) -> Iterator[int]:
    """The rungs a trial whose logged step is ``up_to`` has reached, lowest first."""
    rung = _first(min_steps, eta)
    while rung <= up_to:
        yield rung
        rung *= eta


def next_rung(min_steps: int, eta: int, after: int | None) -> int:
    """The lowest rung above step ``after`` (None: no step yet, so the first)."""
    rung = _first(min_steps, eta)
    while after is not None and rung <= after:
        rung *= eta
    return rung


def _first(min_steps: int, eta: int) -> int:
    if min_steps < 1 or eta < 2:
        raise ValueError(f"successive halving needs min_steps >= 1 and eta >= 2, not {min_steps} and {eta}")
    return min_steps


def value_at(points: Sequence[tuple[int, float]], rung: int) -> tuple[int, float] | None:
    """The last point (step, value) at a step at or before ``rung``; ``points`` in step order."""
    found = None
    for step, value in points:
        if step > rung:
            break
        found = (step, value)
    return found


def better(value: float, than: float, mode: str) -> bool:
    """Whether ``value`` is strictly better than ``than`` on a metric of ``mode``."""
    return value > than if mode == Mode.MAX else value < than


def cutoff(values: Sequence[float], eta: int, mode: str) -> tuple[float, int]:
    """The k-th best of ``values`` (k = max(1, floor(n / eta))), and k."""
    if not values:
        raise ValueError("no values at the rung")
    kept = max(1, len(values) // eta)
    ranked = sorted(values, reverse=mode == Mode.MAX)
    return ranked[kept - 1], kept


def judge(rung: int, step: int, value: float, recorded: Sequence[float], eta: int, mode: str) -> Verdict:
    """The verdict on ``value`` (logged at ``step``) at ``rung``, where ``recorded`` are all the
    values recorded at the rung, ``value`` among them."""
    line, kept = cutoff(recorded, eta, mode)
    return Verdict(
        rung=rung,
        step=step,
        value=value,
        cutoff=line,
        kept=kept,
        recorded=len(recorded),
        stop=better(line, value, mode),
    )
