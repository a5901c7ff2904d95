"""The usage ledger's rules, with a fake Ray and time moved by hand: each way an attempt ends
writes its row once, in its group, with its quota's split and the work its task will redo."""

from __future__ import annotations

import io
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from accounts.groups.models import Membership
from tasks.attempts import Attempt
from tasks.choices import FailureKind, Quota, TaskState
from tasks.jobfiles import checkpoint_dir
from tasks.models import Task
from tasks.scheduler.settle import Outcome, settle
from tasks.scheduler.tick import tick
from tasks.usage.ledger import fill_missing, lost_gpu_seconds, record
from tasks.usage.models import UsageRecord
from tests.conftest import PPO_SPEC
from tests.tasks.scheduler.test_preemption import HIGH, save_checkpoint
from tests.tasks.scheduler.test_watch import running, stopped_by_argus

pytestmark = pytest.mark.django_db
GPUS = 4  # PPO_SPEC's


def ended(ray, attempt: Attempt, clock, status: str = "SUCCEEDED") -> Attempt:
    ray.set_status(attempt.ray_submission_id, status, end_time=int(clock.now.timestamp() * 1000))
    tick()
    return Attempt.objects.get(pk=attempt.pk)


def test_a_finished_attempt_is_recorded_once_with_its_gpu_seconds_group_and_first_wait(
    alice, make_task, fake_ray, clock, make_group
):
    make_group("vision", alice)
    ray = fake_ray([4])
    task = make_task(alice, PPO_SPEC, created_at=clock.now)
    clock.advance(30)  # it waits 30 s, then Ray starts it
    attempt = running(ray, task, clock)
    clock.advance(600)
    attempt = ended(ray, attempt, clock)
    task.refresh_from_db()
    assert task.state == TaskState.SUCCEEDED
    row = UsageRecord.objects.get()
    assert (row.attempt_id, row.task_id, row.user_id, row.group) == (attempt.pk, task.pk, alice.pk, "vision")
    assert row.ended_at == attempt.end_time == clock.now
    assert (row.gpu_seconds, row.in_quota_gpu_seconds, row.borrowed_gpu_seconds) == (GPUS * 600, GPUS * 600, 0)
    assert row.lost_gpu_seconds == 0
    assert row.wait_s == 30

    assert record(attempt) == row  # again: nothing new, nothing changed
    assert fill_missing() == 0
    assert UsageRecord.objects.count() == 1
    assert UsageRecord.objects.get().gpu_seconds == GPUS * 600


def test_a_preempted_attempt_loses_what_it_ran_since_its_checkpoint(alice, bob, make_task, fake_ray, clock, settings):
    settings.ARGUS_PREEMPTION = True
    settings.ARGUS_PREEMPT_GRACE_S = 120
    ray = fake_ray([4])
    victim = make_task(alice, PPO_SPEC + "preemptible: true\n", stall_timeout_s=None)
    attempt = running(ray, victim, clock)
    # verl said it started from scratch and logged step 25; its checkpoint is step 20 (below).
    Attempt.objects.filter(pk=attempt.pk).update(resume_known=True, last_step=25)
    make_task(bob, HIGH)
    clock.advance(1000)
    tick()  # chosen
    save_checkpoint(victim, clock)  # step 20, and its folder:
    (checkpoint_dir(alice.username, victim.task_id) / "global_step_20").mkdir()
    tick()  # stopped after its checkpoint
    stopped_by_argus(ray, victim, attempt)
    attempt.refresh_from_db()
    assert attempt.failure_kind == FailureKind.PREEMPTED and attempt.checkpoint_step == 20
    row = UsageRecord.objects.get(attempt=attempt)
    assert row.gpu_seconds == GPUS * 1000
    assert row.lost_gpu_seconds == pytest.approx(GPUS * 1000 * 5 / 25)  # steps 21-25 of its 25
    assert row.group == ""  # alice is in no group


