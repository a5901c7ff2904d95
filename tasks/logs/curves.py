"""Training curves, and the last step a run logged, from verl's two records of its steps.

- verl's ``file`` logger (verl/utils/tracking.py ``FileLogger``): one JSON line per logged step,
  ``{"step": N, "data": {"key": value, …}}`` (orjson, numpy values as numbers, NaN as null),
  written unbuffered to the attempt's metrics.jsonl (VERL_FILE_LOGGER_PATH, tasks.jobfiles).
  Argus adds ``file`` to every logger list it knows (tasks.specs.verl_run), so it is there
  whatever the user's trackers are.
- The console logger's lines, ``step:N - key:value - key:value``, printed only when
  ``trainer.logger`` lists ``console``. They reach the driver log as Ray prints them: maybe with
  an actor prefix (``(TaskRunner pid=3165)``), ANSI colours, numpy reprs
  (``np.float64(-0.00066)``), and, on one host with several nodes, twice; and Ray may drop the
  last ones when the driver exits first.

An attempt's curves come from its file when verl wrote one (every step, exact values), else from
its console lines, never from both: the two hold the same points, read twice they would only
disagree in rounding. verl's total (``Total training steps: N``) is in the driver log either way.
One point per step: a repeated line replaces the last.

A task's attempts share one checkpoint folder, so attempt 2 may resume at step 40 and log 41,
42, …: ``merge_attempts`` joins the attempts' curves into one, with where each attempt ran.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from tasks.logs.lines import METRIC_LINE, strip_ansi
from tasks.logs.logfile import end_lines, lines

NUMPY_WRAPPED = re.compile(r"^np\.\w+\((?P<value>.*)\)$")
TOTAL_STEPS = re.compile(r"Total training steps:\s*(?P<total>\d+)")
# How much of a file logger's end is read for its last step: many of verl's lines.
TAIL = 1 << 20


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
    match = METRIC_LINE.search(line)
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


def parse_log(path: Path, *, steps: bool = True) -> Curves:
    """Scan a driver log without holding it whole: only lines that can matter are decoded
    (``steps=False``: only verl's total, when the steps come from the file logger)."""
    curves = Curves()
    wanted = (b"step:", b"Total training steps") if steps else (b"Total training steps",)
    for raw in lines(path):
        if any(word in raw for word in wanted):
            feed_line(curves, raw.decode("utf-8", "replace"))
    return curves


def feed_record(curves: Curves, raw: bytes) -> None:
    """One line of verl's file logger. A line cut short (a crash mid-write) is skipped; so are
    values the console would not print either (text, booleans, NaN written as null)."""
    try:
        entry = json.loads(raw)
    except ValueError:
        return
    step = entry.get("step") if isinstance(entry, dict) else None
    data = entry.get("data") if isinstance(entry, dict) else None
    if not isinstance(step, int) or isinstance(step, bool) or step < 0 or not isinstance(data, dict):
        return
    for key, value in data.items():
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            number = _finite(value)
            if number is not None:
                curves.series.setdefault(str(key), {})[step] = number
    curves.last_step = step if curves.last_step is None else max(curves.last_step, step)


def parse_file_log(path: Path) -> Curves | None:
    """An attempt's curves from its file logger; None when verl wrote none (or it is unreadable)."""
    if not path.is_file():
        return None
    curves = Curves()
    for raw in lines(path):
        feed_record(curves, raw)
    return curves


def last_logged_step(path: Path) -> tuple[bool, int | None]:
    """Whether verl's file logger wrote ``path`` (it creates it as training starts), and the last
    step in it (None: none yet), read from its end: the file of a long run is large, and verl
    writes its steps in order. Raises OSError when it cannot be read."""
    end = end_lines(path, TAIL)
    if end is None:
        return False, None
    tail, cut = end
    found = Curves()
    for raw in tail:
        feed_record(found, raw)
    if found.last_step is None and cut:
        whole = parse_file_log(path)  # no whole line in the tail (lines longer than TAIL)
        return True, whole.last_step if whole else None
    return True, found.last_step


def read_attempt(driver_log: Path, metrics_log: Path) -> Curves:
    """An attempt's curves: its file logger's when verl wrote one, else its console lines'; verl's
    total from its driver log."""
    from_file = parse_file_log(metrics_log)
    console = parse_log(driver_log, steps=from_file is None)
    if from_file is None:
        return console
    from_file.total_steps = console.total_steps
    return from_file


def _finite(value: float) -> float | None:
    try:
        number = float(value)
    except OverflowError:  # an integer too large for a float
        return None
    return number if math.isfinite(number) else None


@dataclass
class AttemptCurves:
    """One attempt's curves (``read_attempt``) and where it said it resumed."""

    attempt_no: int
    resumed_from_step: int | None
    curves: Curves


@dataclass
class Boundary:
    """Where an attempt ran on the step axis: the first and last step it trained (null when it
    trained none; its validation before training, logged at the step it started from, is no
    training step), and the checkpoint step it resumed from (null: from scratch)."""

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

    A step trained by several attempts counts once: the latest attempt's values for that step
    replace all of the earlier ones' (a resumed run re-did that step from the checkpoint, so
    the earlier values belong to a trajectory that was thrown away). What an attempt logs at
    the step it starts from (verl's validation before training: step 0, or the checkpoint's
    step after a resume) is added to that step's values: the step itself was trained by the
    attempt that saved the checkpoint, and stands. ``last_step`` is where
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
        start = part.resumed_from_step or 0
        for step, row in own.items():
            if step > start:
                rows[step] = row
            else:
                rows.setdefault(step, {}).update(row)
        trained = [step for step in own if step > start]
        if part.curves.last_step is not None:
            merged.last_step = part.curves.last_step
        if part.curves.total_steps is not None:
            merged.total_steps = part.curves.total_steps
        first, last = (min(trained), max(trained)) if trained else (None, None)
        boundaries.append(Boundary(part.attempt_no, first, last, part.resumed_from_step))
    for step, row in rows.items():
        for key, value in row.items():
            merged.series.setdefault(key, {})[step] = value
    return TaskCurves(merged, boundaries)
