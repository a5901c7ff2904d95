"""Training curves from verl's console lines: ``step:N - key:value - key:value``.

The lines reach the driver log as Ray prints them: maybe with an actor prefix
(``(TaskRunner pid=3165)``), ANSI colours, numpy reprs (``np.float64(-0.00066)``), and, on
one host with several nodes, twice. One point per step: a repeated line replaces the last.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path

from tasks.scheduler.failures import strip_ansi

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