def test_a_node_failure_without_a_checkpoint_loses_the_whole_attempt_and_the_retry_has_no_first_wait(
    alice, make_task, fake_ray, clock
):
    ray = fake_ray([4])
    task = make_task(alice, PPO_SPEC, created_at=clock.now)
    attempt = running(ray, task, clock)
    clock.advance(300)
    ray.set_status(attempt.ray_submission_id, "FAILED")
    settle(Task.objects.get(pk=task.pk), attempt, Outcome(failure=FailureKind.NODE_FAILURE, line="node died"))
    row = UsageRecord.objects.get(attempt=attempt)
    assert (row.gpu_seconds, row.lost_gpu_seconds) == (GPUS * 300, GPUS * 300)  # no checkpoint: all redone
    assert row.wait_s == 0

    tick()  # back in its place, and on Ray again
    second = task.attempts.get(attempt_no=2)
    ray.set_status(second.ray_submission_id, "RUNNING")
    tick()
    clock.advance(60)
    ended(ray, second, clock)
    assert UsageRecord.objects.get(attempt=second).wait_s is None  # the task's first start was attempt 1


def test_a_failure_of_the_program_loses_nothing_to_the_ledger_and_an_unstarted_attempt_used_nothing(
    alice, make_task, fake_ray, clock
):
    ray = fake_ray([4])
    task = make_task(alice, PPO_SPEC)
    tick()
    attempt = task.attempts.get()
    settle(Task.objects.get(pk=task.pk), attempt, Outcome(failure=FailureKind.RUNTIME_ERROR, line="boom"))
    row = UsageRecord.objects.get(attempt=attempt)
    assert (row.gpu_seconds, row.lost_gpu_seconds, row.wait_s) == (0, 0, None)
    assert ray.known  # it reached Ray, never ran


def test_the_group_is_the_one_the_user_had_when_each_attempt_ended(alice, make_task, fake_ray, clock, make_group):
    vision = make_group("vision", alice)
    nlp = make_group("nlp")
    ray = fake_ray([4])
    first = make_task(alice, PPO_SPEC)
    ended(ray, running(ray, first, clock), clock)
    Membership.objects.filter(user=alice).update(group=nlp)
    second = make_task(alice, PPO_SPEC)
    ended(ray, running(ray, second, clock), clock)
    Membership.objects.filter(user=alice).delete()
    third = make_task(alice, PPO_SPEC)
    ended(ray, running(ray, third, clock), clock)
    vision.delete()  # its history keeps its name
    groups = {row.task_id: row.group for row in UsageRecord.objects.all()}
    assert groups == {first.pk: "vision", second.pk: "nlp", third.pk: ""}


def test_a_borrowed_attempt_splits_its_gpu_seconds_as_borrowed(alice, make_task, fake_ray, clock):
    ray = fake_ray([4])
    task = make_task(alice, PPO_SPEC)
    attempt = running(ray, task, clock)
    Attempt.objects.filter(pk=attempt.pk).update(quota=Quota.BORROWED)  # as admission by quota will
    clock.advance(100)
    ended(ray, attempt, clock)
    row = UsageRecord.objects.get()
    assert (row.in_quota_gpu_seconds, row.borrowed_gpu_seconds) == (0, GPUS * 100)


@pytest.mark.parametrize(
    ("resumed", "known", "saved", "last", "lost"),
    [
        (None, False, 30, 40, 1.0),  # where it started is unknown: no checkpoint known to be its own
        (None, True, None, 40, 1.0),  # the checkpoint could not be read
        (20, True, 20, 40, 1.0),  # none past the step it resumed from
        (20, True, 40, 40, 0.0),  # saved at its last step
        (20, True, 30, 40, 0.5),  # half of its steps since it resumed are past the checkpoint
        (None, True, 10, None, 0.0),  # saved, and no step logged past it
    ],
)
def test_the_lost_work_rule(resumed, known, saved, last, lost):
    attempt = Attempt(
        failure_kind=FailureKind.NODE_FAILURE,
        resumed_from_step=resumed,
        resume_known=known,
        checkpoint_step=saved,
        last_step=last,
    )
    assert lost_gpu_seconds(attempt, 1000.0) == pytest.approx(1000.0 * lost)
    attempt.failure_kind = FailureKind.STALLED
    assert lost_gpu_seconds(attempt, 1000.0) == 0


