"""A cancel that lands at any point of a tick is never lost: the task ends CANCELED, is never
admitted or sent again, and its Ray job is stopped. Each race is replayed at its exact point
with a hook in the fake Ray (the real cluster's cancel path is in tests/scheduler)."""

from __future__ import annotations

import pytest

from tasks.attempts import Attempt
from tasks.choices import EventKind, TaskState
from tasks.models import Task
from tasks.scheduler import launch
from tasks.scheduler.rayjobs import RayUnavailable
from tasks.scheduler.tick import tick

pytestmark = pytest.mark.django_db
S = TaskState
FAIL_FAST = "ValueError: Total available GPUs 0.0 is less than total desired GPUs 4"


def running(ray, task) -> Attempt:
    tick()
    attempt = task.attempts.get()
    ray.set_status(attempt.ray_submission_id, "RUNNING")
    tick()
    task.refresh_from_db()
    assert task.state == S.RUNNING
    return attempt


def cancel_when_asked_about(ray, task, submission_id):
    """At the exact point sync asks Ray about the attempt (its copy of the task is loaded)."""

    def hook(asked):
        if asked == submission_id and Task.objects.get(pk=task.pk).cancel_requested_at is None:
            Task.objects.get(pk=task.pk).cancel(actor="api:alice")

    ray.hooks["job"] = hook


@pytest.mark.parametrize(
    ("status", "fields"),
    [
        ("FAILED", {"message": FAIL_FAST}),  # the shortage retry path
        ("FAILED", {"message": "RuntimeError: NCCL error"}),  # the max_retries path
        ("STOPPED", {}),
    ],
)
def test_a_cancel_landing_while_the_attempt_ends_is_not_lost(alice, make_task, fake_ray, status, fields):
    ray = fake_ray([4])
    task = make_task(alice, max_retries=3)
    attempt = running(ray, task)
    ray.set_status(attempt.ray_submission_id, status, **fields)
    cancel_when_asked_about(ray, task, attempt.ray_submission_id)
    tick()
    tick()
    task.refresh_from_db()
    assert task.state == S.CANCELED
    assert ray.submitted == [attempt.ray_submission_id]  # never admitted again
    assert task.attempts.count() == 1


def test_a_lost_job_with_a_cancel_landing_is_canceled_not_requeued(alice, make_task, fake_ray):
    ray = fake_ray([4])
    task = make_task(alice)
    attempt = running(ray, task)
    del ray.known[attempt.ray_submission_id]  # the head restarted and forgot it
    ray.hooks["job"] = lambda sid: Task.objects.get(pk=task.pk).cancel(actor="api:alice")
    tick()
    task.refresh_from_db()
    assert task.state == S.CANCELED
    assert ray.submitted == [attempt.ray_submission_id]


def test_a_submitting_task_with_a_cancel_pending_is_never_sent_again(alice, make_task, fake_ray):
    ray = fake_ray([4])
    task = make_task(alice)

    def timeout(payload):
        raise RayUnavailable("timed out")

    ray.hooks["submit"] = timeout
    tick()
    task.refresh_from_db()
    assert task.state == S.SUBMITTING
    task.cancel(actor="api:alice")
    del ray.hooks["submit"]
    tick()
    task.refresh_from_db()
    assert task.state == S.CANCELED
    assert ray.submitted == []
    assert task.attempts.get().end_time is not None


def test_a_timed_out_submission_that_reached_ray_is_stopped_not_forgotten(alice, make_task, fake_ray):
    """Ray took the job although the submission timed out: 'not in the list' is not 'never
    reached Ray'; Ray is asked, and the job is stopped."""
    ray = fake_ray([4])
    task = make_task(alice)

    def took_it_then_timed_out(payload):
        ray.add(str(payload["submission_id"]), "RUNNING")
        raise RayUnavailable("read timed out")

    ray.hooks["submit"] = took_it_then_timed_out
    tick()
    task.cancel(actor="api:alice")
    del ray.hooks["submit"]
    tick()
    attempt = task.attempts.get()
    assert ray.stopped == [attempt.ray_submission_id]
    task.refresh_from_db()
    assert task.state in (S.SUBMITTED, S.RUNNING)  # CANCELED once Ray reports it stopped
    ray.set_status(attempt.ray_submission_id, "STOPPED")
    tick()
    task.refresh_from_db()
    assert task.state == S.CANCELED
    assert ray.submitted == []  # never sent twice


def test_a_cancel_landing_between_admission_and_submission_sends_nothing(alice, make_task, fake_ray, monkeypatch):
    ray = fake_ray([4])
    task = make_task(alice)
    original = launch.start_attempt

    def cancel_first(ray, admitted, placement, *quota):
        # The queue was read and the task admitted; the cancel commits before the move.
        Task.objects.get(pk=admitted.pk).cancel(actor="api:alice")
        return original(ray, admitted, placement, *quota)

    monkeypatch.setattr(launch, "start_attempt", cancel_first)
    tick()
    task.refresh_from_db()
    assert task.state == S.CANCELED
    assert ray.submitted == []
    assert task.attempts.count() == 0  # the attempt row went with the refused move


def test_a_waiting_task_left_with_a_cancel_pending_is_canceled_not_admitted(alice, make_task, fake_ray):
    ray = fake_ray([4])
    task = make_task(alice)
    # What an older scheduler could leave behind: QUEUED, with a cancel requested.
    Task.objects.filter(pk=task.pk).update(cancel_requested_at=task.created_at)
    tick()
    task.refresh_from_db()
    assert task.state == S.CANCELED
    assert ray.submitted == []


def test_the_canceled_event_trail_is_complete(alice, make_task, fake_ray):
    ray = fake_ray([4])
    task = make_task(alice)
    attempt = running(ray, task)
    task.cancel(actor="api:alice")
    tick()
    ray.set_status(attempt.ray_submission_id, "STOPPED")
    tick()
    kinds = list(task.events.values_list("kind", "to_state"))
    assert (EventKind.CANCEL_REQUESTED, "") in kinds
    assert (EventKind.STOP_REQUESTED, "") in kinds
    assert kinds[-1] == (EventKind.STATE_TRANSITION, S.CANCELED)
