"""An early-stopped trial's paths beyond the stop itself: a person requeues it, or its run ends
SUCCEEDED before Ray stops it. Early-stopped means ended CANCELED by the sweep (the task API's
help), so neither keeps the flag."""

from __future__ import annotations

import json

import pytest
from django.utils import timezone

from tasks.attempts import Attempt
from tasks.choices import EventKind, TaskState, Workload
from tasks.jobfiles import metrics_log
from tasks.models import Task
from tasks.scheduler.tick import tick
from tasks.sweeps.models import RungValue, TrialCurve
from tests.tasks.attempt_data import attempt_of
from tests.tasks.scheduler.test_watch import log, running
from tests.tasks.sweeps.test_trial_curves import METRIC, early_stops, later, refresh, sweep_of, trial, write_log
from webhooks.models import Delivery, Webhook

pytestmark = pytest.mark.django_db


def test_a_requeued_early_stopped_trial_is_no_longer_stopped_and_is_judged_at_its_next_rungs(alice, make_task) -> None:
    sweep = sweep_of(alice)
    trial(make_task, alice, sweep, {0: 0.2, 10: 0.6, 20: 0.8}, 20, state=TaskState.SUCCEEDED)
    loser = trial(make_task, alice, sweep, {0: 0.2, 10: 0.4}, 10)
    assert refresh() == 1
    Task.objects.filter(pk=loser.pk).update(state=TaskState.CANCELED, finished_at=timezone.now())
    loser.refresh_from_db()
    loser.requeue("admin")
    loser.refresh_from_db()
    assert loser.state == TaskState.QUEUED and not loser.early_stopped
    # Its second attempt resumes from step 10 and reaches rung 20, below the winner's 0.8 there.
    Task.objects.filter(pk=loser.pk).update(state=TaskState.RUNNING)
    attempt = attempt_of(loser, 4, last_step=20, resumed_from_step=10)
    write_log(loser, attempt, {10: 0.4, 20: 0.5}, 20)
    assert refresh() == 1
    loser.refresh_from_db()
    assert loser.early_stopped
    assert [(stop["rung"], stop["value"], stop["cutoff"]) for stop in early_stops(loser)] == [
        (10, 0.4, 0.6),
        (20, 0.5, 0.8),
    ]


def test_a_trial_whose_run_succeeds_before_its_early_stop_lands_is_not_early_stopped(
    alice, make_task, fake_ray, clock
) -> None:
    ray = fake_ray([4])
    sweep = sweep_of(alice)
    trial(make_task, alice, sweep, {10: 0.6}, 12, state=TaskState.SUCCEEDED)
    task = make_task(alice, sweep=sweep, trial_index=1, params={"lr": 1})
    attempt = running(ray, task, clock)
    log(task, attempt, f"step:10 - critic/score/mean:0.5 - {METRIC}:0.4\n")
    clock.advance(1)
    tick()
    task.refresh_from_db()
    assert task.early_stopped and task.cancel_requested_at is not None
    # Its last step was its rung: the job ended on its own before Ray's stop reached it.
    ray.set_status(attempt.ray_submission_id, "SUCCEEDED")
    clock.advance(1)
    tick()
    task.refresh_from_db()
    assert task.state == TaskState.SUCCEEDED
    assert not task.early_stopped  # the API's early_stopped: true with SUCCEEDED would contradict itself
    assert task.events.filter(kind=EventKind.EARLY_STOPPED).count() == 1  # what the sweep decided stays told


def test_the_canceled_webhook_of_an_early_stopped_trial_says_so(alice, make_task, fake_ray, clock) -> None:
    ray = fake_ray([4, 4])
    Webhook.create(user=alice, url="https://hooks.example.org/x", events=["CANCELED"])
    sweep = sweep_of(alice)
    trial(make_task, alice, sweep, {10: 0.6}, 12, state=TaskState.SUCCEEDED)
    stopped, canceled = (make_task(alice, sweep=sweep, trial_index=i, params={"lr": i}) for i in (1, 2))
    attempts = [running(ray, task, clock) for task in (stopped, canceled)]
    log(stopped, attempts[0], f"step:10 - critic/score/mean:0.5 - {METRIC}:0.4\n")
    clock.advance(1)
    tick()
    Task.objects.get(pk=canceled.pk).cancel("api:alice")  # a person's cancel, for the difference
    for attempt in attempts:
        ray.set_status(attempt.ray_submission_id, "STOPPED")
    clock.advance(1)
    tick()
    bodies = {d.event.task_id: json.loads(d.body) for d in Delivery.objects.select_related("event")}
    mine, theirs = bodies[stopped.pk], bodies[canceled.pk]
    assert (mine["state"], mine["early_stopped"], theirs["state"], theirs["early_stopped"]) == (
        "CANCELED",
        True,
        "CANCELED",
        False,
    )
    assert mine["text"].startswith(
        f"Argus: task <{mine['url']}|{stopped.task_id}> was stopped early by its sweep {sweep.sweep_id}: "
        f"Stopped early at rung 10: {METRIC} was 0.4 (step 10), below the cutoff 0.6"
    )
    assert theirs["text"].startswith(f"Argus: task <{theirs['url']}|{canceled.task_id}> was canceled")


