"""The tick survives what a busy cluster throws at it: a task that cannot be handled fails
alone, a slow or vanishing Ray ends admission early, storage hiccups wait and retry, Ray's
brief refusals are not verdicts, and only live attempts hold GPUs."""

from __future__ import annotations

import itertools

import pytest
from django.db import IntegrityError

from tasks.attempts import Attempt
from tasks.choices import EventKind, FailureKind, TaskState
from tasks.lease import LeaseLost
from tasks.models import Task
from tasks.scheduler import launch
from tasks.scheduler.launch import live_holdings, promised_gpus
from tasks.scheduler.rayjobs import RayUnavailable, SubmitRejected
from tasks.scheduler.tick import tick
from tasks.scheduler.turns import Budget

pytestmark = pytest.mark.django_db
S = TaskState


def broken(task: Task) -> Task:
    """A stored spec that no longer builds (written by an older release, say)."""
    Task.objects.filter(pk=task.pk).update(spec={"workload": "ppo"})
    task.refresh_from_db()
    return task


# --- one bad task costs one task ------------------------------------------------------------


def test_a_task_that_cannot_be_built_fails_alone_and_the_tick_goes_on(alice, make_task, fake_ray, settings):
    settings.ARGUS_SCHEDULER_ERROR_LIMIT = 3
    settings.ARGUS_SCHEDULING_POLICY = "best_effort_fifo"
    ray = fake_ray([4, 4])
    bad = broken(make_task(alice))
    good = make_task(alice)
    report = tick()
    assert report.submitted == [good.task_id]  # the tick went on past the bad one
    bad.refresh_from_db()
    assert bad.state == S.SUBMITTING and bad.scheduler_errors == 1
    error = bad.events.get(kind=EventKind.SCHEDULER_ERROR)
    assert "KeyError" in error.message and "1 of 3" in error.message
    for _ in range(2):
        tick()
    bad.refresh_from_db()
    assert bad.state == S.FAILED
    assert "could not handle this task (3 errors in a row)" in bad.error_summary
    assert "KeyError" in bad.error_summary
    assert bad.events.filter(kind=EventKind.SCHEDULER_ERROR).count() == 3
    assert bad.attempts.get().end_time is not None  # it holds no GPUs
    assert ray.submitted == [f"{good.task_id}--a01"]


def test_an_error_following_one_running_task_does_not_stop_the_others(alice, make_task, fake_ray, monkeypatch):
    ray = fake_ray([4, 4])
    first, second = make_task(alice), make_task(alice)
    tick()
    for sid in ray.submitted:
        ray.set_status(sid, "SUCCEEDED")

    def explode(sid):
        if sid.startswith(first.task_id):
            raise RuntimeError("disk full while writing the event")

    ray.hooks["job"] = explode
    tick()
    first.refresh_from_db()
    second.refresh_from_db()
    assert second.state == S.SUCCEEDED
    assert first.state == S.SUBMITTED and first.scheduler_errors == 1
    del ray.hooks["job"]
    tick()
    first.refresh_from_db()
    assert first.state == S.SUCCEEDED and first.scheduler_errors == 0  # a move clears the count


# --- a tick has a time budget ---------------------------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_admission_stops_when_the_budget_is_spent_and_renews_the_lease(alice, make_task, fake_ray, settings):
    settings.ARGUS_TICK_LEASE_S = 90
    ray = fake_ray([1] * 6)
    tasks = [make_task(alice, n_gpus_per_node=1) for _ in range(6)]
    clock, renewals = Clock(), []

    def slow_submit(payload):
        clock.now += 20  # each submission waits on a slow Ray

    def renew() -> bool:
        renewals.append(clock.now)
        return True

    ray.hooks["submit"] = slow_submit
    budget = Budget(45, renew=renew, clock=clock)
    report = tick(budget)
    # 0 s, 20 s and 40 s start a submission; at 60 s the budget (45 s) is spent.
    assert len(report.submitted) == 3 and len(ray.submitted) == 3
    assert renewals  # the lease was renewed inside the tick (every 15 s of a 90 s lease)
    assert [t.task_id for t in tasks[:3]] == report.submitted
    rest = Task.objects.filter(pk__in=[t.pk for t in tasks[3:]])
    assert set(rest.values_list("state", flat=True)) <= {S.QUEUED, S.PENDING_RESOURCES}
    assert tick().submitted == [t.task_id for t in tasks[3:]]  # the next tick goes on


def test_a_lost_lease_stops_the_tick_at_once(alice, make_task, fake_ray, settings):
    settings.ARGUS_TICK_LEASE_S = 60
    ray = fake_ray([1, 1, 1])
    for _ in range(3):
        make_task(alice, n_gpus_per_node=1)
    clock = Clock()
    ray.hooks["submit"] = lambda payload: setattr(clock, "now", clock.now + 20)
    with pytest.raises(LeaseLost):
        tick(Budget(600, renew=lambda: False, clock=clock))
    assert len(ray.submitted) == 1  # nothing more after another scheduler took over


