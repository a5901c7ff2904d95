"""What a webhook receives: the JSON body for an event, and its signature."""

from __future__ import annotations

import hashlib
import hmac
import json
from datetime import datetime
from typing import TypedDict

from django.conf import settings

from tasks.choices import EventKind
from tasks.models import Event, Task

SIGNATURE_HEADER = "X-Argus-Signature"

_VERBS = {
    "SUCCEEDED": "succeeded",
    "FAILED": "failed",
    "CANCELED": "was canceled",
    "RETRYING": "will be retried",
}
_PIPELINE_VERBS = {"PIPELINE_SUCCEEDED": "succeeded", "PIPELINE_FAILED": "failed"}
_SWEEP_VERBS = {"SWEEP_SUCCEEDED": "succeeded", "SWEEP_FAILED": "failed"}
# Events of a pipeline or a sweep as a whole: the payload's state is theirs, not the task's.
_WHOLE_EVENTS = _PIPELINE_VERBS.keys() | _SWEEP_VERBS.keys()


class Payload(TypedDict):
    """The JSON body a webhook receives (docs name every field)."""

    event: str
    task_id: str
    state: str | None
    user: str
    workload: str
    created_at: str | None
    finished_at: str | None
    next_run_at: str | None
    error_summary: str
    message: str
    occurred_at: str | None
    url: str
    text: str
    pipeline_id: str | None
    step: str | None
    sweep_id: str | None
    early_stopped: bool


def task_url(task: Task) -> str:
    return f"{settings.ARGUS_PUBLIC_URL}/tasks/{task.task_id}/"


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value else None


def body_for(event: Event, name: str) -> str:
    """The JSON text for ``event`` (webhook event ``name``), as the task stands in that event.

    ``text`` is what a Slack incoming webhook shows, so the same URL works there.
    """
    task = event.task
    url = task_url(task)
    pipeline_id = task.pipeline.pipeline_id if task.pipeline is not None else None
    sweep_id = task.sweep.sweep_id if task.sweep is not None else None
    if name in _PIPELINE_VERBS:
        last = f"its step {task.step}, <{url}|{task.task_id}>, ended last"
        text = f"Argus: pipeline {pipeline_id} {_PIPELINE_VERBS[name]} ({last})"
    elif name in _SWEEP_VERBS:
        text = f"Argus: sweep {sweep_id} {_SWEEP_VERBS[name]} (its trial <{url}|{task.task_id}> ended last)"
    else:
        summary = task.error_summary or (event.message if name != "SUCCEEDED" else "")
        verb = _VERBS[name]
        if name == "CANCELED" and task.early_stopped:
            # It ends CANCELED like a trial a person canceled: say which, with the rung and cutoff.
            verb = f"was stopped early by its sweep {sweep_id}"
            stop = task.events.filter(kind=EventKind.EARLY_STOPPED).order_by("-pk").first()
            summary = stop.message if stop is not None else summary
        text = f"Argus: task <{url}|{task.task_id}> {verb}"
        if summary:
            text += f": {summary[:300]}"
    payload: Payload = {
        "event": name,
        "task_id": task.task_id,
        # A pipeline's or a sweep's event: its state; a task's: the task's.
        "state": event.data.get("state") if name in _WHOLE_EVENTS else (event.to_state or task.state),
        "user": task.user.username,
        "workload": task.workload,
        "created_at": _iso(task.created_at),
        "finished_at": _iso(task.finished_at),
        "next_run_at": _iso(task.next_run_at),
        "error_summary": task.error_summary,
        "message": event.message,
        "occurred_at": _iso(event.created_at),
        "url": url,
        "text": text,
        "pipeline_id": pipeline_id,
        "step": task.step or None,
        "sweep_id": sweep_id,
        "early_stopped": task.early_stopped,
    }
    # What the task's events and summary say was redacted as it was written; again here, since a
    # receiver is outside Argus.
    return json.dumps(task.redactor().json(payload), separators=(",", ":"))


def sign(secret: str, body: bytes) -> str:
    """The X-Argus-Signature value: ``sha256=`` and the hex HMAC-SHA256 of the body."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
