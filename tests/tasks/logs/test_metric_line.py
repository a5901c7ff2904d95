"""verl's metric line, "step:N - key:value - …", has one pattern (tasks.logs.lines.METRIC_LINE):
the curves and the driver-log reader take the same lines, and read the same step from each."""

from __future__ import annotations

import pytest

from tasks.logs.curves import parse_text
from tasks.logs.driverlog import resumed_from

TRAINING_LINES = [
    "step:5 - actor/pg_loss:0.1 - timing_s/gen:12",
    "(TaskRunner pid=3165) step:5 - actor/entropy:0.119",
    "\x1b[36m(TaskRunner pid=3165)\x1b[0m step:5 - actor/entropy:0.118",
    "(WorkerDict pid=9, ip=10.0.0.2) step:5 - loss:np.float64(-0.00066)",
    # Words before it on the same line: the driver-log reader used to want the line to start with it.
    "[FullyAsyncTrainer] step:5 - actor/pg_loss:0.1",
]
NOT_METRIC_LINES = ["stepping up: 5", "some step:x - y:1", "mystep:5 - a:1", "step:5", "step:5 -"]


@pytest.mark.parametrize("line", TRAINING_LINES)
def test_both_readers_take_a_metric_line_at_its_step(line: str) -> None:
    assert parse_text(line + "\n").last_step == 5
    info = resumed_from(line + "\n")
    assert info is not None and info.step == 4  # the first training step logged is N + 1


@pytest.mark.parametrize("line", NOT_METRIC_LINES)
def test_neither_reader_takes_what_is_not_one(line: str) -> None:
    assert parse_text(line + "\n").last_step is None
    assert resumed_from(line + "\n") is None