def test_admission_stops_at_the_first_ray_timeout(alice, make_task, fake_ray):
    ray = fake_ray([1] * 4)
    tasks = [make_task(alice, n_gpus_per_node=1) for _ in range(4)]
    calls = []

    def timeout(payload):
        calls.append(payload["submission_id"])
        raise RayUnavailable("ReadTimeout: 30 s")

    ray.hooks["submit"] = timeout
    report = tick()
    assert len(calls) == 1  # not one 30 s wait per admitted task
    assert report.error.startswith("ReadTimeout")
    first = Task.objects.get(pk=tasks[0].pk)
    assert first.state == S.SUBMITTING  # unknown whether Ray took it: the next sync asks
    failed = first.events.get(kind=EventKind.SUBMIT_FAILED)
    assert "ReadTimeout" not in failed.message  # Ray's words (which name its dashboard) are for admins' logs
    assert "Ray did not answer the submission" in failed.message
    assert Task.objects.filter(pk__in=[t.pk for t in tasks[1:]], state=S.SUBMITTING).count() == 0


def test_a_duplicate_attempt_number_from_another_scheduler_is_not_a_crash(alice, make_task, fake_ray, monkeypatch):
    ray = fake_ray([4])
    task = make_task(alice)
    create = Attempt.objects.create

    def race(**fields):
        raise IntegrityError("UNIQUE constraint failed: tasks_attempt.task_id, tasks_attempt.attempt_no")

    monkeypatch.setattr(Attempt.objects, "create", race)
    report = tick()
    monkeypatch.setattr(Attempt.objects, "create", create)
    assert report.submitted == [] and ray.submitted == []
    task.refresh_from_db()
    assert task.state in (S.QUEUED, S.PENDING_RESOURCES)
    assert not task.events.filter(kind=EventKind.SCHEDULER_ERROR).exists()


# --- storage and Ray being briefly unwell ----------------------------------------------------


def test_a_storage_hiccup_waits_and_retries_with_backoff(alice, make_task, fake_ray, monkeypatch, settings):
    settings.ARGUS_RETRY_INTERVAL_S = 60
    ray = fake_ray([4])
    task = make_task(alice)
    write = launch._write_job_files

    def unwell(*args):
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(launch, "_write_job_files", unwell)
    tick()
    task.refresh_from_db()
    attempt = task.attempts.get()
    assert task.state == S.QUEUED and task.next_run_at is not None
    assert "the job folder could not be written" in task.pending_reason
    assert attempt.failure_kind == FailureKind.STORAGE_ERROR and attempt.end_time is not None
    assert promised_gpus(live_holdings()) == {}  # an ended attempt holds no GPUs
    assert ray.submitted == []

    # Not before its backoff; then it runs once storage is back.
    monkeypatch.setattr(launch, "_write_job_files", write)
    tick()
    assert ray.submitted == []
    Task.objects.filter(pk=task.pk).update(next_run_at=task.created_at)
    tick()
    task.refresh_from_db()
    assert task.state == S.SUBMITTED and ray.submitted == [f"{task.task_id}--a02"]


@pytest.mark.parametrize("error", [SubmitRejected("Request failed with status code 400: bad entrypoint")])
def test_a_refused_submission_ends_its_attempt(alice, make_task, fake_ray, error):
    ray = fake_ray([4])
    task = make_task(alice)

    def refuse(payload):
        raise error

    ray.hooks["submit"] = refuse
    tick()
    task.refresh_from_db()
    assert task.state == S.FAILED and "Ray refused the submission" in task.error_summary
    assert task.attempts.get().end_time is not None
    assert promised_gpus(live_holdings()) == {}


def test_promises_count_only_live_attempts_after_a_requeue(alice, make_task, fake_ray):
    ray = fake_ray([4])
    task = make_task(alice)
    ray.hooks["submit"] = lambda payload: (_ for _ in ()).throw(SubmitRejected("status code 422: no"))
    tick()
    task.refresh_from_db()
    task.requeue(actor="admin:root")
    del ray.hooks["submit"]
    tick()
    task.refresh_from_db()
    assert task.state == S.SUBMITTED
    live = task.attempts.get(attempt_no=2)
    assert promised_gpus(live_holdings()) == live.placement  # attempt 1 reserves nothing any more


def test_every_attempt_the_scheduler_ended_has_an_end_time(alice, make_task, fake_ray):
    ray = fake_ray([4])
    outcomes = itertools.cycle(
        [
            ("FAILED", {"message": "ValueError: Total available GPUs 0.0 is less than total desired GPUs 4"}),
            ("FAILED", {"message": "RuntimeError: boom"}),
            ("SUCCEEDED", {}),
            ("STOPPED", {}),
        ]
    )
    for _ in range(4):
        make_task(alice)
    for _ in range(12):
        tick()
        for sid in list(ray.known):
            job = ray.known[sid]
            if str(job.status.value) == "PENDING":
                status, fields = next(outcomes)
                ray.set_status(sid, status, **fields)
        Task.objects.filter(state=S.PENDING_RESOURCES).update(next_run_at=None)
    ended = Attempt.objects.exclude(task__state__in=["SUBMITTING", "SUBMITTED", "RUNNING"])
    assert ended.exists() and not ended.filter(end_time=None).exists()