def sft_log(task: Task, attempt, last: int, validations: dict[int, float]) -> None:
    """verl 0.9.1's SFT trainer's file logger: each step's training record, then at a validation
    step a record of its own with val/loss (sft_trainer.py fit)."""
    records = []
    for step in range(1, last + 1):
        records.append({"step": step, "data": {"train/loss": 1.0 / step}})
        if step in validations:
            records.append({"step": step, "data": {"val/loss": validations[step]}})
    path = metrics_log(task, attempt)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(record) + "\n" for record in records))


def test_an_sft_rung_waits_for_the_validation_logged_after_the_steps_record(alice, make_task) -> None:
    sweep = sweep_of(alice, metric="val/loss", mode="min")  # rungs 10, 20, …
    done = make_task(alice, sweep=sweep, trial_index=0, params={"lr": 0}, workload=Workload.SFT)
    sft_log(done, attempt_of(done, 4, last_step=20), 20, {5: 1.0, 10: 0.5, 20: 0.3})
    Task.objects.filter(pk=done.pk).update(state=TaskState.SUCCEEDED, finished_at=timezone.now())
    task = make_task(
        alice, sweep=sweep, trial_index=1, params={"lr": 1}, workload=Workload.SFT, state=TaskState.RUNNING
    )
    attempt = attempt_of(task, 4, last_step=10)
    sft_log(task, attempt, 10, {5: 0.9})  # step 10's record is written, its validation runs
    assert refresh() == 0
    assert not RungValue.objects.filter(task=task).exists()  # not step 5's 0.9 as rung 10's value
    sft_log(task, attempt, 11, {5: 0.9, 10: 0.4})
    Attempt.objects.filter(pk=attempt.pk).update(last_step=11)
    assert refresh() == 0  # read at once: its rung 10 was waiting
    assert list(RungValue.objects.filter(task=task).values_list("rung", "step", "value")) == [(10, 10, 0.4)]
    task.refresh_from_db()
    assert not task.early_stopped and task.cancel_requested_at is None


def test_a_resumed_attempt_redoing_steps_is_read_before_it_passes_the_last_read(alice, make_task) -> None:
    sweep = sweep_of(alice, early_stop={})  # curves only: what the page shows
    task = trial(make_task, alice, sweep, {0: 0.2, 10: 0.5, 20: 0.6}, 22)
    refresh()
    assert TrialCurve.objects.get(task=task).points == [[0, 0.2], [10, 0.5], [20, 0.6]]
    # Its node died; the next attempt resumed from step 10's checkpoint and is at step 16 again.
    attempt = attempt_of(task, 4, last_step=16, resumed_from_step=10)
    write_log(task, attempt, {10: 0.5, 15: 0.45}, 16)
    refresh(later())
    # The redone steps are on the curve (the first attempt's later ones stay until redone, as the
    # metrics API merges attempts), not only once the attempt passes step 22.
    assert TrialCurve.objects.get(task=task).points == [[0, 0.2], [10, 0.5], [15, 0.45], [20, 0.6]]


def test_the_early_stopped_message_tells_a_value_from_a_cutoff_six_digits_cannot(alice, make_task) -> None:
    sweep = sweep_of(alice)
    trial(make_task, alice, sweep, {10: 0.1234564}, 10, state=TaskState.SUCCEEDED)
    loser = trial(make_task, alice, sweep, {10: 0.1234561}, 10)
    assert refresh() == 1
    message = loser.events.get(kind=EventKind.EARLY_STOPPED).message
    assert f"{METRIC} was 0.1234561 (step 10), below the cutoff 0.1234564:" in message
