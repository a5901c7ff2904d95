"""Follow a task to its end: its attempts' logs as they are written, and a step progress bar; and
a pipeline, each of its steps' tasks in turn."""

from __future__ import annotations

import sys
import time
from typing import Any

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.text import Text

from argus_cli.client import ApiError, Client
from argus_cli.render import TERMINAL, out, say

ACTIVE = ("SUBMITTING", "SUBMITTED", "RUNNING")


# `wait` and `--follow`: 0 when the task SUCCEEDED, this when it FAILED or was CANCELED.
EXIT_TASK_FAILED = 1


def exit_code(task: dict[str, Any]) -> int:
    return 0 if task["state"] == "SUCCEEDED" else EXIT_TASK_FAILED


def wait(client: Client, task_id: str, *, interval: float) -> dict[str, Any]:
    """Poll until the task ends; report each state it passes through on stderr."""
    seen = ""
    while True:
        task = client.get(f"tasks/{task_id}")
        if task["state"] != seen:
            seen = task["state"]
            say(f"{task_id}: {seen}{reason(task)}")
        if seen in TERMINAL:
            return task
        time.sleep(interval)


def wait_for_attempt(client: Client, task_id: str, *, interval: float) -> None:
    """Until the task has an attempt (a log to follow) or has ended without one."""
    seen = ""
    while True:
        task = client.get(f"tasks/{task_id}")
        if task["attempts"] or task["state"] in TERMINAL:
            return
        if task["state"] != seen:
            seen = task["state"]
            say(f"{task_id}: {seen}{reason(task)}; waiting for it to start")
        time.sleep(interval)


def reason(task: dict[str, Any]) -> str:
    text = task.get("error_summary") if task["state"] in TERMINAL else task.get("pending_reason")
    return f" ({text})" if text else ""


class Follower:
    def __init__(self, client: Client, task_id: str, *, interval: float) -> None:
        self.client = client
        self.task_id = task_id
        self.interval = interval
        # A bar only where someone watches: piped output gets the plain log.
        self.progress: Progress | None = None
        if out.is_terminal:
            self.progress = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("steps"),
                TimeElapsedColumn(),
                console=out,
            )
        self.bar = self.progress.add_task(task_id, total=None) if self.progress else None
        self.next_bar_at = 0.0  # time.monotonic() of the bar's next refresh

    def note(self, message: str) -> None:
        if self.progress:
            say((message, "bold"), console=self.progress.console)
        else:
            say(message)

    def line(self, text: str, attempt: int) -> None:
        if self.progress:
            self.progress.console.print(Text.from_ansi(text))
            if time.monotonic() >= self.next_bar_at:
                self.update_bar(attempt)
        else:
            sys.stdout.write(text + "\n")
            sys.stdout.flush()

    def update_bar(self, attempt: int) -> None:
        """The bar's steps and total as the metrics API reads them (the server owns the reading of
        verl's metric lines), at most once an interval while lines arrive."""
        if self.progress and self.bar is not None:
            metrics = self.client.get(f"tasks/{self.task_id}/metrics", attempt=attempt)
            total = metrics.get("total_steps")
            self.progress.update(self.bar, total=total, completed=metrics.get("last_step") or 0)
            self.next_bar_at = time.monotonic() + self.interval

    def stream(self, attempt: int, *, tail: int) -> None:
        """One attempt's log from its last ``tail`` lines until the attempt ends."""
        self.update_bar(attempt)
        for text in self.client.lines(f"tasks/{self.task_id}/logs", attempt=attempt, follow=1, tail=tail):
            self.line(text, attempt)
        self.update_bar(attempt)  # the steps of its last lines

    def run(self) -> dict[str, Any]:
        if self.progress:
            self.progress.start()
        try:
            return self._loop()
        finally:
            if self.progress:
                self.progress.stop()

    def _loop(self) -> dict[str, Any]:
        streamed: set[int] = set()
        seen = ""
        while True:
            task = self.client.get(f"tasks/{self.task_id}")
            if task["state"] != seen:
                seen = task["state"]
                self.note(f"{self.task_id}: {seen}{reason(task)}")
            latest = max(task.get("attempts", []), key=lambda attempt: attempt["attempt_no"], default=None)
            if latest is not None:
                number = latest["attempt_no"]
                if number not in streamed:
                    # The first attempt seen from its last lines (like tail -f), a later one whole.
                    self.stream(number, tail=1_000_000 if streamed else 100)
                    streamed.add(number)
                    continue  # look at the task again at once: it may have ended with the log
                if latest.get("end_time") is None and seen in ACTIVE:
                    # The server ends a followed log after an hour; pick it up where it was.
                    self.stream(number, tail=0)
                    continue
            if seen in TERMINAL:
                return task
            time.sleep(self.interval)


def follow(client: Client, task_id: str, *, interval: float) -> dict[str, Any]:
    try:
        return Follower(client, task_id, interval=interval).run()
    except KeyboardInterrupt:
        raise ApiError(f"Stopped following {task_id}; it goes on (argus cancel {task_id} stops it).") from None


def follow_pipeline(client: Client, pipeline_id: str, *, interval: float) -> dict[str, Any]:
    """Follow each step's task in turn, as ``submit --follow`` follows a task: a step is taken up
    once it has left WAITING (in the pipeline's order, one at a time: a second branch's log is
    picked up from its last lines), until the pipeline has ended. A retry's new tasks are
    followed too. Returns the pipeline as it ended."""
    followed: set[str] = set()
    try:
        while True:
            pipeline = client.get(f"pipelines/{pipeline_id}")
            step = next(
                (s for s in pipeline["steps"] if s["task_id"] not in followed and s["state"] != "WAITING"), None
            )
            if step is not None:
                say((f"step {step['name']}: {step['task_id']}", "bold"))
                Follower(client, step["task_id"], interval=interval).run()
                followed.add(step["task_id"])
                continue
            if pipeline["state"] in TERMINAL:
                say(f"{pipeline_id}: {pipeline['state']}")
                return pipeline
            time.sleep(interval)
    except KeyboardInterrupt:
        raise ApiError(
            f"Stopped following {pipeline_id}; it goes on (argus pipeline cancel {pipeline_id} stops it)."
        ) from None