def test_fill_missing_records_attempts_that_ended_before_the_ledger(alice, make_task, fake_ray, clock):
    ray = fake_ray([4])
    tasks = [make_task(alice, PPO_SPEC) for _ in range(3)]
    attempts = []
    for task in tasks:
        attempt = running(ray, task, clock)
        clock.advance(10)
        attempts.append(ended(ray, attempt, clock))
    UsageRecord.objects.all().delete()  # as before the ledger existed
    live = make_task(alice, PPO_SPEC)
    running(ray, live, clock)
    assert fill_missing(batch=2) == 3
    assert sorted(UsageRecord.objects.values_list("attempt_id", flat=True)) == sorted(a.pk for a in attempts)
    assert {row.gpu_seconds for row in UsageRecord.objects.all()} == {GPUS * 10.0}
    assert fill_missing() == 0


def test_the_backfill_command_says_how_many_it_recorded(alice, make_task, fake_ray, clock):
    ray = fake_ray([4])
    ended(ray, running(ray, make_task(alice, PPO_SPEC), clock), clock)
    UsageRecord.objects.all().delete()
    out = io.StringIO()
    call_command("usage_backfill", stdout=out)
    assert out.getvalue() == "Recorded 1 ended attempts in the usage ledger.\n"
    assert UsageRecord.objects.count() == 1


def test_the_backfill_costs_the_same_queries_per_batch_however_many_attempts(alice, bob, make_task, make_group):
    make_group("vision", alice)
    start = timezone.now() - timedelta(days=1)

    def ended_before_the_ledger(user, attempts: int) -> Task:
        task = make_task(user, PPO_SPEC, created_at=start - timedelta(seconds=90))
        for number in range(1, attempts + 1):
            Attempt.objects.create(
                task=task,
                attempt_no=number,
                ray_submission_id=Attempt.submission_id_for(task.task_id, number),
                gpus=GPUS,
                quota=Quota.BORROWED if number == 2 else Quota.IN_QUOTA,
                failure_kind=FailureKind.NODE_FAILURE if number < attempts else "",
                start_time=start + timedelta(hours=number),
                end_time=start + timedelta(hours=number, seconds=10),
            )
        return task

    def queries(batch: int) -> int:
        with CaptureQueriesContext(connection) as captured:
            fill_missing(batch=batch)
        return len(captured)

    ended_before_the_ledger(alice, 1)
    few = queries(batch=100)
    tasks = [ended_before_the_ledger(user, 3) for user in (alice, bob, alice)]
    assert queries(batch=100) == few  # 9 attempts cost what 1 did
    # As settle records each: its user's group, its quota's split, the first wait on the first start only.
    rows = UsageRecord.objects.filter(task__in=tasks).order_by("task_id", "attempt__attempt_no")
    assert [(row.group, row.borrowed_gpu_seconds, row.wait_s) for row in rows[:3]] == [
        ("vision", 0, 3690),
        ("vision", GPUS * 10, None),
        ("vision", 0, None),
    ]
    assert {row.group for row in rows if row.user_id == bob.pk} == {""}
    assert rows[0].lost_gpu_seconds == GPUS * 10  # a node failure, no checkpoint known


def test_an_attempt_counts_in_the_group_it_was_admitted_in_though_its_owner_moved_while_it_ran(
    alice, make_task, fake_ray, clock, make_group
):
    make_group("vision", alice)
    nlp = make_group("nlp", nominal_gpus=0)
    ray = fake_ray([4])
    task = make_task(alice, PPO_SPEC)
    attempt = running(ray, task, clock)
    assert attempt.group is not None and attempt.group.name == "vision"  # admitted in vision's quota
    Membership.objects.filter(user=alice).update(group=nlp)
    clock.advance(60)
    ended(ray, attempt, clock)
    assert UsageRecord.objects.get().group == "vision"
    # The backfill reads it the same way.
    UsageRecord.objects.all().delete()
    assert fill_missing() == 1
    assert UsageRecord.objects.get().group == "vision"
