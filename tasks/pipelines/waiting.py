"""WAITING tasks and their dependencies (a pipeline's steps, and any task with after /
after_any): which may be queued, which an `after` dependency failed, what the others wait for;
and the pipelines whose last step ended.

The tick runs these just before admission (tasks.scheduler.tick), so a task whose dependency
ended in this tick's sync is queued (and may start) in the same tick. Their reads depend on how
many tasks wait for dependencies and how many pipelines run, never on the queue's length: one
query for every WAITING task with its dependencies, one for the running pipelines whose steps
all ended.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from django.db.models import Exists, OuterRef
from django.utils import timezone

from tasks.choices import TERMINAL_STATES, EventKind, FailureKind, PipelineState, Role, TaskState
from tasks.models import Task
from tasks.pipelines.models import Pipeline, PipelineStep
from tasks.pipelines.outputs import FileCalls, Unresolvable, resolve_step
from tasks.queue import reasons as queue_reasons
from tasks.specs.errors import SpecError

# What ends a task's `after` dependency for good: it will never succeed.
DEPENDENCY_BROKEN = (TaskState.FAILED, TaskState.CANCELED)


@dataclass
class Waiting:
    """A WAITING task's dependencies as one query reads them."""

    pending_reason: str
    unmet: list[tuple[str, str]] = field(default_factory=list)  # (task id, state) not yet as needed
    broken: tuple[str, str] | None = None  # an `after` dependency that failed or was canceled

    @property
    def held(self) -> bool:
        """It still waits: a dependency not yet as needed, none broken."""
        return self.broken is None and bool(self.unmet)


def judge(rows: Sequence[tuple[int, str | None, bool | None, str | None, str | None]]) -> dict[int, Waiting]:
    """Each WAITING task's verdict from rows (task pk, its reason, any_end, dependency's id and
    state; the last three None for a task with no dependency). Pure: the rules at a glance."""
    waiting: dict[int, Waiting] = {}
    for pk, reason, any_end, other, state in rows:
        entry = waiting.setdefault(pk, Waiting(reason or ""))
        if other is None or state is None:
            continue  # no dependency left (none should be): nothing holds it
        if not any_end and state in DEPENDENCY_BROKEN:
            entry.broken = entry.broken or (other, state)
        elif state not in TERMINAL_STATES or (not any_end and state != TaskState.SUCCEEDED):
            entry.unmet.append((other, state))
    return waiting


def reason_for(unmet: list[tuple[str, str]]) -> str:
    """``waits for alice-sft-…, RUNNING; alice-export-…, WAITING``."""
    return "waits for " + "; ".join(f"{task_id}, {state}" for task_id, state in unmet)


def verdicts() -> dict[int, Waiting]:
    """Every WAITING task's verdict, by pk, and each held one's reason written where it changed."""
    # Each WAITING task once per dependency (an outer join: once, with None, if it has none). A
    # sweep's trials wait for its cap, not for dependencies (tasks.sweeps.cap): not judged here.
    rows = list(
        Task.objects.filter(state=TaskState.WAITING, sweep=None)
        .order_by("pk", "dependencies__id")
        .values_list(
            "pk",
            "pending__text",  # None: never given a reason
            "dependencies__any_end",
            "dependencies__depends_on__task_id",
            "dependencies__depends_on__state",
        )
    )
    found = judge(rows)
    reasons: dict[str, list[int]] = {}
    for pk, verdict in found.items():
        if verdict.held:
            reason = reason_for(verdict.unmet)[: queue_reasons.MAX_LENGTH]
            if reason != verdict.pending_reason:
                reasons.setdefault(reason, []).append(pk)
    queue_reasons.write({pk: reason for reason, pks in reasons.items() for pk in pks}, states=(TaskState.WAITING,))
    return found


def release(task: Task, verdict: Waiting, actor: str, files: FileCalls) -> None:
    """A WAITING task no dependency holds: CANCELED when an `after` one broke, else QUEUED."""
    if verdict.broken is not None:
        cancel_for_dependency(task, *verdict.broken, actor=actor)
    else:
        queue(task, actor, files)


def cancel_for_dependency(task: Task, other: str, state: str, *, actor: str) -> None:
    reason = f"its dependency {other} {state}"
    task.transition(
        TaskState.CANCELED,
        role=Role.SCHEDULER,
        kind=EventKind.DEPENDENCY_FAILED,
        actor=actor,
        message=f"Canceled without running: {reason}.",
        data={"dependency": other, "dependency_state": state},
        pending_reason="",
        error_summary=reason,
    )


def queue(task: Task, actor: str, files: FileCalls) -> None:
    """Its dependencies met: QUEUED, its place and wait counted from now; a pipeline step's
    macros resolved first (one that cannot be: FAILED, a USER_ERROR). ``files`` runs the reads
    of shared storage (tasks.pipelines.outputs.resolve_step)."""
    try:
        resolved = resolve_step(task, files=files)
    except (Unresolvable, SpecError) as error:
        summary = f"{FailureKind.USER_ERROR}: {error}"[:2000]
        task.transition(
            TaskState.FAILED,
            role=Role.SCHEDULER,
            actor=actor,
            message=f"Its dependencies are met, but its spec cannot be resolved: {error}",
            data={"failure_kind": FailureKind.USER_ERROR},
            pending_reason="",
            error_summary=summary,
        )
        return
    changes: dict[str, Any] = (
        {} if resolved is None else {"spec": resolved.resolved.to_json(), "warnings": resolved.warnings}
    )
    task.transition(
        TaskState.QUEUED,
        role=Role.SCHEDULER,
        actor=actor,
        message="Its dependencies are met: queued." + (" Its step's outputs are written in." if changes else ""),
        queued_at=timezone.now(),
        pending_reason="",
        **changes,
    )


def finish_pipelines(actor: str) -> None:
    """Pipelines still RUNNING whose steps have all ended (each step's last move ends its pipeline
    in its own transaction; two last steps ending at once on PostgreSQL can each miss the other)."""
    unfinished = PipelineStep.objects.filter(pipeline=OuterRef("pk")).exclude(task__state__in=TERMINAL_STATES)
    for pipeline in Pipeline.objects.filter(state=PipelineState.RUNNING).exclude(Exists(unfinished)):
        pipeline.finish_if_done(actor)
