"""Which checkpoints go: the rule, pure (tasks.checkpoints.prune applies it)."""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence


def doomed(steps: Sequence[int], latest: int | None, keep: int, needed: Collection[int]) -> list[int]:
    """The steps to delete: those older than the newest complete one (``latest``) beyond the
    ``keep`` newest up to it, but for the ``needed`` ones. Nothing while no step is known to be
    complete (verl once deleted the old checkpoint before the new one was saved, and a full disk
    lost both), nor when ``keep`` is 0 (keep all). A step newer than ``latest`` is being written."""
    if not keep or latest is None:
        return []
    up_to = sorted(step for step in steps if step <= latest)
    kept = {*up_to[-keep:], *needed}
    return [step for step in up_to if step not in kept and step < latest]


def best_step(values: Mapping[int, float], steps: Collection[int], mode: str) -> int | None:
    """The step with a checkpoint whose metric value is best (``mode`` max or min; on a tie the
    later step); None when no step with a checkpoint has a value. A NaN (a diverged validation)
    is no value: every comparison with it is false, so it would win as the first seen."""
    scored = [(values[step], step) for step in steps if step in values and not math.isnan(values[step])]
    if not scored:
        return None
    sign = 1 if mode == "max" else -1
    return max(scored, key=lambda item: (sign * item[0], item[1]))[1]
