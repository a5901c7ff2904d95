"""Whether an attempt whose job exited 0 trained to its end: decided on what a record positively
says, never on a line that is missing.

verl can exit 0 without training to its end (verl#7401: a resumed run at an epoch boundary ends
at once and reports success): such an attempt is INCOMPLETE, a real failure (max_retries
applies). But runs that did finish may print no step line at all: one whose ``trainer.logger``
lists no ``console`` (verl then prints none), one that only validates (``trainer.val_only=True``:
verl logs its validation at the step it starts from and returns).

What is read once the job has ended, and what each says:

1. The run's total steps (Task.total_steps: verl's ``Total training steps: N`` in the driver log,
   else the spec's): without one there is nothing to fall short of.
2. A record of every step the run logged: its file logger's metrics.jsonl when verl wrote one
   (verl creates it as training starts, so an empty one says no step was logged), else its
   console lines when its console was on (the command lists it, or a step line is there). A
   console with no line says nothing of where the run was unless verl said where it started.
3. Where it started: the step verl said it resumed from (0: from scratch).
4. The task's checkpoint tracker, ``latest_checkpointed_iteration.txt``: a step it reached for
   certain; and where verl saves its last step into that folder (tasks.specs.verl_run), a tracker
   below the total after the end says the last step never came, whatever the loggers.

A run that only validates has no step to reach. Where nothing says it stopped short, it finished.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tasks.attempts import Attempt
from tasks.jobfiles import checkpoint_dir
from tasks.models import Task
from tasks.scheduler.settle import checkpoint_step
from tasks.scheduler.watch import catch_up, file_logged
from tasks.specs.builders import build_argv
from tasks.specs.verl_run import RunFacts, facts

FILE_RECORD = "its file logger"
CONSOLE_RECORD = "its console log"


@dataclass(frozen=True)
class Evidence:
    """What an ended attempt's records say. ``record``: which complete record of its steps there
    is (FILE_RECORD, CONSOLE_RECORD, or "" for none) and ``logged`` its last step (None: none);
    ``started_at``: the step verl said it started from (0: from scratch; None: not said);
    ``checkpoint``: the step the task's tracker names (0: no checkpoint; None: unreadable)."""

    total: int | None
    record: str = ""
    logged: int | None = None
    started_at: int | None = None
    checkpoint: int | None = None
    run: RunFacts = field(default_factory=RunFacts)

    def shortfall(self) -> str | None:
        """The line that says training stopped before its total; None when it did not, or when
        nothing says it did."""
        if self.run.validates_only or not self.total:
            return None
        reached = max((s for s in (self.logged, self.started_at, self.checkpoint) if s is not None), default=0)
        if reached >= self.total:
            return None
        # A silent console says nothing unless verl said where it started; an empty file says
        # training started and logged nothing.
        if self.record == FILE_RECORD or (self.record and (self.logged, self.started_at) != (None, None)):
            return f"verl exited at step {reached} of {self.total} (per {self.record})"
        if self.run.saves_last_step and self.checkpoint is not None:
            return (
                f"verl exited at step {reached} of {self.total} (its last checkpoint is step {self.checkpoint}; "
                "verl saves one at its last step)"
            )
        return None


def shortfall(task: Task, attempt: Attempt) -> str | None:
    """Read an ended attempt's evidence (bounded, like every file call of the tick), note the last
    step its record holds, and say whether it stopped short (see ``Evidence.shortfall``)."""
    catch_up(task, attempt)  # the console lines, verl's total and its start, to the log's end
    folder = checkpoint_dir(task.user.username, task.task_id)
    run = facts(build_argv(task.resolved, username=task.user.username, checkpoint_dir=folder), folder)
    written, logged = file_logged(task, attempt)
    if written:
        record = FILE_RECORD
        if logged is not None and logged != attempt.last_step:
            attempt.last_step = logged
            attempt.save(update_fields=["last_step"])
    else:
        logged = attempt.last_step
        record = CONSOLE_RECORD if run.console or logged is not None else ""
    started_at = (attempt.resumed_from_step or 0) if attempt.resume_known else None
    total = task.total_steps(attempt.total_steps or None)
    evidence = Evidence(int(total) if total else None, record, logged, started_at, checkpoint_step(task), run)
    return evidence.shortfall()
