"""Training curves from verl's console lines: ``step:N - key:value - key:value``.

The lines reach the driver log as Ray prints them: maybe with an actor prefix
(``(TaskRunner pid=3165)``), ANSI colours, numpy reprs (``np.float64(-0.00066)``), and, on
one host with several nodes, twice. One point per step: a repeated line replaces the last.

A task's attempts share one checkpoint folder, so attempt 2 may resume at step 40 and log 41,
42, …: ``merge_attempts`` joins the attempts' curves into one, with where each attempt ran.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from tasks.logs.lines import strip_ansi

STEP = re.compile(r"(?:^|[\s)])step:(?P<step>\d+)\s+-\s+(?P<rest>.+)$")
NUMPY_WRAPPED = re.compile(r"^np\.\w+\((?P<value>.*)\)$")
TOTAL_STEPS = re.compile(r"Total training steps:\s*(?P<total>\d+)")
CHUNK = 1 << 20


@dataclass
class Curves:
    last_step: int | None = None
    total_steps: int | None = None
    series: dict[str, dict[int, float]] = field(default_factory=dict)

    def to_json(self) -> dict[str, object]:
        return {
            "last_step": self.last_step,
            "total_steps": self.total_steps,
            "series": {key: sorted(points.items()) for key, points in sorted(self.series.items())},
        }


def parse_value(text: str) -> float | None:
    text = text.strip()
    wrapped = NUMPY_WRAPPED.match(text)
    if wrapped:
        text = wrapped.group("value").strip()
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def feed_line(curves: Curves, line: str) -> None:
    line = strip_ansi(line).rstrip()
    total = TOTAL_STEPS.search(line)
    if total:
        curves.total_steps = int(total.group("total"))
        return
    match = STEP.search(line)
    if not match:
        return
    step = int(match.group("step"))
    for item in match.group("rest").split(" - "):
        key, sep, raw = item.rpartition(":")
        value = parse_value(raw) if sep else None
        if key.strip() and value is not None:
            curves.series.setdefault(key.strip(), {})[step] = value
    curves.last_step = step if curves.last_step is None else max(curves.last_step, step)


def parse_text(text: str) -> Curves:
    curves = Curves()
    for line in text.splitlines():
        feed_line(curves, line)
    return curves


def parse_log(path: Path) -> Curves:
    """Scan a driver log without holding it whole: only lines that can matter are decoded."""
    curves = Curves()
    try:
        handle = path.open("rb")
    except OSError:
        return curves
    with handle:
        pending = b""
        while chunk := handle.read(CHUNK):
            lines = (pending + chunk).split(b"\n")
            pending = lines.pop()
            for raw in lines:
                if b"step:" in raw or b"Total training steps" in raw:
                    feed_line(curves, raw.decode("utf-8", "replace"))
        if pending:
            feed_line(curves, pending.decode("utf-8", "replace"))
    return curves


@dataclass
class AttemptCurves:
    """One attempt's curves (``parse_log`` of its driver.log) and where it said it resumed."""

    attempt_no: int
    resumed_from_step: int | None
    curves: Curves


@dataclass
class Boundary:
    """Where an attempt ran on the step axis: the first and last step its own log holds (null
    when it logged none), and the checkpoint step it resumed from (null: from scratch)."""

    attempt_no: int
    first_step: int | None
    last_step: int | None
    resumed_from_step: int | None

    def to_json(self) -> dict[str, int | None]:
        return {
            "attempt_no": self.attempt_no,
            "first_step": self.first_step,
            "last_step": self.last_step,
            "resumed_from_step": self.resumed_from_step,
        }


@dataclass
class TaskCurves:
    curves: Curves
    boundaries: list[Boundary]

    def to_json(self) -> dict[str, object]:
        return {**self.curves.to_json(), "attempts": [boundary.to_json() for boundary in self.boundaries]}


def merge_attempts(attempts: Iterable[AttemptCurves]) -> TaskCurves:
    """The curves of a task's attempts (in attempt order) as one.

    A step logged by several attempts counts once: the latest attempt's values for that step
    replace all of the earlier ones' (a resumed run re-did that step from the checkpoint, so
    the earlier values belong to a trajectory that was thrown away). ``last_step`` is where
    the training is now: the last step of the latest attempt that logged one, even if an
    earlier attempt got further before it stopped. ``total_steps`` likewise comes from the
    latest attempt that printed it.
    """
    rows: dict[int, dict[str, float]] = {}  # step -> {metric: value}, the latest attempt's
    merged = Curves()
    boundaries: list[Boundary] = []
    for part in attempts:
        own: dict[int, dict[str, float]] = {}
        for key, points in part.curves.series.items():
            for step, value in points.items():
                own.setdefault(step, {})[key] = value
        rows.update(own)
        if part.curves.last_step is not None:
            merged.last_step = part.curves.last_step
        if part.curves.total_steps is not None:
            merged.total_steps = part.curves.total_steps
        first, last = (min(own), max(own)) if own else (None, None)
        boundaries.append(Boundary(part.attempt_no, first, last, part.resumed_from_step))
    for step, row in rows.items():
        for key, value in row.items():
            merged.series.setdefault(key, {})[step] = value
    return TaskCurves(merged, boundaries)


# ---- What the task page and the API say of an attempt's resume and a task's time limit.
