"""What verl and Ray said in a running attempt's driver.log, in the part sync read this tick
(tasks.logs.logfile.read_new: only what was added since the last): the step it resumed from
(``resumed_from``), a placement Ray cannot give (``placement_stuck``) and the tracker's run
(``tracker_url``).

Pure: strings in, values out; no files, no Django. The words matched are the real ones, quoted
in tests/tasks/logs/test_driverlog.py with where each was seen.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from tasks.logs.lines import METRIC_LINE, clean_lines

# Where verl says where it started (its words, read in verl 0.9.1's source):
# - the default (v1) trainer (trainer/ppo/v1/trainer_base.py _load_checkpoint) logs through Python's
#   logging, "INFO:<date>:Resuming from <dir>/global_step_N, setting global step to N", or
#   "INFO:<date>:Training from scratch" when resume_mode=auto finds nothing;
# - the legacy trainer (trainer/ppo/ray_trainer.py) prints "Setting global step to N", then
#   "Resuming from <dir>/global_step_N", or "Training from scratch";
# - the fully-async trainer prints "[FullyAsyncTrainer] Resuming from  <dir>/global_step_N" (its
#   "Setting global step to" counts something else), its rollouter "[FullyAsyncRollouter] Training
#   from scratch (no checkpoint found)";
# - SFT (CheckpointHandler): "Found latest checkpoint: <dir>/global_step_N (step N)", and nothing at
#   all from scratch. resume_mode=disable says nothing either.
# The checkpoint folder's number is the step it resumed from, whichever trainer wrote it.
LOG_RECORD = r"(?:[A-Z]+:\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+:)?(?:\[\w+\] )?"
RESUMED = re.compile(
    rf"^{LOG_RECORD}(?:Resuming from\s+.*global_step_(?P<step>\d+)\b"
    r"|Setting global step to (?P<legacy>\d+)\s*$"
    r"|Found latest checkpoint: .* \(step (?P<sft>\d+)\)\s*$)"
)
SCRATCH = re.compile(rf"^{LOG_RECORD}Training from scratch\b")
# A metric line (lines.METRIC_LINE): logged as N = the step it resumed from + 1. Validation
# before training logs "step:N - val-…" at the step it starts from (0, or the checkpoint's), which
# says nothing about it: a line whose keys are all "val-…" is passed over.

# Ray's autoscaler, repeated (every ~35 s here) while a request (a placement group's bundles summed, an
# actor) fits on no node: "Error: No available node types can fulfill resource request {...}". verl
# waits on its placement groups with no timeout, so this line is the only sign that it never will
# start. A request that fits a node whose resources are busy waits without a word from Ray
# (tests/standin/logs/busy.log): only the stall timeout sees that one.
INFEASIBLE = re.compile(r"^Error: No available node types can fulfill resource requests?\b")


# What W&B prints once its run starts, "wandb: 🚀 View run at https://wandb.ai/<entity>/<project>/runs/<id>"
# (SwanLab: "swanlab: 🚀 View run at https://swanlab.cn/@<user>/<project>/runs/<id>"); the URL may be
# coloured and underlined (ANSI codes, which clean_lines removes).
TRACKER_URL = re.compile(r"^(?:wandb|swanlab): .*\bView run at (?P<url>https://[^\s'\"<>]{1,480})\s*$")


@dataclass(frozen=True)
class ResumeInfo:
    """Where verl started: ``step`` 0 is from scratch, N resumed from global_step_N."""

    step: int
    line: str

    @property
    def from_scratch(self) -> bool:
        return self.step == 0


def resumed_from(text: str) -> ResumeInfo | None:
    """Where verl started, from the first line in ``text`` that tells; None while none has.

    verl's own words first; when it has none (SFT from scratch, resume_mode=disable), the first
    training step's metric line: it says step 1 from scratch, N+1 after a resume from N.
    """
    for line in clean_lines(text):
        if match := RESUMED.match(line):
            return ResumeInfo(int(match["step"] or match["legacy"] or match["sft"]), line)
        if SCRATCH.match(line):
            return ResumeInfo(0, line)
        if (match := METRIC_LINE.search(line)) and int(match["step"]) > 0 and not _validation_only(match["rest"]):
            return ResumeInfo(int(match["step"]) - 1, line)
    return None


def _validation_only(items: str) -> bool:
    return all(item.startswith("val-") for item in items.split(" - "))


def tracker_url(text: str) -> str | None:
    """The last tracker run URL in ``text`` (None when none is there)."""
    found = None
    for line in clean_lines(text):
        if match := TRACKER_URL.match(line):
            found = match["url"]
    return found


def placement_stuck(text: str) -> str | None:
    """The last line in ``text`` where Ray says a request fits on no node, to quote in a reason."""
    found = None
    for line in clean_lines(text):
        if INFEASIBLE.match(line):
            found = line
    return found
